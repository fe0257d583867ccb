import { accountSlice } from '../infra/tenant';
import type { CreditOperation } from '../../contracts/registry';
import { COLLECTIONS, isDuplicateKey, type JobDoc, type Store, openStore } from '../infra/mongo';

/** What a hold pays for, looked up by `_id` (and the hold's account) in `collection`. */
export interface HoldDelivery {
  collection: string;
  id: string;
}

/** A debit waiting for a synchronous call's outcome (see holds.ts `hold`). WARNING: persisted. */
export interface HoldDoc {
  _id: string;
  accountId: string;
  operation: CreditOperation;
  millicredits: number;
  until: Date;
  /**
   * The document the call makes when it delivers (a project, a sheet commit), by collection and
   * `_id`: a hold settled after a crash is captured, not released, when it exists.
   */
  deliveredBy?: HoldDelivery | null;
  /** Set when a settler took the hold over; it can no longer be extended (see `extend`). */
  settling?: Date;
  /**
   * A fence, not a hold: `reconcile` gave back a debit whose hold was never made, and keeps its
   * id taken (a day) so a request that stalled past the grace cannot make it any more.
   */
  fence?: true;
}

/**
 * Credits an API process took from an account in one conditional update, to charge jobs from in
 * memory (see leases.ts createCreditLeases). WARNING: persisted. While the lease is held, the account
 * carries its id among `leaseRefs` (leases taken before that field existed: among `chargedRefs`):
 * that marker says the account was debited, and it leaves in the same update that gives the
 * unspent part back, so the return happens once. `leaseRefs` is never trimmed, unlike
 * `chargedRefs`, whose last 1000 entries could push a lease's marker out.
 */
export interface LeaseDoc {
  _id: string;
  accountId: string;
  /** The process spending it (platform/infra/instance.ts instanceId). */
  owner: string;
  millicredits: number;
  at: Date;
  /** The holder stops spending before this; afterwards the scheduler settles what is left. */
  until: Date;
  /** Set by whoever settles it (the holder, or the scheduler after `until`). */
  settling?: Date | null;
  /**
   * What the holder has written down as spent, a batch at a time (`addLeaseSpend`, at most 20 ms, 100 ms under a stream
   * after the answer): what the balance shown subtracts while the holder vouches for it (see
   * LEASE_VOUCH_MS). Settlement does not trust it: the holder settles with its own count, the
   * scheduler counts the jobs that name the lease.
   */
  spentMillicredits?: number;
  /** When the holder last wrote `spentMillicredits` down (its clock); absent before its first batch. */
  spentAt?: Date;
}

/**
 * The collections credits own besides the account and the ledger (ledger.repository.ts): holds
 * and fences, and leases (with the jobs a lease paid for).
 */
