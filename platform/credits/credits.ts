import type { CreditOperation } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import type { Logger } from '../infra/log';
import { COLLECTIONS, isDuplicateKey, onlyDuplicateKeys, type Database, type JobDoc } from '../infra/mongo';

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
 * A debit still `pending` this long is settled by `reconcile`: given back when what it paid for
 * was never made (the request died or the database went away between the debit and the hold).
 * A fence (HoldDoc.fence) makes it safe for a request still running, so it only needs to outlast
 * a healthy request's two commands between them; it was 5 minutes, during which the balance
 * shown lacked the credits.
 */
export const CHARGE_SETTLE_GRACE_MS = 15_000;

/**
 * A pending entry whose debit never happened is dropped only this late: a request that stalled
 * between writing it and debiting could still debit, and its debit needs the entry to be given
 * back. It costs the balance nothing meanwhile.
 */
export const CHARGE_DROP_GRACE_MS = 5 * 60_000;

/** How long a fence keeps a given-back hold's id taken. */
const FENCE_KEEP_MS = 24 * 3600_000;

/**
 * Credits an API process took from an account in one conditional update, to charge jobs from in
 * memory (see createCreditLeases). WARNING: persisted. While the lease is held, the account
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
 * How long the balance shown trusts a lease's `spentMillicredits`: while its holder keeps writing it down
 * (its batches follow each answer within 20 to 100 ms) and for this long after. Past it the
 * holder is idle, dead (its last batch may have died with it), or stopped spending from the
 * lease because a count became uncertain (an insert whose outcome it never learnt, a batch that
 * failed while the database was away): the balance then counts the jobs that name the lease, which
 * is what the lease spent, whatever happened to the holder. So the balance read is exact within
 * this long of an API process dying and as soon as the database answers again, not when the
 * scheduler settles the lease (LEASE_SETTLE_MARGIN_MS after it expired). Clocks that disagree by
 * more than this only make the balance count more often (or trust a dead holder that much longer).
 */
export const LEASE_VOUCH_MS = 2000;

/**
 * A lease is settled by the scheduler only this long after its `until`: `until` comes from the
 * holder's clock and is compared on the scheduler's, so their clocks may disagree by this much
 * (on top of the quarter of the lease, at most 5 s, the holder keeps between its last spend and
 * `until`) before a settlement could count the jobs while the holder's last insert still lands.
 */
export const LEASE_SETTLE_MARGIN_MS = 10_000;

/**
 * Credits are stored, added and compared as integer millicredits (thousandths of a credit; every
 * price is a whole number of them, config.ts refuses a finer one), so no sum ever drifts (a balance
 * once read back as 713.2500000000001). Conversions happen at the edges only: a price into
 * millicredits where a charge is computed (`millicreditsFor`), millicredits into a decimal number
 * of credits in JSON (`fromUnits`).
 */
export const MILLICREDITS_PER_CREDIT = 1000;

/** Credits (a decimal number, at most 3 decimals) as integer millicredits: 713.25 → 713250. */
export function toUnits(credits: number): number {
  const units = Math.round(credits * MILLICREDITS_PER_CREDIT);
  if (!Number.isSafeInteger(units)) throw new RangeError(`not a number of credits: ${credits}`);
  return units;
}

/** Integer millicredits as credits, the nearest double to the exact decimal (713250 → 713.25). */
export function fromUnits(units: number): number {
  return units / MILLICREDITS_PER_CREDIT;
}

/** The exact sum of amounts in credits (each of at most 3 decimals), added as millicredits: 0.1 + 0.2 → 0.3. */
export function addCredits(...amounts: number[]): number {
  return fromUnits(amounts.reduce((n, a) => n + toUnits(a), 0));
}

/**
 * Fields that held decimal credits before millicredits, per collection: old name → new name.
 * The first pair's old field says a document is in the old format.
 */
