import type { CreditOperation } from '../contracts/registry';
import { metrics } from '../monitoring/metrics';
import { AppError } from './errors';
import { newId } from './ids';
import { COLLECTIONS, type Database } from './mongo';

/**
 * Credits: each debit is ONE conditional update ($inc guarded by balance >= amount), so
 * concurrent debits can never take the balance below zero, on MongoDB and FerretDB alike.
 * Every charge and refund is written to the ledger right after the balance moves.
 */
/** A debit waiting for a synchronous call's outcome (see `hold`). */
interface HoldDoc {
  _id: string;
  accountId: string;
  operation: CreditOperation;
  amount: number;
  until: Date;
}

export function createCredits(db: Database, prices: Readonly<Record<CreditOperation, number>>) {
  const price = (op: CreditOperation, units = 1) => Math.round(prices[op] * units * 100) / 100;
  const holds = db.db.collection<HoldDoc>(COLLECTIONS.creditHolds);

  const api = {
    price,

    async balance(accountId: string): Promise<number> {
      const a = await db.accounts.findOne({ _id: accountId }, { projection: { credits: 1 } });
      return a?.credits ?? 0;
    },

    /** Debit `amount` or throw insufficient_credits (402). */
    async debit(input: { accountId: string; operation: CreditOperation; amount: number; jobId?: string; requestId?: string }): Promise<void> {
      if (input.amount > 0) {
        const r = await db.accounts.updateOne({ _id: input.accountId, credits: { $gte: input.amount } }, { $inc: { credits: -input.amount } });
        if (r.modifiedCount !== 1) {
          metrics.insufficientCredits.inc({ operation: input.operation });
          throw new AppError('insufficient_credits', `not enough AI credits: ${input.operation} costs ${input.amount}`);
        }
      }
      await db.ledger.insertOne({
        _id: newId('led'),
        accountId: input.accountId,
        kind: 'charge',
        operation: input.operation,
        amount: input.amount,
        jobId: input.jobId ?? null,
        requestId: input.requestId ?? null,
        at: new Date(),
      });
      metrics.creditsCharged.inc({ operation: input.operation }, input.amount);
    },

    /**
     * Give back a debit. With a jobId it is idempotent per job: the account remembers the jobs it
     * refunded (the last 1000) in the same single-document update that adds the credits, and the
     * ledger entry has a unique id per job, so calling it again after a crash refunds nothing twice.
     */
    async refund(input: { accountId: string; operation: CreditOperation; amount: number; jobId?: string }): Promise<void> {
      if (input.amount > 0) {
        if (input.jobId) {
          await db.accounts.updateOne(
            { _id: input.accountId, refundedJobs: { $ne: input.jobId } },
            { $inc: { credits: input.amount }, $push: { refundedJobs: { $each: [input.jobId], $slice: -1000 } } },
          );
        } else {
          await db.accounts.updateOne({ _id: input.accountId }, { $inc: { credits: input.amount } });
        }
      }
      try {
        await db.ledger.insertOne({
          _id: input.jobId ? `led_refund_${input.jobId}` : newId('led'),
          accountId: input.accountId,
          kind: 'refund',
          operation: input.operation,
          amount: input.amount,
          jobId: input.jobId ?? null,
          requestId: null,
          at: new Date(),
        });
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err; // already written before a crash
        return;
      }
      metrics.creditsRefunded.inc({ operation: input.operation }, input.amount);
    },

    /**
     * Debit for a synchronous call (POST /images): the debit is recorded as a hold until
     * `capture` (delivered) or `release` (refunded). If the process dies while it waits, the
     * scheduler releases holds past `until`, so a lost answer is never paid for.
     */
    async hold(input: { accountId: string; operation: CreditOperation; amount: number; requestId: string; ttlMs: number }): Promise<string> {
      const id = newId('hold');
      await api.debit({ ...input, jobId: id });
      await holds.insertOne({ _id: id, accountId: input.accountId, operation: input.operation, amount: input.amount, until: new Date(Date.now() + input.ttlMs) });
      return id;
    },

    /** The call delivered: the charge stands. */
    async capture(holdId: string): Promise<void> {
      await holds.deleteOne({ _id: holdId });
    },

    /** The call delivered nothing: give the credits back (idempotent per hold). */
    async release(holdId: string): Promise<boolean> {
      const h = await holds.findOne({ _id: holdId });
      if (!h) return false;
      await api.refund({ accountId: h.accountId, operation: h.operation, amount: h.amount, jobId: h._id });
      await holds.deleteOne({ _id: holdId });
      return true;
    },

    /** Release holds whose call outlived its deadline (the waiting process died). */
    async releaseExpiredHolds(now = new Date()): Promise<number> {
      const expired = await holds.find({ until: { $lt: now } }).limit(500).toArray();
      let n = 0;
      for (const h of expired) if (await api.release(h._id)) n++;
      return n;
    },
  };
  return api;
}
export type Credits = ReturnType<typeof createCredits>;
