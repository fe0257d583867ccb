import type { LedgerDoc, Store } from '../infra/mongo';
import { openStore } from '../infra/mongo';

/**
 * The balance on the account document and the credit ledger: every query the ledger (ledger.ts),
 * the credit leases (leases.ts) and the jobs sweep (platform/jobs/recovery.ts) make on these two
 * collections. The logic around them (idempotency, order of writes) stays with the callers.
 */
export function createLedgerRepository(store: Store) {
  const { accounts, ledger } = openStore(store);
  return {
    /**
     * The account document's balance and markers, for one account (its `_id` is the account id:
     * every update below names it, so one account's charge cannot touch another's balance).
     */
    forAccount(accountId: string) {
      const me = { _id: accountId };
      return {
        /**
         * Move the balance for `ref` and set its charge marker in ONE conditional update (balance
         * covers it, `ref` not charged already); the account after it, or null.
         */
        charge: (input: { ref: string; millicredits: number; timeoutMs?: number }) =>
          // findOneAndUpdate rather than updateOne (the same work for the server): the balance after
          // the debit tells the caller whether a credit lease is worth taking for the next job.
          accounts.findOneAndUpdate(
            { ...me, millicredits: { $gte: input.millicredits }, chargedRefs: { $ne: input.ref } },
            {
              $inc: { millicredits: -input.millicredits },
              $push: { chargedRefs: { $each: [input.ref], $slice: -1000 } },
            },
            // No projection: FerretDB 1.24 does not implement one for findAndModify.
            { returnDocument: 'after', ...(input.timeoutMs ? { timeoutMS: input.timeoutMs } : {}) },
          ),

        /** How many accounts (0 or 1) carry `ref` among their charge markers. */
        markedCount: (ref: string) => accounts.countDocuments({ ...me, chargedRefs: ref }),

        /** Drop charge markers (see AccountDoc.chargedRefs). */
        async pullMarkers(refs: string[]): Promise<void> {
          await accounts.updateOne(me, { $pullAll: { chargedRefs: refs } });
        },

        /** Add a job's refund to the balance, once per job (`refundedJobs`, the last 200). */
        async creditRefund(jobId: string, millicredits: number): Promise<void> {
          await accounts.updateOne(
            { ...me, refundedJobs: { $ne: jobId } },
            {
              $inc: { millicredits },
              $push: { refundedJobs: { $each: [jobId], $slice: -200 } },
            },
          );
        },

        /** Add credits to the balance (a refund without a job). */
        async addToBalance(millicredits: number): Promise<void> {
          await accounts.updateOne(me, { $inc: { millicredits } });
        },

        /** The balance and the credit leases the account holds. */
        balance: () => accounts.findOne(me, { projection: { millicredits: 1, leaseRefs: 1 } }),

        /**
         * Take a lease's credits: ONE conditional update that leaves `minBalance` on the account and
         * records the lease's marker (`leaseRefs`). True when the account was debited.
         */
        async takeForLease(
          input: { millicredits: number; minBalance: number; timeoutMs?: number },
          leaseId: string,
        ): Promise<boolean> {
          const r = await accounts.updateOne(
            { ...me, millicredits: { $gte: input.millicredits + input.minBalance }, leaseRefs: { $ne: leaseId } },
            { $inc: { millicredits: -input.millicredits }, $push: { leaseRefs: leaseId } },
            input.timeoutMs ? { timeoutMS: input.timeoutMs } : {},
          );
          return r.modifiedCount === 1;
        },

        /**
         * Give back what lease `leaseId` did not spend, in the update that removes its marker (so
         * only once). True when the account still carried the marker.
         */
        async returnLease(leaseId: string, returned: number): Promise<boolean> {
          const r = await accounts.updateOne(
            { ...me, $or: [{ leaseRefs: leaseId }, { chargedRefs: leaseId }] },
            { $inc: { millicredits: returned }, $pull: { leaseRefs: leaseId, chargedRefs: leaseId } },
          );
          return r.modifiedCount === 1;
        },
      };
    },

    /** Accounts after `afterId` (by `_id`) that carry charge markers: their markers only. */
    markedAccounts: (afterId: string, limit: number) =>
      accounts
        .find({ _id: { $gt: afterId }, 'chargedRefs.0': { $exists: true } }, { projection: { chargedRefs: 1 } })
        .sort({ _id: 1 })
        .limit(limit)
        .toArray(),

    /** Ledger entries, unordered; a duplicate `_id` fails its own document only. */
    async insertEntries(docs: LedgerDoc[]): Promise<void> {
      await ledger.insertMany(docs, { ordered: false });
    },

    async insertEntry(doc: LedgerDoc): Promise<void> {
      await ledger.insertOne(doc);
    },

    /** How many ledger entries have this `_id` (0 or 1); `limit` as the caller asks it. */
    entryCount: (id: string, opts: { limit?: number } = {}) =>
      opts.limit ? ledger.countDocuments({ _id: id }, { limit: opts.limit }) : ledger.countDocuments({ _id: id }),

    /** Whether the entry exists and is applied (0 or 1). */
    appliedCount: (id: string) => ledger.countDocuments({ _id: id, state: 'applied' }),

    /** Charges still `pending` from before `before` (500 at most). */
    pendingCharges: (before: Date) =>
      ledger
        .find({ kind: 'charge', state: 'pending', at: { $lt: before } })
        .limit(500)
        .toArray(),

    /** Drop an entry while it is still pending. */
    async deletePending(id: string): Promise<void> {
      await ledger.deleteOne({ _id: id, state: 'pending' });
    },

    async markApplied(id: string): Promise<void> {
      await ledger.updateOne({ _id: id }, { $set: { state: 'applied' } });
    },
  };
}
export type LedgerRepository = ReturnType<typeof createLedgerRepository>;