const DECIMAL_CREDIT_FIELDS: readonly { collection: string; fields: readonly [string, string][] }[] = [
  { collection: COLLECTIONS.accounts, fields: [['credits', 'millicredits']] },
  { collection: COLLECTIONS.ledger, fields: [['amount', 'millicredits']] },
  { collection: COLLECTIONS.creditHolds, fields: [['amount', 'millicredits']] },
  {
    collection: COLLECTIONS.creditLeases,
    fields: [
      ['amount', 'millicredits'],
      ['spent', 'spentMillicredits'],
    ],
  },
  { collection: COLLECTIONS.jobs, fields: [['credits.amount', 'credits.millicredits']] },
  { collection: COLLECTIONS.audit, fields: [['creditsCharged', 'millicreditsCharged']] },
  {
    collection: COLLECTIONS.liveSessions,
    fields: [
      ['charge.amount', 'charge.millicredits'],
      ['spent', 'spentMillicredits'],
    ],
  },
];

const MIGRATION_ID = 'credit-units-millicredits';

const valueAt = (doc: Record<string, unknown>, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), doc);

/**
 * Convert documents stored with decimal credits (before millicredits) at startup, before the
 * process serves; every process runs it (API, scheduler, workers: createRuntime).
 *
 * Safe with several processes at once, and after a crash half-way, without a lock: the format is
 * in the field's name (`credits` decimal, `millicredits` integer), and each document is converted
 * by ONE conditional update whose filter holds the old values it read: `$set` the new fields,
 * `$unset` the old ones. A second process converting the same document matches nothing (the old
 * field is gone), so nothing is converted twice; new documents never carry an old field. Once a
 * pass found nothing left, a `migrations` document records it and later starts skip the scans.
 * Processes of the version before must be stopped first: they would write the old fields again.
 */