export function createCreditsRepository(store: Store) {
  const db = openStore(store);
  const holds = db.db.collection<HoldDoc>(COLLECTIONS.creditHolds);
  const leases = db.db.collection<LeaseDoc>(COLLECTIONS.creditLeases);
  return {
    /** One account's holds, fences and leases. */
    forAccount(accountId: string) {
      const myHolds = accountSlice(holds, accountId);
      return {
        /** The account's lease, by `_id`. */
        lease: (leaseId: string) => accountSlice(leases, accountId).findOne({ _id: leaseId }),

        /**
         * Take `ref`'s hold id so the hold can never be made: true when it is fenced (now or by an
         * earlier run), false when a real hold holds it (the request made it after all).
         */
        async fence(ref: string, operation: CreditOperation, millicredits: number): Promise<boolean> {
          const now = new Date();
          try {
            await myHolds.insertOne({
              _id: ref,
              accountId,
              operation,
              millicredits,
              until: now,
              deliveredBy: null,
              settling: now,
              fence: true,
            });
            return true;
          } catch (err) {
            if (!isDuplicateKey(err)) throw err;
            // By `_id` across accounts: a real hold of another account under this ref is not a fence.
            return (await holds.countDocuments({ _id: ref, fence: true })) > 0;
          }
        },

        /** Whether what a hold pays for exists, in the account. */
        async delivered(d: HoldDelivery): Promise<boolean> {
          return (await db.db.collection(d.collection).countDocuments({ _id: d.id as never, accountId })) > 0;
        },
      };
    },

    insertHold: (doc: HoldDoc) => holds.insertOne(doc),

    /** Moves a hold's `until` while no settler took it over; false when one did. */
    async extendHold(holdId: string, until: Date): Promise<boolean> {
      const r = await holds.updateOne({ _id: holdId, settling: { $exists: false } }, { $set: { until } });
      return r.matchedCount === 1;
    },

    /** Whether a hold is stored under `holdId`. */
    async holdExists(holdId: string): Promise<boolean> {
      return (await holds.countDocuments({ _id: holdId })) > 0;
    },

    deleteHold: (holdId: string) => holds.deleteOne({ _id: holdId }),

    /** Takes a hold over for settling (`settling` = now); only if its `until` is before `expiredBefore` when given. */
    claimHold(holdId: string, expiredBefore?: Date) {
      const filter = expiredBefore ? { _id: holdId, until: { $lt: expiredBefore } } : { _id: holdId };
      return holds.findOneAndUpdate(filter, { $set: { settling: new Date() } }, { returnDocument: 'after' });
    },

    /** Drops fences whose `until` is before `before`. */
    dropFences: (before: Date) => holds.deleteMany({ fence: true, until: { $lt: before } }),

    /** Real holds (not fences) whose `until` is before `now`, at most 500. */
    expiredHolds: (now: Date) =>
      holds
        .find({ until: { $lt: now }, fence: { $ne: true } }, { projection: { _id: 1 } })
        .limit(500)
        .toArray(),

    /** Adds to each lease's `spentMillicredits` (lease id → millicredits), in one command. */
    async addLeaseSpend(spends: ReadonlyMap<string, number>, now: Date): Promise<void> {
      await leases.bulkWrite(
        [...spends].map(([id, millicredits]) => ({
          updateOne: {
            filter: { _id: id },
            update: { $inc: { spentMillicredits: millicredits }, $set: { spentAt: now } },
          },
        })),
        { ordered: false },
      );
    },

    insertLease: (lease: LeaseDoc) => leases.insertOne(lease),

    deleteLease: (leaseId: string) => leases.deleteOne({ _id: leaseId }),

    /**
     * Claims a lease for settling (`settling` = now) when nobody settles it, or its settler's claim
     * is over a minute old; only if its `until` is before `expiredBefore` when given.
     */
    claimLease: (leaseId: string, now: Date, expiredBefore?: Date) =>
      leases.findOneAndUpdate(
        {
          _id: leaseId,
          ...(expiredBefore ? { until: { $lt: expiredBefore } } : {}),
          $or: [{ settling: null }, { settling: { $lt: new Date(now.getTime() - 60_000) } }],
        },
        { $set: { settling: now } },
        { returnDocument: 'after' },
      ),

    /** Leases whose `until` is before `before`, at most 200. */
    expiredLeases: (before: Date) =>
      leases
        .find({ until: { $lt: before } }, { projection: { _id: 1 } })
        .limit(200)
        .toArray(),

    /** Whether a real hold (not a fence) is stored under `ref`: what a pending debit paid for. */
    async holdMade(ref: string): Promise<boolean> {
      return (await holds.countDocuments({ _id: ref, fence: { $ne: true } })) > 0;
    },

    /**
     * The jobs a lease paid for: the truth of what it spent. They were created after the lease was
     * taken, so the account's (accountId, createdAt) index narrows it on MongoDB; FerretDB scans.
     * It runs only when a lease's count cannot be trusted (see LEASE_VOUCH_MS) or is not known.
     */
    jobsOfLease: (l: Pick<LeaseDoc, '_id' | 'at' | 'accountId'>) =>
      db.jobs
        .find(
          { accountId: l.accountId, createdAt: { $gte: l.at }, 'credits.lease': l._id },
          { projection: { _id: 1, accountId: 1, createdAt: 1, credits: 1, status: 1, dispatchedAt: 1 } },
        )
        .toArray() as Promise<
        Pick<JobDoc, '_id' | 'accountId' | 'createdAt' | 'credits' | 'status' | 'dispatchedAt'>[]
      >,
  };
}
export type CreditsRepository = ReturnType<typeof createCreditsRepository>;

/**
 * What the credit-units migration reads and writes (units.ts migrateCreditUnits): any collection
 * that held decimal credits, by name, and the `migrations` record that it ran.
 */
export function createUnitsMigrationStore(store: Store) {
  const db = openStore(store);
  const done = db.db.collection<{ _id: string; at: Date }>(COLLECTIONS.migrations);
  const of = (collection: string) => db.db.collection<Record<string, unknown> & { _id: string }>(collection);
  return {
    async ran(id: string): Promise<boolean> {
      return (await done.countDocuments({ _id: id })) > 0;
    },

    /** Record that `id` ran; a second process recording it too is not an error. */
    async record(id: string): Promise<void> {
      try {
        await done.insertOne({ _id: id, at: new Date() });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    },

    /** The next `limit` documents of `collection` (by `_id`, after `after`) that still carry `field`. */
    carrying: (collection: string, field: string, after: string | null, limit: number) =>
      of(collection)
        .find({ [field]: { $exists: true }, ...(after === null ? {} : { _id: { $gt: after } }) })
        .sort({ _id: 1 })
        .limit(limit)
        .toArray(),

    /** One conditional update; the number of documents it changed (0 when another process did). */
    async convert(
      collection: string,
      filter: Record<string, unknown>,
      set: Record<string, number>,
      unset: Record<string, ''>,
    ): Promise<number> {
      return (await of(collection).updateOne(filter, { $set: set, $unset: unset })).modifiedCount;
    },
  };
}
