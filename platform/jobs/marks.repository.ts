/**
 * The jobs collection's queries of the accept path (accept.ts), the outbox (outbox.ts) and the
 * sweep (recovery.ts): the marks they set (charged, dispatched, event published, swept, failed
 * unpaid), the settlement claim, and the scans for what a crash left unmarked. The state machine's
 * own moves are in jobs.repository.ts (which imports the outbox, so these cannot live there).
 */
import type { Store } from '../infra/mongo';
import { openStore } from '../infra/mongo';

const jobsOf = (store: Store) => openStore(store).jobs;

/** One account's jobs, as the accept path reads them. */
export const forAccount = (store: Store, accountId: string) => ({
  /** The job, only in its account (a retry of an accepted request). */
  job: (jobId: string) => jobsOf(store).findOne({ _id: jobId, accountId }),
});

/** Drop a job the account could not pay for, while it is still uncharged. */
export async function deleteUncharged(store: Store, jobId: string): Promise<void> {
  await jobsOf(store).deleteOne({ _id: jobId, 'credits.charged': false });
}

/**
 * Mark accepted jobs charged (and dispatched when their publish was confirmed), each only while
 * this process (`owner`) still holds the settlement claim its insert took. The number matched.
 */
export async function markAccepted(
  store: Store,
  items: { jobId: string; dispatched: boolean }[],
  owner: string,
  now: Date,
): Promise<number> {
  // One command, one statement per job by _id (FerretDB 1.24 scans the whole collection for
  // `_id: { $in: [...] }`, so an updateMany would cost O(jobs stored)).
  const r = await jobsOf(store).bulkWrite(
    items.map(({ jobId, dispatched }) => ({
      updateOne: {
        filter: { _id: jobId, 'credits.settling.owner': owner },
        update: {
          $set: dispatched
            ? { 'credits.charged': true, 'credits.settling': null, dispatchedAt: now }
            : { 'credits.charged': true, 'credits.settling': null },
        },
      },
    })),
    { ordered: false },
  );
  return r.matchedCount;
}

/** `eventPublishedAt` of jobs whose event the broker confirmed (one statement per job by _id). */
export async function markEventsPublished(store: Store, ids: string[], at: Date): Promise<void> {
  await jobsOf(store).bulkWrite(
    ids.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { eventPublishedAt: at } } } })),
    { ordered: false },
  );
}

/** The broker confirmed the job's message (once: only while `dispatchedAt` is null). */
export async function markDispatched(store: Store, jobId: string): Promise<void> {
  await jobsOf(store).updateOne({ _id: jobId, dispatchedAt: null }, { $set: { dispatchedAt: new Date() } });
}

/** The sweep republished a stalled job (one message per backoff window). */
export async function markSwept(store: Store, jobId: string): Promise<void> {
  await jobsOf(store).updateOne({ _id: jobId }, { $set: { sweptAt: new Date() } });
}

/**
 * Take the settlement claim of an uncharged job (`credits.settling`): free, expired, or (`stale`)
 * held by this process with no request of it holding it any more. The job after, or null.
 */
export const claimSettlement = (store: Store, jobId: string, owner: string, until: Date, stale: boolean) =>
  jobsOf(store).findOneAndUpdate(
    {
      _id: jobId,
      'credits.charged': false,
      $or: [
        { 'credits.settling': null },
        { 'credits.settling.until': { $lt: new Date() } },
        ...(stale ? [{ 'credits.settling.owner': owner }] : []),
      ],
    },
    { $set: { 'credits.settling': { owner, until } } },
    { returnDocument: 'after' },
  );

/** A job's charge state and status (who settles it, whether it was charged). */
export const settlementOf = (store: Store, jobId: string) =>
  jobsOf(store).findOne({ _id: jobId }, { projection: { credits: 1, status: 1 } });

/** A job's charge state only. */
export const creditsOf = (store: Store, jobId: string) =>
  jobsOf(store).findOne({ _id: jobId }, { projection: { credits: 1 } });

/**
 * Fail a queued job unpaid under `owner`'s claim: `credits.charged: null` says it was never
 * charged, and nothing settles it again. True when it was moved.
 */
export async function failUnpaid(store: Store, jobId: string, owner: string, now: Date): Promise<boolean> {
  const failed = await jobsOf(store).updateOne(
    { _id: jobId, 'credits.charged': false, 'credits.settling.owner': owner, status: 'queued' },
    {
      $set: {
        status: 'failed',
        error: 'not accepted: the account did not have enough credits when the request was completed',
        'credits.charged': null,
        'credits.refunded': true,
        'credits.settling': null,
        completedAt: now,
        updatedAt: now,
        rawStatus: 'failed',
        progressMessage: 'Failed',
      },
    },
  );
  return failed.modifiedCount === 1;
}

/** Mark a job charged while `owner` still holds its claim; true when it did. */
export async function markChargedByClaim(store: Store, jobId: string, owner: string): Promise<boolean> {
  const marked = await jobsOf(store).updateOne(
    { _id: jobId, 'credits.settling.owner': owner },
    { $set: { 'credits.charged': true, 'credits.settling': null } },
  );
  return marked.modifiedCount === 1;
}

/** Uncharged jobs older than `createdBefore` whose settlement claim is free or expired. */
export const unpaidJobs = (store: Store, now: Date, createdBefore: Date, limit: number) =>
  jobsOf(store)
    .find(
      {
        'credits.charged': false,
        createdAt: { $lt: createdBefore },
        $or: [{ 'credits.settling': null }, { 'credits.settling.until': { $lt: now } }],
      },
      { projection: { _id: 1 } },
    )
    .limit(limit)
    .toArray();

/** Queued jobs older than `createdBefore` that never reached the broker (not left unpaid). */
export const undispatchedJobs = (store: Store, createdBefore: Date, limit: number) =>
  jobsOf(store)
    .find(
      {
        status: 'queued',
        dispatchedAt: null,
        'credits.charged': { $ne: false },
        createdAt: { $lt: createdBefore },
      },
      { projection: { _id: 1, accountId: 1, type: 1, credits: 1, createdAt: 1, requestId: 1 } },
    )
    .limit(limit)
    .toArray();

/** Processing jobs whose lease expired, not republished since `sweptBefore`. */
export const stalledJobs = (store: Store, now: Date, sweptBefore: Date, limit: number) =>
  jobsOf(store)
    .find(
      {
        status: 'processing',
        'lease.until': { $lt: now },
        $or: [{ sweptAt: null }, { sweptAt: { $lt: sweptBefore } }],
      },
      { projection: { _id: 1, accountId: 1, type: 1, requestId: 1 } },
    )
    .limit(limit)
    .toArray();

/** Jobs finished before `completedBefore` whose event never reached the broker. */
export const unsentEvents = (store: Store, completedBefore: Date, limit: number) =>
  jobsOf(store)
    .find(
      {
        status: { $in: ['complete', 'failed'] },
        event: { $exists: true },
        eventPublishedAt: null,
        completedAt: { $lt: completedBefore },
      },
      { projection: { _id: 1, event: 1 } },
    )
    .limit(limit)
    .toArray();

/** Jobs failed before `completedBefore` whose refund a crash interrupted. */
export const unrefundedJobs = (store: Store, completedBefore: Date, limit: number) =>
  jobsOf(store)
    .find(
      {
        status: 'failed',
        'credits.refunded': false,
        'credits.millicredits': { $gt: 0 },
        completedAt: { $lt: completedBefore },
      },
      { projection: { _id: 1, accountId: 1, credits: 1 } },
    )
    .limit(limit)
    .toArray();