export async function migrateCreditUnits(db: Database, log?: Logger): Promise<{ converted: number }> {
  const done = db.db.collection<{ _id: string; at: Date }>(COLLECTIONS.migrations);
  if (await done.countDocuments({ _id: MIGRATION_ID })) return { converted: 0 };
  let converted = 0;
  for (const { collection, fields } of DECIMAL_CREDIT_FIELDS) {
    const col = db.db.collection<Record<string, unknown> & { _id: string }>(collection);
    let after: string | null = null;
    for (;;) {
      const batch = await col
        .find({ [fields[0]![0]]: { $exists: true }, ...(after === null ? {} : { _id: { $gt: after } }) })
        .sort({ _id: 1 })
        .limit(500)
        .toArray();
      if (!batch.length) break;
      for (const doc of batch) {
        const filter: Record<string, unknown> = { _id: doc._id };
        const set: Record<string, number> = {};
        const unset: Record<string, ''> = {};
        for (const [from, to] of fields) {
          const old = valueAt(doc, from);
          if (old === undefined) continue;
          filter[from] = old;
          set[to] = toUnits(typeof old === 'number' ? old : 0);
          unset[from] = '';
        }
        const r = await col.updateOne(filter, { $set: set, $unset: unset });
        converted += r.modifiedCount;
      }
      after = batch[batch.length - 1]!._id;
    }
  }
  try {
    await done.insertOne({ _id: MIGRATION_ID, at: new Date() });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
  if (converted) log?.info('stored credits converted to millicredits', { documents: converted });
  return { converted };
}

/** What a hold pays for, looked up by `_id` (and the hold's account) in `collection`. */
export interface HoldDelivery {
  collection: string;
  id: string;
}

export function createCredits(db: Database, prices: Readonly<Record<CreditOperation, number>>) {
  const unitPrices = Object.fromEntries(Object.entries(prices).map(([op, p]) => [op, toUnits(p)])) as Record<
    CreditOperation,
    number
  >;
  /** What `count` of `op` costs, in millicredits (speech: `count` characters). */
  const millicreditsFor = (op: CreditOperation, count = 1) => unitPrices[op] * count;
  const holds = db.db.collection<HoldDoc>(COLLECTIONS.creditHolds);
  const leases = db.db.collection<LeaseDoc>(COLLECTIONS.creditLeases);

  /**
   * Take `ref`'s hold id so the hold can never be made: true when it is fenced (now or by an
   * earlier run), false when a real hold holds it (the request made it after all).
   */
  const fence = async (
    accountId: string,
    ref: string,
    operation: CreditOperation,
    millicredits: number,
  ): Promise<boolean> => {
    const now = new Date();
    try {
      await holds.insertOne({
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
      return (await holds.countDocuments({ _id: ref, fence: true })) > 0;
    }
  };

  /**
   * The jobs a lease paid for: the truth of what it spent. They were created after the lease was
   * taken, so the account's (accountId, createdAt) index narrows it on MongoDB; FerretDB scans.
   * It runs only when the scheduler settles a lease without its holder's count.
   */
  const jobsOfLease = (l: Pick<LeaseDoc, '_id' | 'at' | 'accountId'>) =>
    db.jobs
      .find(
        { accountId: l.accountId, createdAt: { $gte: l.at }, 'credits.lease': l._id },
        { projection: { _id: 1, accountId: 1, createdAt: 1, credits: 1, status: 1, dispatchedAt: 1 } },
      )
      .toArray() as Promise<Pick<JobDoc, '_id' | 'accountId' | 'createdAt' | 'credits' | 'status' | 'dispatchedAt'>[]>;

  /**
   * Move the balance for `ref` and set its charge marker in ONE conditional update (balance
   * covers it, `ref` not charged already). True when `ref` is paid for, now or before; false
   * when the balance is short.
   */
  const charge = async (input: {
    accountId: string;
    ref: string;
    operation: CreditOperation;
    millicredits: number;
    timeoutMs?: number;
    onBalance?: (millicredits: number) => void;
  }): Promise<boolean> => {
    // findOneAndUpdate rather than updateOne (the same work for the server): the balance after
    // the debit tells the caller whether a credit lease is worth taking for the next job.
    const after = await db.accounts.findOneAndUpdate(
      { _id: input.accountId, millicredits: { $gte: input.millicredits }, chargedRefs: { $ne: input.ref } },
      { $inc: { millicredits: -input.millicredits }, $push: { chargedRefs: { $each: [input.ref], $slice: -1000 } } },
      // No projection: FerretDB 1.24 does not implement one for findAndModify.
      { returnDocument: 'after', ...(input.timeoutMs ? { timeoutMS: input.timeoutMs } : {}) },
    );
    if (after) {
      input.onBalance?.(after.millicredits);
      metrics.creditsCharged.inc({ operation: input.operation }, fromUnits(input.millicredits));
      return true;
    }
    if (await db.accounts.countDocuments({ _id: input.accountId, chargedRefs: input.ref })) return true;
    metrics.insufficientCredits.inc({ operation: input.operation });
    return false;
  };

  const api = {
    millicreditsFor,

    /**
     * What the account can spend: its credits plus the unspent part of the leases API processes
     * hold. One read of the account and one read by `_id` per lease it holds (a few at most: one
     * per API process); a lease is leased minus what its holder wrote down as spent
     * (`LeaseDoc.spentMillicredits`) while the holder vouches for that count (LEASE_VOUCH_MS), else minus the
     * price of the jobs that name it (one more read, only then). Exact once the holders' batches
     * (at most 20 ms after each answer, 100 ms under a stream) are written, within LEASE_VOUCH_MS
     * of a holder dying, and as soon as the database answers after an outage.
     */
    async balance(accountId: string): Promise<number> {
      const a = await db.accounts.findOne({ _id: accountId }, { projection: { millicredits: 1, leaseRefs: 1 } });
      if (!a) return 0;
      if (!a.leaseRefs?.length) return a.millicredits;
      // By `_id` one at a time: FerretDB 1.24 scans the collection for `_id: { $in: [...] }`.
      const ls = await Promise.all(a.leaseRefs.map((id) => leases.findOne({ _id: id, accountId })));
      const now = Date.now();
      const unspent = await Promise.all(
        ls.map(async (l) => {
          if (!l) return 0;
          // The holder's count while it vouches for it; else what the lease's jobs cost.
          const vouched =
            !l.settling && now < l.until.getTime() && now - (l.spentAt ?? l.at).getTime() <= LEASE_VOUCH_MS;
          const spent = vouched
            ? (l.spentMillicredits ?? 0)
            : (await jobsOfLease(l)).reduce((n, j) => n + j.credits.millicredits, 0);
          return Math.max(0, l.millicredits - spent);
        }),
      );
      return unspent.reduce((n, u) => n + u, a.millicredits);
    },

    /** Write down what leases spent (lease id → millicredits), in one command: see LeaseDoc.spentMillicredits. */
    async addLeaseSpend(spends: ReadonlyMap<string, number>): Promise<void> {
      if (!spends.size) return;
      const now = new Date();
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

    /**
     * Take `amount` credits from the account for this process to spend in memory, when the
     * account keeps at least `minBalance` besides: the lease is stored first, then the account is
     * debited with the lease's marker in one conditional update. Null when the balance is short
     * (the lease is dropped again). A crash between the two leaves a lease the scheduler settles
     * after `until`: nothing to give back when the marker never reached the account.
     */
    async takeLease(input: {
      accountId: string;
      millicredits: number;
      minBalance: number;
      ttlMs: number;
      owner: string;
      timeoutMs?: number;
    }): Promise<LeaseDoc | null> {
      const at = new Date();
      const lease: LeaseDoc = {
        _id: newId('lse'),
        accountId: input.accountId,
        owner: input.owner,
        millicredits: input.millicredits,
        at,
        until: new Date(at.getTime() + input.ttlMs),
        settling: null,
        spentMillicredits: 0,
      };
      await leases.insertOne(lease);
      const r = await db.accounts.updateOne(
        {
          _id: input.accountId,
          millicredits: { $gte: input.millicredits + input.minBalance },
          leaseRefs: { $ne: lease._id },
        },
        { $inc: { millicredits: -input.millicredits }, $push: { leaseRefs: lease._id } },
        input.timeoutMs ? { timeoutMS: input.timeoutMs } : {},
      );
      if (r.modifiedCount === 1) {
        metrics.creditLeases.inc({ outcome: 'taken' });
        return lease;
      }
      await leases.deleteOne({ _id: lease._id });
      metrics.creditLeases.inc({ outcome: 'refused' });
      return null;
    },

    /**
     * Give back what a lease did not spend, once: claim it (`settling`), count its spend (`spent`, in millicredits,
     * when the holder knows it exactly, else the charges of the jobs naming it), then add
     * `millicredits - spent` to the account in the same update that removes the lease's marker (so a
     * second settlement gives nothing), and drop the lease. `expiredBefore` settles it only if
     * its `until` is before then (the scheduler). Null when someone else settles it or it is gone.
     *
     * Counting the jobs also writes the ledger entries a crash lost, but only of jobs known to
     * have reached the broker (a worker took them, or `dispatchedAt` is set): the jobs sweep reads
     * a lease job's entry as its dispatch record, so a job still queued and undispatched keeps
     * none, and the sweep publishes it, then writes its entry.
     */
    async settleLease(
      leaseId: string,
      opts: { spent?: number; expiredBefore?: Date } = {},
    ): Promise<{ spent: number; returned: number } | null> {
      const now = new Date();
      const l = await leases.findOneAndUpdate(
        {
          _id: leaseId,
          ...(opts.expiredBefore ? { until: { $lt: opts.expiredBefore } } : {}),
          $or: [{ settling: null }, { settling: { $lt: new Date(now.getTime() - 60_000) } }],
        },
        { $set: { settling: now } },
        { returnDocument: 'after' },
      );
      if (!l) return null;
      let spent = opts.spent;
      if (spent === undefined) {
        const jobs = await jobsOfLease(l);
        const published = jobs.filter((j) => j.status !== 'queued' || j.dispatchedAt);
        await api.recordCharges(
          published.map((j) => ({
            accountId: j.accountId,
            jobId: j._id,
            operation: j.credits.operation,
            millicredits: j.credits.millicredits,
            requestId: null,
            at: j.createdAt,
          })),
        );
        spent = jobs.reduce((n, j) => n + j.credits.millicredits, 0);
      }
      const returned = Math.max(0, l.millicredits - spent);
      const r = await db.accounts.updateOne(
        { _id: l.accountId, $or: [{ leaseRefs: l._id }, { chargedRefs: l._id }] },
        { $inc: { millicredits: returned }, $pull: { leaseRefs: l._id, chargedRefs: l._id } },
      );
      await leases.deleteOne({ _id: l._id });
      metrics.creditLeases.inc({ outcome: opts.spent === undefined ? 'settled_by_count' : 'returned' });
      return { spent, returned: r.modifiedCount === 1 ? returned : 0 };
    },

    /**
     * Leases whose holder did not settle them (it died, or its count is uncertain): settled from
     * their jobs once `until` is LEASE_SETTLE_MARGIN_MS past on this clock.
     */
    async settleExpiredLeases(now = new Date()): Promise<{ settled: number; returned: number }> {
      const before = new Date(now.getTime() - LEASE_SETTLE_MARGIN_MS);
      const expired = await leases
        .find({ until: { $lt: before } }, { projection: { _id: 1 } })
        .limit(200)
        .toArray();
      const out = { settled: 0, returned: 0 };
      for (const l of expired) {
        const r = await api.settleLease(l._id, { expiredBefore: before });
        if (!r) continue;
        out.settled++;
        out.returned += r.returned;
      }
      return out;
    },

    /**
     * Debit `amount` for `ref` (the job or hold it pays for) or throw insufficient_credits (402).
     * Idempotent per ref: the account keeps the last 1000 charged refs. The ledger entry stays
     * `pending` until the caller has created what was paid for and calls `confirm(ref)`; if the
     * process dies first, `reconcile` gives the credits back.
     */
    async debit(input: {
      accountId: string;
      operation: CreditOperation;
      millicredits: number;
      jobId?: string;
      requestId?: string;
    }): Promise<void> {
      const ref = input.jobId ?? newId('chg');
      const ledgerId = `led_charge_${ref}`;
      await db.ledger.insertOne({
        _id: ledgerId,
        accountId: input.accountId,
        kind: 'charge',
        state: 'pending',
        operation: input.operation,
        millicredits: input.millicredits,
        jobId: input.jobId ?? null,
        requestId: input.requestId ?? null,
        at: new Date(),
      });
      if (
        !(await charge({
          accountId: input.accountId,
          ref,
          operation: input.operation,
          millicredits: input.millicredits,
        }))
      ) {
        await db.ledger.deleteOne({ _id: ledgerId, state: 'pending' });
        throw new AppError(
          'insufficient_credits',
          `not enough AI credits: ${input.operation} costs ${fromUnits(input.millicredits)}`,
        );
      }
    },

    /**
     * Charge a job: ONE conditional update, idempotent per job (the account's chargedRefs), with
     * no ledger write: the job document already says what it costs, and its ledger entry is
     * written after (`recordCharges`, batched by the jobs module; the sweep writes any a crash
     * lost). True when the job is paid for (now or before), false when the balance is short.
     */
    chargeJob: (input: {
      accountId: string;
      jobId: string;
      operation: CreditOperation;
      millicredits: number;
      timeoutMs?: number;
      onBalance?: (millicredits: number) => void;
    }) => charge({ ...input, ref: input.jobId }),

    /** Drop charge markers whose charge is recorded elsewhere now (see AccountDoc.chargedRefs). */
    async releaseMarkers(accountId: string, refs: string[]): Promise<void> {
      if (refs.length) await db.accounts.updateOne({ _id: accountId }, { $pullAll: { chargedRefs: refs } });
    },

    /** Ledger entries of charged jobs, idempotent (one id per job: a repeat is ignored). */
    async recordCharges(
      entries: {
        accountId: string;
        jobId: string;
        operation: CreditOperation;
        millicredits: number;
        requestId: string | null;
        at: Date;
      }[],
    ): Promise<void> {
      if (entries.length === 0) return;
      const docs = entries.map((e) => ({
        _id: `led_charge_${e.jobId}`,
        accountId: e.accountId,
        kind: 'charge' as const,
        state: 'applied' as const,
        operation: e.operation,
        millicredits: e.millicredits,
        jobId: e.jobId,
        requestId: e.requestId,
        at: e.at,
      }));
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
     * Settle charges that a crash or a database outage left `pending` (older than `graceMs`,
     * CHARGE_SETTLE_GRACE_MS): when the balance moved and what it paid for exists (`isLive`: the
     * hold, or the job), the entry is applied; when it moved and nothing was made, the ref is
     * fenced (a HoldDoc with `fence`, so the hold can no longer be made: a request still running
     * fails on it instead of delivering) and the credits are given back. When the balance never
     * moved, nothing is owed; the entry goes after `dropGraceMs`.
     */
    async reconcile(
      isLive: (ref: string) => Promise<boolean>,
      graceMs = CHARGE_SETTLE_GRACE_MS,
      dropGraceMs = CHARGE_DROP_GRACE_MS,
    ): Promise<{ dropped: number; applied: number; refunded: number }> {
      const out = { dropped: 0, applied: 0, refunded: 0 };
      const now = Date.now();
      const pending = await db.ledger
        .find({ kind: 'charge', state: 'pending', at: { $lt: new Date(now - graceMs) } })
        .limit(500)
        .toArray();
      for (const e of pending) {
        const ref = e._id.replace(/^led_charge_/, '');
        const charged = await db.accounts.countDocuments({ _id: e.accountId, chargedRefs: ref });
        if (!charged) {
          if (e.at.getTime() >= now - dropGraceMs) continue;
          await db.ledger.deleteOne({ _id: e._id, state: 'pending' });
          out.dropped++;
        } else if ((await isLive(ref)) || !(await fence(e.accountId, ref, e.operation, e.millicredits))) {
          await db.ledger.updateOne({ _id: e._id }, { $set: { state: 'applied' } });
          await api.releaseMarkers(e.accountId, [ref]);
          out.applied++;
        } else {
          // Refund first (idempotent per ref), then mark: a crash between leaves it pending and
          // the next run refunds nothing twice.
          await api.refund({
            accountId: e.accountId,
            operation: e.operation,
            millicredits: e.millicredits,
            jobId: ref,
          });
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
    async refund(input: {
      accountId: string;
      operation: CreditOperation;
      millicredits: number;
      jobId?: string;
    }): Promise<void> {
      // Refunded before (its ledger entry exists): nothing to do, whatever the account remembers.
      if (input.jobId && (await db.ledger.countDocuments({ _id: `led_refund_${input.jobId}` }))) return;
      if (input.millicredits > 0) {
        if (input.jobId) {
          await db.accounts.updateOne(
            { _id: input.accountId, refundedJobs: { $ne: input.jobId } },
            {
              $inc: { millicredits: input.millicredits },
              $push: { refundedJobs: { $each: [input.jobId], $slice: -200 } },
            },
          );
        } else {
          await db.accounts.updateOne({ _id: input.accountId }, { $inc: { millicredits: input.millicredits } });
        }
      }
      try {
        await db.ledger.insertOne({
          _id: input.jobId ? `led_refund_${input.jobId}` : newId('led'),
          accountId: input.accountId,
          kind: 'refund',
          operation: input.operation,
          millicredits: input.millicredits,
          jobId: input.jobId ?? null,
          requestId: null,
          at: new Date(),
        });
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err; // already written before a crash
        return;
      }
      metrics.creditsRefunded.inc({ operation: input.operation }, fromUnits(input.millicredits));
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
    async hold(input: {
      accountId: string;
      operation: CreditOperation;
      millicredits: number;
      requestId: string;
      ttlMs: number;
      id?: string;
      deliveredBy?: HoldDelivery;
    }): Promise<string> {
      const used = input.id !== undefined && (await db.ledger.countDocuments({ _id: `led_charge_${input.id}` })) > 0;
      const id = input.id !== undefined && !used ? input.id : newId('hold');
      await api.debit({
        accountId: input.accountId,
        operation: input.operation,
        millicredits: input.millicredits,
        requestId: input.requestId,
        jobId: id,
      });
      try {
        await holds.insertOne({
          _id: id,
          accountId: input.accountId,
          operation: input.operation,
          millicredits: input.millicredits,
          until: new Date(Date.now() + input.ttlMs),
          deliveredBy: input.deliveredBy ?? null,
        });
      } catch (err) {
        // Fenced: this request took longer than CHARGE_SETTLE_GRACE_MS between its debit and its
        // hold, and the scheduler gave the debit back. Nothing is delivered, nothing is charged.
        if (isDuplicateKey(err))
          throw new AppError(
            'service_unavailable',
            'the call could not be started in time and was not charged; retry it',
            { cause: err },
          );
        throw err;
      }
      await api.confirm(id, input.accountId);
      return id;
    },

    /**
     * Keep a hold from being settled for `ttlMs` more. Call it right before writing what the hold
     * pays for: false when a settler took the hold over already (it is being or was released),
     * then write nothing. One conditional update, so it and a settler's claim never both win.
     */
    async extend(holdId: string, ttlMs: number): Promise<boolean> {
      const r = await holds.updateOne(
        { _id: holdId, settling: { $exists: false } },
        { $set: { until: new Date(Date.now() + ttlMs) } },
      );
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
      if (
        d &&
        (await db.db.collection(d.collection).countDocuments({ _id: d.id as never, accountId: h.accountId })) > 0
      ) {
        await holds.deleteOne({ _id: holdId });
        return 'captured';
      }
      // Refund first (idempotent per hold), then forget the hold: a crash between leaves it for the sweeper.
      await api.refund({ accountId: h.accountId, operation: h.operation, millicredits: h.millicredits, jobId: h._id });
      await holds.deleteOne({ _id: holdId });
      return 'released';
    },

    /** The call failed: give the credits back, unless what the hold pays for exists after all (see `settle`). True when released. */
    async release(holdId: string): Promise<boolean> {
      return (await api.settle(holdId)) === 'released';
    },

    /** Settle holds whose call outlived its deadline (the waiting process died): captured when delivered, else released. */
    async settleExpiredHolds(now = new Date()): Promise<{ released: number; captured: number }> {
      await holds.deleteMany({ fence: true, until: { $lt: new Date(now.getTime() - FENCE_KEEP_MS) } });
      const expired = await holds
        .find({ until: { $lt: now }, fence: { $ne: true } }, { projection: { _id: 1 } })
        .limit(500)
        .toArray();
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

export interface CreditLeaseSettings {
  /** Credits per lease; 0 turns leases off (every charge is a conditional update of the account). */
  credits: number;
  /** A lease is taken only while the account keeps at least this much besides. */
  minBalance: number;
  /** How long a lease lives; the holder stops spending a quarter before (at most 5 s before). */
  ttlMs: number;
}

/** A charge taken from a lease, until the job it pays for is stored (`commit`) or not (`release`). */
export interface LeaseSpend {
  leaseId: string;
  /** How long the job insert may take: it must reach the server while the lease is spendable. */
  timeoutMs: number;
  commit(): void;
  /**
   * `stored: false` only when the server refused the insert (a duplicate key); `'unknown'` (any
   * other failure: a timeout, a write-concern error after the write applied) leaves the lease to
   * the scheduler, which settles it from its jobs after it expired.
   */
  release(stored: false | 'unknown'): void;
}

interface HeldLease {
  doc: LeaseDoc;
  spent: number;
  reserved: number;
  /** Every spend's insert and ledger entry is known to have landed (or not): the count is exact. */
  exact: boolean;
  retired: boolean;
  timer?: NodeJS.Timeout;
  settled?: Promise<void>;
}

/**
 * Credit leases of one API process: for an account with a large balance, the process takes
 * `credits` from the account in one update and charges jobs from it in memory, so a job POST
 * makes no account update. The job document names the lease (`credits.lease`) and is inserted
 * charged; the lease's spend is the sum of its jobs, so it is recoverable after a crash.
 *
 * A lease is retired when it cannot cover the next charge or its spending time ends (a timer:
 * an idle account gets its credits back at once), then settled by the holder with its exact
 * count (after the ledger batch holding its jobs was written: `beforeSettle`). A lease whose
 * count is not exact (an insert's outcome unknown, a ledger batch failed: the database went away)
 * is retired at once, and it and the leases of a holder that died are settled by the scheduler
 * after `until` (plus LEASE_SETTLE_MARGIN_MS), from their jobs (settleExpiredLeases); the balance
 * shown counts their jobs meanwhile (LEASE_VOUCH_MS). Below `minBalance` no lease is taken and
 * `reserve` returns null: the caller charges the account per job, exactly.
 */
export function createCreditLeases(
  credits: Credits,
  s: CreditLeaseSettings & { owner: string; log: Logger; beforeSettle: () => Promise<void> },
) {
  const margin = Math.min(5000, s.ttlMs / 4);
  // Settings are in credits (config); everything the leases count is in millicredits.
  const leaseUnits = toUnits(s.credits);
  const minUnits = toUnits(s.minBalance);
  const byAccount = new Map<string, HeldLease>();
  const byId = new Map<string, HeldLease>();
  const taking = new Map<string, Promise<HeldLease | null>>();
  /**
   * Balances seen lately (after a per-job charge): a lease is tried only for an account last seen
   * holding enough for one, so an account under the threshold costs no futile attempt.
   */
  const seen = new Map<string, number>();
  const settling = new Set<Promise<void>>();
  let closed = false;

  const spendable = (h: HeldLease) => Date.now() < h.doc.until.getTime() - margin;

  const settle = (h: HeldLease) => {
    if (!h.retired || h.reserved > 0 || h.settled !== undefined) return;
    clearTimeout(h.timer);
    h.settled = (async () => {
      try {
        await s.beforeSettle();
        // A spend whose insert timed out may still land in the server: counting its jobs now
        // could miss it, so such a lease waits for the scheduler, after `until`.
        if (!h.exact) return;
        await credits.settleLease(h.doc._id, { spent: h.spent });
      } catch (err) {
        s.log.warn('credit lease not settled; the scheduler settles it after it expires', {
          leaseId: h.doc._id,
          err: err as Error,
        });
      } finally {
        byId.delete(h.doc._id);
      }
    })();
    settling.add(h.settled);
    void h.settled.finally(() => settling.delete(h.settled!));
  };

  const retire = (h: HeldLease) => {
    h.retired = true;
    if (byAccount.get(h.doc.accountId) === h) byAccount.delete(h.doc.accountId);
    settle(h);
  };

  /**
   * The lease's count is no longer certain: spend no more from it (the next spend takes a new
   * lease), so its `spentMillicredits` stops being written down and the balance shown counts its jobs
   * (LEASE_VOUCH_MS); the scheduler settles it from them after it expired.
   */
  const uncertain = (h: HeldLease) => {
    h.exact = false;
    retire(h);
  };

  const take = async (accountId: string): Promise<HeldLease | null> => {
    let doc: LeaseDoc | null;
    try {
      doc = await credits.takeLease({
        accountId,
        millicredits: leaseUnits,
        minBalance: minUnits,
        ttlMs: s.ttlMs,
        owner: s.owner,
        timeoutMs: margin / 2,
      });
    } catch (err) {
      s.log.warn('credit lease not taken; charging per job', { accountId, err: err as Error });
      doc = null;
    }
    if (!doc) {
      seen.delete(accountId);
      return null;
    }
    const h: HeldLease = { doc, spent: 0, reserved: 0, exact: true, retired: false };
    h.timer = setTimeout(() => retire(h), Math.max(0, doc.until.getTime() - margin - Date.now()));
    h.timer.unref();
    byId.set(doc._id, h);
    if (closed) retire(h);
    else byAccount.set(accountId, h);
    return h;
  };

  return {
    /**
     * A spend of `amount` from this process's lease on the account (taking one when the account
     * was last seen with enough for it), or null: charge the account per job.
     */
    async reserve(accountId: string, amount: number): Promise<LeaseSpend | null> {
      if (leaseUnits <= 0 || closed || !(amount > 0) || amount > leaseUnits) return null;
      for (let tries = 0; tries < 3; tries++) {
        const h = byAccount.get(accountId);
        if (h && (!spendable(h) || h.doc.millicredits - h.spent - h.reserved < amount)) retire(h);
        else if (h) {
          h.reserved += amount;
          let done = false;
          const end = () => {
            if (done) return false;
            done = true;
            h.reserved -= amount;
            return true;
          };
          return {
            leaseId: h.doc._id,
            timeoutMs: Math.max(100, Math.min(margin / 2, h.doc.until.getTime() - Date.now() - margin / 2)),
            commit: () => {
              if (!end()) return;
              h.spent += amount;
              settle(h);
            },
            release: (stored) => {
              if (!end()) return;
              if (stored === 'unknown') return uncertain(h);
              settle(h);
            },
          };
        }
        if ((seen.get(accountId) ?? 0) < leaseUnits + minUnits) return null;
        let p = taking.get(accountId);
        if (!p) {
          p = take(accountId).finally(() => taking.delete(accountId));
          taking.set(accountId, p);
        }
        if (!(await p)) return null;
      }
      return null;
    },

    /** The account's balance after a per-job charge (see `reserve`). */
    saw(accountId: string, millicredits: number): void {
      if (leaseUnits <= 0) return;
      if (seen.size >= 10_000) seen.clear();
      seen.set(accountId, millicredits);
    },

    /** A ledger batch with jobs of this lease failed: settle it from its jobs, which writes their entries. */
    inexact(leaseId: string): void {
      const h = byId.get(leaseId);
      if (h) uncertain(h);
    },

    /** Retire every lease and settle it (on shutdown). May be called twice. */
    async close(): Promise<void> {
      closed = true;
      for (const h of [...byId.values()]) retire(h);
      while (settling.size) await Promise.allSettled([...settling]);
    },
  };
}
