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
/** A debit waiting for a synchronous call's outcome (see `hold`). WARNING: persisted. */
interface HoldDoc {
  _id: string;
  accountId: string;
  operation: CreditOperation;
  amount: number;
  until: Date;
  /**
   * The document the call makes when it delivers (a project, a sheet commit), by collection and
   * `_id`: a hold settled after a crash is captured, not released, when it exists.
   */
  deliveredBy?: HoldDelivery | null;
  /** Set when a settler took the hold over; it can no longer be extended (see `extend`). */
  settling?: Date;
}

/** What a hold pays for, looked up by `_id` (and the hold's account) in `collection`. */
export interface HoldDelivery {
  collection: string;
  id: string;
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
     * Debit for a synchronous call (POST /images, /sheets/{id}/edit, /extract-flowchart): the
     * debit is recorded as a hold until `capture` (delivered) or `release` (refunded). If the
     * process dies while it waits, the scheduler settles holds past `until`: released, unless
     * `deliveredBy` names a document that exists (the call delivered and the process died before
     * capturing), then captured. So a lost answer is never paid for and a delivery never free.
     *
     * `id` names the hold (e.g. derived from an Idempotency-Key, so a retry finds it); an id
     * whose debit exists already (the hold was settled) gets a fresh one instead.
     */
    async hold(input: { accountId: string; operation: CreditOperation; amount: number; requestId: string; ttlMs: number; id?: string; deliveredBy?: HoldDelivery }): Promise<string> {
      const used = input.id !== undefined && (await db.ledger.countDocuments({ _id: `led_charge_${input.id}` })) > 0;
      const id = input.id !== undefined && !used ? input.id : newId('hold');
      await api.debit({ accountId: input.accountId, operation: input.operation, amount: input.amount, requestId: input.requestId, jobId: id });
      await holds.insertOne({ _id: id, accountId: input.accountId, operation: input.operation, amount: input.amount, until: new Date(Date.now() + input.ttlMs), deliveredBy: input.deliveredBy ?? null });
      await api.confirm(id, input.accountId);
      return id;
    },

    /**
     * Keep a hold from being settled for `ttlMs` more. Call it right before writing what the hold
     * pays for: false when a settler took the hold over already (it is being or was released),
     * then write nothing. One conditional update, so it and a settler's claim never both win.
     */
    async extend(holdId: string, ttlMs: number): Promise<boolean> {
      const r = await holds.updateOne({ _id: holdId, settling: { $exists: false } }, { $set: { until: new Date(Date.now() + ttlMs) } });
      return r.matchedCount === 1;
    },

    /** Whether a hold is still waiting (neither captured nor released). */
    async pending(holdId: string): Promise<boolean> {
      return (await holds.countDocuments({ _id: holdId })) > 0;
    },

    /** The call delivered: the charge stands. */
    async capture(holdId: string): Promise<void> {
      await holds.deleteOne({ _id: holdId });
    },

    /**
     * Settle a hold: take it over (no `extend` wins after this), then capture it when its
     * `deliveredBy` document exists, else give the credits back (idempotent per hold).
     * `expiredBefore` settles it only if its `until` is before then (the sweeper). 'gone' when
     * there was no such hold (captured, released, or extended meanwhile).
     */
    async settle(holdId: string, opts: { expiredBefore?: Date } = {}): Promise<'captured' | 'released' | 'gone'> {
      const filter = opts.expiredBefore ? { _id: holdId, until: { $lt: opts.expiredBefore } } : { _id: holdId };
      const h = await holds.findOneAndUpdate(filter, { $set: { settling: new Date() } }, { returnDocument: 'after' });
      if (!h) return 'gone';
      const d = h.deliveredBy;
      if (d && (await db.db.collection(d.collection).countDocuments({ _id: d.id as never, accountId: h.accountId })) > 0) {
        await holds.deleteOne({ _id: holdId });
        return 'captured';
      }
      // Refund first (idempotent per hold), then forget the hold: a crash between leaves it for the sweeper.
      await api.refund({ accountId: h.accountId, operation: h.operation, amount: h.amount, jobId: h._id });
      await holds.deleteOne({ _id: holdId });
      return 'released';
    },

    /** The call failed: give the credits back, unless what the hold pays for exists after all (see `settle`). True when released. */
    async release(holdId: string): Promise<boolean> {
      return (await api.settle(holdId)) === 'released';
    },

    /** Settle holds whose call outlived its deadline (the waiting process died): captured when delivered, else released. */
    async settleExpiredHolds(now = new Date()): Promise<{ released: number; captured: number }> {
      const expired = await holds.find({ until: { $lt: now } }, { projection: { _id: 1 } }).limit(500).toArray();
      const out = { released: 0, captured: 0 };
      for (const h of expired) {
        const r = await api.settle(h._id, { expiredBefore: now });
        if (r !== 'gone') out[r]++;
      }
      return out;
    },
  };
  return api;
}
export type Credits = ReturnType<typeof createCredits>;
