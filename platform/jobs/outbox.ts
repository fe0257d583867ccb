/**
 * The outbox: what leaves for the broker. A job's message to its pool (publish, dispatch), the
 * event of a finished job and its `eventPublishedAt` mark (written in batches), and the
 * announcement that a job's envelope changed. Every send here may fail without failing the
 * database move it follows: the sweep (recovery.ts) sends again what was not confirmed.
 */
import { randomUUID } from 'node:crypto';
import { JOB_EVENT_NAME, broker, type JobType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { REQUEST_ID_HEADER } from '../infra/context';
import type { JobDoc, JobEvent } from '../infra/mongo';
import { createWriteBehind } from '../infra/write-behind';
import { type JobsBase, type JobsContext, WRITE_BEHIND } from './context';
import { pollPath } from './envelope';
import { markDispatched, markEventsPublished } from './marks.repository';

/** The message a pool receives. Small on purpose: the job document is the truth. */
export interface JobMessage {
  jobId: string;
  accountId: string;
  type: JobType;
}

/** Pool that runs a job type: the job types map one-to-one onto pools. */
export const poolOf = (type: JobType) => type;

/**
 * The event announcing a finished job. It is written in the same update that finishes the job
 * (so a crash cannot finish a job without its event), marked published only after the broker
 * confirmed it, and the sweep publishes any that were not: at least once, consumers dedupe on
 * eventId.
 */
export const buildEvent = (
  ctx: JobsContext,
  job: Pick<JobDoc, '_id' | 'type' | 'accountId'>,
  status: 'complete' | 'failed',
  extras: Record<string, unknown>,
): JobEvent => ({
  eventId: randomUUID(),
  event: `${JOB_EVENT_NAME[job.type]}.${status === 'complete' ? 'completed' : 'failed'}`,
  accountId: job.accountId,
  occurredAt: new Date().toISOString(),
  data: { jobId: job._id, status, pollUrl: ctx.deps.publicBaseUrl + pollPath(job._id), ...extras },
});

/**
 * What a failing space job had already published (its stage-preview result: SPEC 3.1, 6.1),
 * so `space.failed` carries the asset URLs that exist; nothing for other job types.
 */
export const partialAssets = (who: Pick<JobDoc, 'type' | 'result'>): Record<string, unknown> => {
  if (who.type !== 'space') return {};
  const r = (who.result ?? null) as Record<string, unknown> | null;
  if (!r) return {};
  const keys = ['stage', 'panoramaUrl', 'spaceUrl', 'spaceFullUrl', 'colliderUrl', 'depthUrl', 'posterUrl'] as const;
  return Object.fromEntries(keys.filter((k) => r[k] !== undefined && r[k] !== null).map((k) => [k, r[k]]));
};

/**
 * Tell every API process that a job's envelope changed, after the database acknowledged the
 * write (platform/jobs/job-cache.ts). Never fails the move: when the broker is away the caches fall
 * back on their expiry (and an API process without its broker has emptied its own).
 */
export const announce = async (ctx: JobsBase, jobId: string): Promise<void> => {
  const { amqp, log, changesExchange } = ctx;
  // Without a broker link there is nothing to wait for: API processes that share this broker
  // outage have dropped their caches, the others expire the entry (JOB_CACHE_TTL_MS).
  if (!amqp.isReady()) {
    metrics.jobChangesAnnounced.inc({ outcome: 'failed' });
    return;
  }
  try {
    await amqp.broadcast(changesExchange, { jobId });
    metrics.jobChangesAnnounced.inc({ outcome: 'sent' });
  } catch (err) {
    metrics.jobChangesAnnounced.inc({ outcome: 'failed' });
    log.warn('job change announcement failed; API job caches expire it', { jobId, err: err as Error });
  }
};

/**
 * `eventPublishedAt` of the jobs whose event the broker confirmed, in batches (one bulkWrite of
 * one statement per job by _id). A crash that loses a batch makes the sweep send those events
 * again, after DISPATCH_GRACE_MS; the event id absorbs the duplicate (webhooks deliver once per
 * event id).
 */
export const createPublishedMarks = ({ store, log }: JobsBase) =>
  createWriteBehind<string>(
    async (ids) => {
      const at = new Date();
      await markEventsPublished(store, ids, at);
    },
    { ...WRITE_BEHIND, log, name: 'event-published' },
  );

export const sendEvent = async (ctx: JobsContext, jobId: string, event: JobEvent): Promise<boolean> => {
  const { amqp, log, deps } = ctx;
  try {
    await amqp.publish(broker.eventsExchange(deps.queuePrefix), event.event, event, { messageId: event.eventId });
  } catch (err) {
    log.warn('event publish failed; the sweep will publish it', { event: event.event, jobId, err: err as Error });
    return false;
  }
  ctx.published.add(jobId);
  return true;
};

/** Publish a job to its pool (confirmed). False leaves it to the sweep. */
export async function publish(
  ctx: JobsBase,
  job: Pick<JobDoc, '_id' | 'accountId' | 'type' | 'requestId'>,
): Promise<boolean> {
  const { amqp, log } = ctx;
  const msg: JobMessage = { jobId: job._id, accountId: job.accountId, type: job.type };
  try {
    // The sweep republishes outside any request: the job's own request id goes with it.
    await amqp.publishToPool(poolOf(job.type), msg, {
      messageId: job._id,
      ...(job.requestId ? { headers: { [REQUEST_ID_HEADER]: job.requestId } } : {}),
    });
    return true;
  } catch (err) {
    log.warn('job publish failed; the sweep will publish it', { jobId: job._id, err: err as Error });
    return false;
  }
}

/** Publish a job to its pool and mark it dispatched. False leaves it to the sweep. */
export async function dispatch(
  ctx: JobsBase,
  job: Pick<JobDoc, '_id' | 'accountId' | 'type' | 'requestId'>,
  reason: 'undispatched' | 'stalled',
): Promise<boolean> {
  if (!(await publish(ctx, job))) return false;
  await markDispatched(ctx.store, job._id);
  metrics.jobsRepublished.inc({ type: job.type, reason });
  return true;
}
