import type { CreditOperation } from '../contracts/registry';
import { metrics } from '../monitoring/metrics';
import { AppError } from './errors';
import { newId } from './ids';
import { COLLECTIONS, onlyDuplicateKeys, type Database } from './mongo';

/**
 * Credits. Each debit is ONE conditional single-document update ($inc guarded by balance >= amount,
 * and by the reference not being charged already), so concurrent debits never take the balance
 * below zero and a retried debit never charges twice. No multi-document transactions: the ledger
 * entry is written first as `pending`, then the balance moves, then the entry is `applied`; the
 * scheduler's `reconcile` settles what a crash left pending (see there). Refunds are idempotent per
 * reference the same way.
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

  /**
   * Move the balance for `ref` and set its charge marker in ONE conditional update (balance
   * covers it, `ref` not charged already). True when `ref` is paid for, now or before; false
   * when the balance is short.
   */
  const charge = async (input: { accountId: string; ref: string; operation: CreditOperation; amount: number; timeoutMs?: number }): Promise<boolean> => {
    const r = await db.accounts.updateOne(
      { _id: input.accountId, credits: { $gte: input.amount }, chargedRefs: { $ne: input.ref } },
      { $inc: { credits: -input.amount }, $push: { chargedRefs: { $each: [input.ref], $slice: -1000 } } },
      input.timeoutMs ? { timeoutMS: input.timeoutMs } : {},
    );
    if (r.modifiedCount === 1) {
      metrics.creditsCharged.inc({ operation: input.operation }, input.amount);
      return true;
    }
    if (await db.accounts.countDocuments({ _id: input.accountId, chargedRefs: input.ref })) return true;
    metrics.insufficientCredits.inc({ operation: input.operation });
    return false;
  };

  const api = {
    price,

    async balance(accountId: string): Promise<number> {
      const a = await db.accounts.findOne({ _id: accountId }, { projection: { credits: 1 } });
      return a?.credits ?? 0;
    },

    /**
     * Debit `amount` for `ref` (the job or hold it pays for) or throw insufficient_credits (402).
     * Idempotent per ref: the account keeps the last 1000 charged refs. The ledger entry stays
     * `pending` until the caller has created what was paid for and calls `confirm(ref)`; if the
     * process dies first, `reconcile` gives the credits back.
     */
    async debit(input: { accountId: string; operation: CreditOperation; amount: number; jobId?: string; requestId?: string }): Promise<void> {
      const ref = input.jobId ?? newId('chg');
      const ledgerId = `led_charge_${ref}`;
      await db.ledger.insertOne({
        _id: ledgerId,
        accountId: input.accountId,
        kind: 'charge',
        state: 'pending',
        operation: input.operation,
        amount: input.amount,
        jobId: input.jobId ?? null,
        requestId: input.requestId ?? null,
        at: new Date(),
      });
      if (!(await charge({ accountId: input.accountId, ref, operation: input.operation, amount: input.amount }))) {
        await db.ledger.deleteOne({ _id: ledgerId, state: 'pending' });
        throw new AppError('insufficient_credits', `not enough AI credits: ${input.operation} costs ${input.amount}`);
      }
    },

    /**
     * Charge a job: ONE conditional update, idempotent per job (the account's chargedRefs), with
     * no ledger write: the job document already says what it costs, and its ledger entry is
     * written after (`recordCharges`, batched by the jobs module; the sweep writes any a crash
     * lost). True when the job is paid for (now or before), false when the balance is short.
     */
    chargeJob: (input: { accountId: string; jobId: string; operation: CreditOperation; amount: number; timeoutMs?: number }) => charge({ ...input, ref: input.jobId }),

    /** Drop charge markers whose charge is recorded elsewhere now (see AccountDoc.chargedRefs). */
    async releaseMarkers(accountId: string, refs: string[]): Promise<void> {
      if (refs.length) await db.accounts.updateOne({ _id: accountId }, { $pullAll: { chargedRefs: refs } });
    },

    /** Ledger entries of charged jobs, idempotent (one id per job: a repeat is ignored). */
    async recordCharges(entries: { accountId: string; jobId: string; operation: CreditOperation; amount: number; requestId: string | null; at: Date }[]): Promise<void> {
      if (entries.length === 0) return;
      const docs = entries.map((e) => ({ _id: `led_charge_${e.jobId}`, accountId: e.accountId, kind: 'charge' as const, state: 'applied' as const, operation: e.operation, amount: e.amount, jobId: e.jobId, requestId: e.requestId, at: e.at }));
      try {
        await db.ledger.insertMany(docs, { ordered: false });
      } catch (err) {
        if (!onlyDuplicateKeys(err)) throw err;
      }
    },

    /** What the debit for `ref` paid for now exists: the charge stands (and its marker goes). */
    async confirm(ref: string, accountId?: string): Promise<void> {
      await db.ledger.updateOne({ _id: `led_charge_${ref}` }, { $set: { state: 'applied' } });
      if (accountId) await api.releaseMarkers(accountId, [ref]);
    },

    /**
     * Settle charges a crash left `pending` (older than `graceMs`): when the balance never moved,
     * the entry goes; when it moved and what it paid for exists (`isLive`: the job or the hold),
     * the entry is applied; when it moved and nothing was created (the process died between the
     * debit and the insert), the credits are given back.
     */
    async reconcile(isLive: (ref: string) => Promise<boolean>, graceMs: number): Promise<{ dropped: number; applied: number; refunded: number }> {
      const out = { dropped: 0, applied: 0, refunded: 0 };
      const pending = await db.ledger.find({ kind: 'charge', state: 'pending', at: { $lt: new Date(Date.now() - graceMs) } }).limit(500).toArray();
      for (const e of pending) {
        const ref = e._id.replace(/^led_charge_/, '');
        const charged = await db.accounts.countDocuments({ _id: e.accountId, chargedRefs: ref });
        if (!charged) {
          await db.ledger.deleteOne({ _id: e._id, state: 'pending' });
          out.dropped++;
        } else if (await isLive(ref)) {
          await db.ledger.updateOne({ _id: e._id }, { $set: { state: 'applied' } });
          await api.releaseMarkers(e.accountId, [ref]);
          out.applied++;
        } else {
          // Refund first (idempotent per ref), then mark: a crash between leaves it pending and
          // the next run refunds nothing twice.
          await api.refund({ accountId: e.accountId, operation: e.operation, amount: e.amount, jobId: ref });
          await db.ledger.updateOne({ _id: e._id }, { $set: { state: 'applied' } });
          await api.releaseMarkers(e.accountId, [ref]);
          out.refunded++;
        }
      }
      return out;
    },

    /**
     * Give back a debit. With a jobId it is idempotent per job: the account remembers the jobs it
     * refunded (the last 1000) in the same single-document update that adds the credits, and the
     * ledger entry has a unique id per job, so calling it again after a crash refunds nothing twice.
     */
    async refund(input: { accountId: string; operation: CreditOperation; amount: number; jobId?: string }): Promise<void> {
      // Refunded before (its ledger entry exists): nothing to do, whatever the account remembers.
      if (input.jobId && (await db.ledger.countDocuments({ _id: `led_refund_${input.jobId}` }))) return;
      if (input.amount > 0) {
        if (input.jobId) {
          await db.accounts.updateOne(
            { _id: input.accountId, refundedJobs: { $ne: input.jobId } },
            { $inc: { credits: input.amount }, $push: { refundedJobs: { $each: [input.jobId], $slice: -200 } } },
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
      await api.confirm(id, input.accountId);
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
