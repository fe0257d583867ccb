/**
 * The job repository and its state machine (SPEC 3.1): queued → processing → complete | failed.
 * Every move is one conditional update, so no job moves backwards or finishes twice, and a
 * duplicate message finds nothing to move. A move that changes what a client sees is announced
 * to the API caches, and a finishing move writes its event in the same update (outbox.ts sends it).
 */
import { JOB_ID_PREFIX, type JobType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { newId } from '../infra/ids';
import { type JobDoc, openStore } from '../infra/mongo';
import type { JobsContext } from './context';
import { announce, buildEvent, partialAssets, sendEvent } from './outbox';

/** Who the job belongs to and its type: what an event needs before the job is finished. */
const identity = ({ store }: JobsContext, jobId: string) =>
  openStore(store).jobs.findOne({ _id: jobId }, { projection: { _id: 1, type: 1, accountId: 1 } });

/**
 * Give a failed job's credits back, once: the account update is idempotent per job (see
 * credits.refund), so a crash anywhere here is repaired by the sweep calling it again.
 */
export async function refundOnce(ctx: JobsContext, job: Pick<JobDoc, '_id' | 'accountId' | 'credits'>) {
  const { credits } = ctx;
  const db = openStore(ctx.store);
  if (job.credits.refunded) return;
  await credits.refund({
    accountId: job.accountId,
    operation: job.credits.operation,
    millicredits: job.credits.millicredits,
    jobId: job._id,
  });
  await db.jobs.updateOne({ _id: job._id }, { $set: { 'credits.refunded': true } });
}

/** Insert a queued, not yet dispatched job. */
export async function create(
  ctx: JobsContext,
  input: {
    accountId: string;
    type: JobType;
    input: Record<string, unknown>;
    credits: Omit<JobDoc['credits'], 'refunded'>;
    notes?: string[];
    id?: string;
    requestId?: string;
    timeoutMs?: number;
  },
): Promise<JobDoc> {
  const db = openStore(ctx.store);
  const now = new Date();
  const job: JobDoc = {
    _id: input.id ?? newId(JOB_ID_PREFIX[input.type]),
    accountId: input.accountId,
    type: input.type,
    status: 'queued',
    rawStatus: 'queued',
    progressMessage: 'Waiting for a worker',
    input: input.input,
    result: null,
    error: null,
    notes: input.notes ?? [],
    credits: { ...input.credits, refunded: false },
    dispatchedAt: null,
    requestId: input.requestId ?? null,
    attempts: 0,
    lease: null,
    sweptAt: null,
    createdAt: now,
    updatedAt: now,
    startedAt: null,
    completedAt: null,
  };
  await db.jobs.insertOne(job, input.timeoutMs ? { timeoutMS: input.timeoutMs } : {});
  return job;
}

/** One account's jobs. */
export const forAccount = ({ store }: JobsContext, accountId: string) => ({
  /**
   * A job of the account, or null. Read by `_id` alone and checked here: FerretDB serves an
   * `_id` equality from its index, and filters any further field in Go for a few tenths of a
   * millisecond more per read (the hottest read of the API).
   */
  async find(id: string): Promise<JobDoc | null> {
    const job = await openStore(store).jobs.findOne({ _id: id });
    return job && job.accountId === accountId ? job : null;
  },

  /**
   * The account's newest complete jobs, `limit` at most, without `excludeJobId` (the research
   * engine reads them as sources): id, type, input, result and creation time only.
   */
  recentComplete: (opts: {
    excludeJobId: string;
    limit: number;
  }): Promise<Pick<JobDoc, '_id' | 'type' | 'input' | 'result' | 'createdAt'>[]> =>
    openStore(store)
      .jobs.find(
        { accountId, status: 'complete', _id: { $ne: opts.excludeJobId } },
        { projection: { _id: 1, type: 1, input: 1, result: 1, createdAt: 1 } },
      )
      .sort({ createdAt: -1 })
      .limit(opts.limit)
      .toArray(),
});

/** A job by id, whoever owns it: callers check `accountId` themselves (the API's job cache). */
export const findById = ({ store }: JobsContext, id: string): Promise<JobDoc | null> =>
  openStore(store).jobs.findOne({ _id: id });

/** Whether a job `id` was stored (what a pending debit may have paid for). */
export const exists = async ({ store }: JobsContext, id: string): Promise<boolean> =>
  (await openStore(store).jobs.countDocuments({ _id: id })) > 0;

/**
 * Take a job for work: queued, or processing with an expired lease (its worker died or it
 * waits for a retry). Returns null when there is nothing to take (duplicate message,
 * finished job, or another worker holds it).
 */
export async function claim(
  ctx: JobsContext,
  jobId: string,
  owner: string,
  leaseMs: number,
  opts: { again?: boolean } = {},
): Promise<JobDoc | null> {
  const db = openStore(ctx.store);
  const now = new Date();
  // `again`: the caller's earlier claim failed without an answer (the database went away),
  // so a lease of its own is one that claim may have taken, not another attempt running.
  const mine = opts.again ? [{ status: 'processing' as const, 'lease.owner': owner }] : [];
  const job = await db.jobs.findOneAndUpdate(
    { _id: jobId, $or: [{ status: 'queued' }, { status: 'processing', 'lease.until': { $lt: now } }, ...mine] },
    {
      $set: {
        status: 'processing',
        lease: { owner, until: new Date(now.getTime() + leaseMs) },
        startedAt: now,
        updatedAt: now,
        rawStatus: 'started',
        progressMessage: 'Started',
      },
      $inc: { attempts: 1 },
    },
    { returnDocument: 'after' },
  );
  if (job) await announce(ctx, jobId);
  return job;
}

/** The lease of a job that is processing, or null. */
export async function leaseOf(ctx: JobsContext, jobId: string): Promise<{ owner: string; until: Date } | null> {
  const db = openStore(ctx.store);
  const j = await db.jobs.findOne({ _id: jobId, status: 'processing' }, { projection: { lease: 1 } });
  return j?.lease ?? null;
}

/** Extend the lease while working. False when the job is no longer ours. */
export async function renewLease(ctx: JobsContext, jobId: string, owner: string, leaseMs: number): Promise<boolean> {
  const db = openStore(ctx.store);
  const r = await db.jobs.updateOne(
    { _id: jobId, status: 'processing', 'lease.owner': owner },
    { $set: { 'lease.until': new Date(Date.now() + leaseMs) } },
  );
  return r.matchedCount === 1;
}

/**
 * Stores `fields` on a job while `owner` holds it (a worker's own resume checkpoints, such as a
 * space job's finished stages); false when it no longer does.
 */
export async function checkpoint(
  ctx: JobsContext,
  jobId: string,
  owner: string | undefined,
  fields: Record<string, unknown>,
): Promise<boolean> {
  const r = await openStore(ctx.store).jobs.updateOne(
    { _id: jobId, status: 'processing', 'lease.owner': owner },
    { $set: fields },
  );
  return r.matchedCount === 1;
}

export async function progress(
  ctx: JobsContext,
  jobId: string,
  owner: string,
  p: { rawStatus: string; progressMessage: string; result?: Record<string, unknown> },
): Promise<boolean> {
  const db = openStore(ctx.store);
  const set: Record<string, unknown> = {
    rawStatus: p.rawStatus,
    progressMessage: p.progressMessage,
    updatedAt: new Date(),
  };
  if (p.result) set.result = p.result;
  const r = await db.jobs.updateOne({ _id: jobId, status: 'processing', 'lease.owner': owner }, { $set: set });
  if (r.matchedCount === 1) await announce(ctx, jobId);
  return r.matchedCount === 1;
}

/**
 * processing → complete, once. Publishes `<name>.completed`. `claimed`: the job as its claim
 * returned it (a worker has it), which saves reading whose job it is.
 */
export async function complete(
  ctx: JobsContext,
  jobId: string,
  owner: string,
  result: Record<string, unknown>,
  extras: Record<string, unknown> = {},
  claimed?: Pick<JobDoc, '_id' | 'type' | 'accountId'>,
): Promise<JobDoc | null> {
  const db = openStore(ctx.store);
  const now = new Date();
  const who = claimed?._id === jobId ? claimed : await identity(ctx, jobId);
  if (!who) return null;
  const event = buildEvent(ctx, who, 'complete', extras);
  const job = await db.jobs.findOneAndUpdate(
    { _id: jobId, status: 'processing', 'lease.owner': owner },
    {
      $set: {
        status: 'complete',
        result,
        lease: null,
        completedAt: now,
        updatedAt: now,
        rawStatus: 'complete',
        progressMessage: 'Done',
        error: null,
        event,
        eventPublishedAt: null,
      },
    },
    { returnDocument: 'after' },
  );
  if (!job) return null;
  await announce(ctx, jobId);
  metrics.jobsCompleted.inc({ type: job.type });
  if (job.startedAt)
    metrics.jobDuration.observe(
      { type: job.type, status: 'complete' },
      (now.getTime() - job.startedAt.getTime()) / 1000,
    );
  await sendEvent(ctx, job._id, event);
  return job;
}

/**
 * queued|processing → failed, once; refunds the job's credits and publishes `<name>.failed`.
 * With `owner`, only the lease holder may fail it.
 */
export async function fail(
  ctx: JobsContext,
  jobId: string,
  error: string,
  opts: { owner?: string; reason?: string } = {},
): Promise<JobDoc | null> {
  const db = openStore(ctx.store);
  const now = new Date();
  // One read: who the job belongs to, and what it had published (partialAssets).
  const who = await db.jobs.findOne({ _id: jobId }, { projection: { _id: 1, type: 1, accountId: 1, result: 1 } });
  if (!who) return null;
  const event = buildEvent(ctx, who, 'failed', { error, ...partialAssets(who) });
  const filter: Record<string, unknown> = { _id: jobId, status: { $in: ['queued', 'processing'] } };
  if (opts.owner) filter['lease.owner'] = opts.owner;
  const job = await db.jobs.findOneAndUpdate(
    filter,
    {
      $set: {
        status: 'failed',
        error,
        lease: null,
        completedAt: now,
        updatedAt: now,
        rawStatus: 'failed',
        progressMessage: 'Failed',
        event,
        eventPublishedAt: null,
      },
    },
    { returnDocument: 'after' },
  );
  if (!job) return null;
  await announce(ctx, jobId);
  metrics.jobsFailed.inc({ type: job.type, reason: opts.reason ?? 'error' });
  if (job.startedAt)
    metrics.jobDuration.observe({ type: job.type, status: 'failed' }, (now.getTime() - job.startedAt.getTime()) / 1000);
  await refundOnce(ctx, job);
  await sendEvent(ctx, job._id, event);
  return job;
}

/**
 * Hand a job back for a later attempt: the lease becomes the retry time, the sweep republishes
 * it. `uncounted`: the attempt does not count towards JOB_MAX_ATTEMPTS (the database went away
 * under it: nothing was wrong with the job).
 */
export async function scheduleRetry(
  ctx: JobsContext,
  jobId: string,
  owner: string,
  delayMs: number,
  error: string,
  opts: { uncounted?: boolean } = {},
): Promise<boolean> {
  const db = openStore(ctx.store);
  const r = await db.jobs.updateOne(
    { _id: jobId, status: 'processing', 'lease.owner': owner },
    {
      $set: {
        lease: { owner: 'retry', until: new Date(Date.now() + delayMs) },
        rawStatus: 'retry_scheduled',
        progressMessage: `Retrying after a transient error: ${error}`,
        updatedAt: new Date(),
      },
      ...(opts.uncounted ? { $inc: { attempts: -1 } } : {}),
    },
  );
  if (r.matchedCount === 1) await announce(ctx, jobId);
  return r.matchedCount === 1;
}
