import { randomUUID } from 'node:crypto';
import type { JobEnvelope } from '../../contracts/common';
import { JOB_EVENT_NAME, JOB_ID_PREFIX, broker, type CreditOperation, type JobType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { AmqpClient } from '../infra/amqp';
import { REQUEST_ID_HEADER } from '../infra/context';
import {
  createCreditLeases,
  fromUnits,
  type CreditLeaseSettings,
  type Credits,
  type LeaseSpend,
} from '../credits/credits';
import { AppError } from '../infra/errors';
import { faultPoint } from '../infra/faults';
import { newId } from '../infra/ids';
import { instanceId } from '../infra/instance';
import { createWriteBehind } from '../infra/write-behind';
import type { Logger } from '../infra/log';
import type { Database, JobDoc, JobEvent } from '../infra/mongo';
export type { JobEvent } from '../infra/mongo';

/** The message a pool receives. Small on purpose: the job document is the truth. */
export interface JobMessage {
  jobId: string;
  accountId: string;
  type: JobType;
}

/**
 * The accept path's batches: a lone job's writes follow its answer within 20 ms; under a steady
 * stream the window widens to 100 ms (n items in a batch → the next waits n × 20 ms), so two API
 * processes at a few hundred POSTs a second each send about ten batches a second, not fifty, to
 * the one database server (measured in `npm run bench gateway`, README).
 */
const WRITE_BEHIND = { maxItems: 200, delayMs: 20, maxDelayMs: 100 };

export const pollPath = (jobId: string) => `/api/v1/jobs/${jobId}`;

/** SPEC 2.4 envelope of a stored job. */
export function toEnvelope(job: JobDoc): JobEnvelope {
  return {
    jobId: job._id,
    type: job.type,
    status: job.status,
    rawStatus: job.rawStatus,
    pollUrl: pollPath(job._id),
    progressMessage: job.progressMessage,
    result: job.status === 'complete' || job.type === 'space' ? job.result : null,
    error: job.error,
    createdAt: job.createdAt.toISOString(),
    updatedAt: job.updatedAt.toISOString(),
  };
}

/** Pool that runs a job type: the job types map one-to-one onto pools. */
export const poolOf = (type: JobType) => type;

export interface JobsDeps {
  db: Database;
  amqp: AmqpClient;
  credits: Credits;
  log: Logger;
  publicBaseUrl: string;
  queuePrefix: string;
  /** Claim on a new job's charge settlement (default 6 s, IDEMPOTENCY_LEASE_MS). */
  settleLeaseMs?: number;
  /** Credit leases for accounts with a large balance (default off). */
  creditLeases?: CreditLeaseSettings;
}

/**
 * The job repository and its state machine (SPEC 3.1): queued → processing → complete | failed.
 * Every move is one conditional update, so no job moves backwards or finishes twice, and a
 * duplicate message finds nothing to move.
 */
export function createJobs(deps: JobsDeps) {
  const { db, amqp, credits, log } = deps;
  /** How long a process's claim to settle a job's charge lasts (the insert takes it). */
  const settleLeaseMs = deps.settleLeaseMs ?? 6000;

  /**
   * The event announcing a finished job. It is written in the same update that finishes the job
   * (so a crash cannot finish a job without its event), marked published only after the broker
   * confirmed it, and the sweep publishes any that were not: at least once, consumers dedupe on
   * eventId.
   */
  const buildEvent = (
    job: Pick<JobDoc, '_id' | 'type' | 'accountId'>,
    status: 'complete' | 'failed',
    extras: Record<string, unknown>,
  ): JobEvent => ({
    eventId: randomUUID(),
    event: `${JOB_EVENT_NAME[job.type]}.${status === 'complete' ? 'completed' : 'failed'}`,
    accountId: job.accountId,
    occurredAt: new Date().toISOString(),
    data: { jobId: job._id, status, pollUrl: deps.publicBaseUrl + pollPath(job._id), ...extras },
  });

  /** Who the job belongs to and its type: what an event needs before the job is finished. */
  const identity = (jobId: string) =>
    db.jobs.findOne({ _id: jobId }, { projection: { _id: 1, type: 1, accountId: 1 } });

  /**
   * What a failing space job had already published (its stage-preview result: SPEC 3.1, 6.1),
   * so `space.failed` carries the asset URLs that exist; nothing for other job types.
   */
  const partialAssets = (who: Pick<JobDoc, 'type' | 'result'>): Record<string, unknown> => {
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
  const changesExchange = broker.jobChangesExchange(deps.queuePrefix);
  const announce = async (jobId: string): Promise<void> => {
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
  const published = createWriteBehind<string>(
    async (ids) => {
      const at = new Date();
      await db.jobs.bulkWrite(
        ids.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { eventPublishedAt: at } } } })),
        { ordered: false },
      );
    },
    { ...WRITE_BEHIND, log, name: 'event-published' },
  );

  const sendEvent = async (jobId: string, event: JobEvent): Promise<boolean> => {
    try {
      await amqp.publish(broker.eventsExchange(deps.queuePrefix), event.event, event, { messageId: event.eventId });
    } catch (err) {
      log.warn('event publish failed; the sweep will publish it', { event: event.event, jobId, err: err as Error });
      return false;
    }
    published.add(jobId);
    return true;
  };

  /**
   * Give a failed job's credits back, once: the account update is idempotent per job (see
   * credits.refund), so a crash anywhere here is repaired by the sweep calling it again.
   */
  const refundOnce = async (job: Pick<JobDoc, '_id' | 'accountId' | 'credits'>) => {
    if (job.credits.refunded) return;
    await credits.refund({
      accountId: job.accountId,
      operation: job.credits.operation,
      millicredits: job.credits.millicredits,
      jobId: job._id,
    });
    await db.jobs.updateOne({ _id: job._id }, { $set: { 'credits.refunded': true } });
  };

  /**
   * What a charged, published job still needs written: its ledger entry, `credits.charged`,
   * `dispatchedAt`, and the release of its account marker. These lag the answer by 20 ms (up to
   * 100 ms under a steady stream, see WRITE_BEHIND) and go in one batch (one insertMany, one bulkWrite, one marker release per account, for many
   * jobs); a crash that loses a batch is repaired by the sweep (`settleUnpaid`, and the
   * undispatched sweep re-publishes, which a worker treats as a duplicate).
   */
  const settled = createWriteBehind<{ job: JobDoc; requestId: string | null; dispatched: boolean }>(
    async (items) => {
      await credits.recordCharges(
        items.map(({ job, requestId }) => ({
          accountId: job.accountId,
          jobId: job._id,
          operation: job.credits.operation,
          millicredits: job.credits.millicredits,
          requestId,
          at: job.createdAt,
        })),
      );
      const now = new Date();
      // One command, one statement per job by _id (FerretDB 1.24 scans the whole collection for
      // `_id: { $in: [...] }`, so an updateMany would cost O(jobs stored)).
      // Marked only while this process still holds the settlement claim its insert took.
      const r = await db.jobs.bulkWrite(
        items.map(({ job, dispatched }) => ({
          updateOne: {
            filter: { _id: job._id, 'credits.settling.owner': instanceId },
            update: {
              $set: dispatched
                ? { 'credits.charged': true, 'credits.settling': null, dispatchedAt: now }
                : { 'credits.charged': true, 'credits.settling': null },
            },
          },
        })),
        { ordered: false },
      );
      // Only now that the jobs say they are charged may their markers leave the account. If a
      // claim was lost meanwhile (this batch came later than the claim lasts), keep them all: the
      // sweep releases markers of charged jobs (releaseSettledMarkers).
      if (r.matchedCount !== items.length) return;
      const byAccount = new Map<string, string[]>();
      for (const { job } of items) byAccount.set(job.accountId, [...(byAccount.get(job.accountId) ?? []), job._id]);
      for (const [accountId, ids] of byAccount) await credits.releaseMarkers(accountId, ids);
    },
    { ...WRITE_BEHIND, log, name: 'job-accept' },
  );

  /**
   * Settle a job whose charge a crash may have left half-done, under its settlement claim
   * (`credits.settling`, taken with a conditional update, so the sweep and a retry never settle
   * one job at once): charge it (the account's marker says whether it was charged already), or
   * fail it unpaid when the balance is short; write its ledger entry, mark it charged, release
   * the marker, and publish it if it never was. Returns 'charged', 'unpaid', or 'busy' when
   * another process holds the claim.
   */
  const settleOne = async (
    jobId: string,
    opts: { requestId: string | null; waitMs?: number },
  ): Promise<'charged' | 'unpaid' | 'busy'> => {
    claiming.set(jobId, (claiming.get(jobId) ?? 0) + 1);
    try {
      return await settleClaimed(jobId, opts);
    } finally {
      if (claiming.get(jobId) === 1) claiming.delete(jobId);
      else claiming.set(jobId, claiming.get(jobId)! - 1);
    }
  };
  const settleClaimed = async (
    jobId: string,
    opts: { requestId: string | null; waitMs?: number },
  ): Promise<'charged' | 'unpaid' | 'busy'> => {
    let job: JobDoc | null = null;
    let claimStartedAt = 0;
    for (const deadline = Date.now() + (opts.waitMs ?? 0); ; ) {
      claimStartedAt = Date.now();
      // A claim of this process that none of its requests holds any more (the attempt failed
      // while the database was away) need not be waited out.
      const stale = (claiming.get(jobId) ?? 0) <= 1 ? [{ 'credits.settling.owner': instanceId }] : [];
      job = await db.jobs.findOneAndUpdate(
        {
          _id: jobId,
          'credits.charged': false,
          $or: [{ 'credits.settling': null }, { 'credits.settling.until': { $lt: new Date() } }, ...stale],
        },
        { $set: { 'credits.settling': { owner: instanceId, until: new Date(claimStartedAt + settleLeaseMs) } } },
        { returnDocument: 'after' },
      );
      if (job) break;
      const current = await db.jobs.findOne({ _id: jobId }, { projection: { credits: 1, status: 1 } });
      if (!current || current.credits.charged === true || current.credits.charged === undefined) return 'charged';
      if (current.credits.charged === null) return 'unpaid'; // failed unpaid before
      const wait = (current.credits.settling?.until.getTime() ?? 0) - Date.now() + 20;
      if (Date.now() + wait > deadline) return 'busy';
      await new Promise((r) => setTimeout(r, Math.max(10, wait)));
    }
    const { operation, millicredits } = job.credits;
    // A process that stalled past half its claim must not charge: another may hold it by now.
    if (Date.now() - claimStartedAt > settleLeaseMs / 2) return 'busy';
    if (
      !(await credits.chargeJob({
        accountId: job.accountId,
        jobId,
        operation,
        millicredits,
        timeoutMs: settleLeaseMs / 4,
      }))
    ) {
      const now = new Date();
      // Failed unpaid: `credits.charged: null` says it was never charged, and nothing settles it again.
      const failed = await db.jobs.updateOne(
        { _id: jobId, 'credits.charged': false, 'credits.settling.owner': instanceId, status: 'queued' },
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
      // A job that already ran was published, so it was charged: its marker must have gone
      // astray. Leave it for a person to look at rather than fail finished work.
      if (failed.modifiedCount !== 1) {
        log.error('job past queued has no charge marker; left unsettled', { jobId });
        return 'busy';
      }
      await announce(jobId);
      return 'unpaid';
    }
    await credits.recordCharges([
      { accountId: job.accountId, jobId, operation, millicredits, requestId: opts.requestId, at: job.createdAt },
    ]);
    const marked = await db.jobs.updateOne(
      { _id: jobId, 'credits.settling.owner': instanceId },
      { $set: { 'credits.charged': true, 'credits.settling': null } },
    );
    // Release the marker only if the claim was still ours (else releaseSettledMarkers does, later).
    if (marked.modifiedCount === 1) await credits.releaseMarkers(job.accountId, [jobId]);
    if (job.status === 'queued' && !job.dispatchedAt) await api.dispatch(job, 'undispatched');
    return 'charged';
  };

  /**
   * What jobs charged from a credit lease leave to write, within 20 to 100 ms, in two commands per
   * batch: each lease's spend (one $inc per lease, for the balance shown: LeaseDoc.spentMillicredits), and
   * the ledger entries of the jobs whose publish was confirmed. The entry doubles as the job's
   * dispatch record (the sweep reads it before it republishes an undispatched job, see `sweep`),
   * so a job whose publish failed gets none here: the sweep publishes it, then writes it.
   */
  const leaseLedger = createWriteBehind<{ job: JobDoc; requestId: string | null; dispatched: boolean }>(
    async (items) => {
      try {
        const spends = new Map<string, number>();
        for (const { job } of items)
          if (job.credits.lease)
            spends.set(job.credits.lease, (spends.get(job.credits.lease) ?? 0) + job.credits.millicredits);
        await credits.addLeaseSpend(spends);
        await credits.recordCharges(
          items
            .filter((i) => i.dispatched)
            .map(({ job, requestId }) => ({
              accountId: job.accountId,
              jobId: job._id,
              operation: job.credits.operation,
              millicredits: job.credits.millicredits,
              requestId,
              at: job.createdAt,
            })),
        );
      } catch (err) {
        // Their leases settle from their jobs, which writes the entries (or the sweep does).
        for (const { job } of items) if (job.credits.lease) leases.inexact(job.credits.lease);
        throw err;
      }
    },
    { ...WRITE_BEHIND, log, name: 'job-accept-lease' },
  );
  const leases = createCreditLeases(credits, {
    ...(deps.creditLeases ?? { credits: 0, minBalance: 0, ttlMs: 30_000 }),
    owner: instanceId,
    log,
    beforeSettle: () => leaseLedger.flush(),
  });

  /** Where releaseSettledMarkers goes on from. */
  let markerCursor = '';

  /**
   * Jobs whose settlement claim (`credits.settling`, owner instanceId) a request of this process
   * holds now, by count: the accept that inserted the job, a settleOne running for it.
   */
  const claiming = new Map<string, number>();

  /** A job as it was when accepted (the 202 body a retry of the same request gets again). */
  const asAccepted = (job: JobDoc): JobDoc => ({
    ...job,
    status: 'queued',
    rawStatus: 'queued',
    progressMessage: 'Waiting for a worker',
    result: null,
    error: null,
    updatedAt: job.createdAt,
  });

  const api = {
    /** Insert a queued, not yet dispatched job. */
    async create(input: {
      accountId: string;
      type: JobType;
      input: Record<string, unknown>;
      credits: Omit<JobDoc['credits'], 'refunded'>;
      notes?: string[];
      id?: string;
      requestId?: string;
      timeoutMs?: number;
    }): Promise<JobDoc> {
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
    },

    /**
     * The API's side of a job's life (SPEC 3.1 step 1), in two database commands on the request
     * path: insert the job (unpaid, undispatched), charge it (one conditional update of the
     * account, idempotent per job: 402 when short, and then the job is deleted), publish it with
     * a confirm, answer; the ledger entry and the dispatch mark follow in a batch.
     *
     * `jobId` derived from the request's Idempotency-Key makes a retry after a crash find the
     * same job: it is charged at most once and the retry answers with the same job as accepted.
     * A crash at any point leaves a job the sweep finishes: unpaid → charged (or failed unpaid
     * when the balance is short), charged → ledger entry written, undispatched → published.
     * `before` runs before the insert (the project a deck belongs to) and must tolerate a retry;
     * `undo` removes what it made when the request is refused.
     */
    async accept(input: {
      accountId: string;
      requestId: string;
      type: JobType;
      operation: CreditOperation;
      input: Record<string, unknown>;
      notes?: string[];
      /** In millicredits; defaults to the operation's price. */
      millicredits?: number;
      /** Defaults to a random id; derive it from an Idempotency-Key so a retry finds the job. */
      jobId?: string;
      before?: (jobId: string) => Promise<void>;
      undo?: (jobId: string) => Promise<void>;
    }): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
      const amount = input.millicredits ?? credits.millicreditsFor(input.operation);
      const jobId = input.jobId ?? newId(JOB_ID_PREFIX[input.type]);
      await input.before?.(jobId);
      const spend = await leases.reserve(input.accountId, amount);
      if (spend) return api.acceptFromLease({ ...input, jobId, amount }, spend);
      let job: JobDoc;
      const insertedAt = Date.now();
      try {
        // The insert is also this process's claim to settle the job's charge (credits.settling).
        job = await api.create({
          id: jobId,
          accountId: input.accountId,
          type: input.type,
          input: input.input,
          credits: {
            operation: input.operation,
            millicredits: amount,
            charged: false,
            settling: { owner: instanceId, until: new Date(insertedAt + settleLeaseMs) },
          },
          notes: input.notes,
          requestId: input.requestId,
        });
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
        return api.acceptAgain({ ...input, jobId, amount });
      }
      claiming.set(jobId, (claiming.get(jobId) ?? 0) + 1);
      try {
        return await api.chargeAndPublish({ ...input, jobId, amount }, job, insertedAt);
      } finally {
        if (claiming.get(jobId) === 1) claiming.delete(jobId);
        else claiming.set(jobId, claiming.get(jobId)! - 1);
      }
    },

    /** accept() after its insert: the charge, the publish, the batch (under the insert's claim). */
    async chargeAndPublish(
      input: {
        accountId: string;
        requestId: string;
        operation: CreditOperation;
        amount: number;
        jobId: string;
        undo?: (jobId: string) => Promise<void>;
      },
      job: JobDoc,
      insertedAt: number,
    ): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
      const { jobId, amount } = input;
      faultPoint('accept.after-insert');
      // Stalled past half the claim (a frozen process): leave the job to the sweep rather than
      // charge while another process may be settling it. The charge itself gives up after a
      // quarter of the claim (the driver closes the connection, which cancels it in the server),
      // so it cannot reach the database after the claim ran out.
      if (Date.now() - insertedAt > settleLeaseMs / 2)
        throw new AppError(
          'service_unavailable',
          'the request took too long to be accepted; retry it with the same Idempotency-Key',
        );
      if (
        !(await credits.chargeJob({
          accountId: input.accountId,
          jobId,
          operation: input.operation,
          millicredits: amount,
          timeoutMs: settleLeaseMs / 4,
          onBalance: (left) => leases.saw(input.accountId, left),
        }))
      ) {
        await db.jobs.deleteOne({ _id: jobId, 'credits.charged': false });
        await input.undo?.(jobId);
        throw new AppError(
          'insufficient_credits',
          `not enough AI credits: ${input.operation} costs ${fromUnits(amount)}`,
        );
      }
      faultPoint('accept.after-charge');
      const dispatched = await api.publish(job);
      faultPoint('accept.after-publish');
      settled.add({ job, requestId: input.requestId, dispatched });
      if (dispatched) metrics.jobsDispatched.inc({ type: job.type }); // else the sweep publishes it (jobs_republished_total)
      return { job, charged: amount, retried: false };
    },

    /**
     * accept() for an account with a large balance, charged from this process's credit lease:
     * ONE database command on the request path (the job inserted charged, naming the lease), the
     * publish with its confirm, then the ledger entry in a batch. A crash after the insert leaves
     * a charged job the sweep publishes (with its ledger entry) if it never reached the broker,
     * and a lease the scheduler settles from its jobs.
     */
    async acceptFromLease(
      input: {
        accountId: string;
        requestId: string;
        type: JobType;
        operation: CreditOperation;
        input: Record<string, unknown>;
        notes?: string[];
        amount: number;
        jobId: string;
        undo?: (jobId: string) => Promise<void>;
      },
      spend: LeaseSpend,
    ): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
      let job: JobDoc;
      try {
        job = await api.create({
          id: input.jobId,
          accountId: input.accountId,
          type: input.type,
          input: input.input,
          credits: {
            operation: input.operation,
            millicredits: input.amount,
            charged: true,
            settling: null,
            lease: spend.leaseId,
          },
          notes: input.notes,
          requestId: input.requestId,
          timeoutMs: spend.timeoutMs,
        });
      } catch (err) {
        const duplicate = (err as { code?: number }).code === 11000;
        // Only a duplicate key says this insert stored nothing; any other failure, a server
        // error included (a write-concern error comes after the write applied), may have stored it.
        spend.release(duplicate ? false : 'unknown');
        if (!duplicate) throw err;
        return api.acceptAgain({ ...input });
      }
      faultPoint('accept.after-insert');
      faultPoint('accept.after-charge');
      const dispatched = await api.publish(job);
      faultPoint('accept.after-publish');
      leaseLedger.add({ job, requestId: input.requestId, dispatched });
      if (dispatched) metrics.jobsDispatched.inc({ type: job.type });
      // Counted once the job is in the ledger batch, so settling the lease waits for that batch.
      spend.commit();
      return { job, charged: input.amount, retried: false };
    },

    /**
     * A retry of a request whose job exists already (same Idempotency-Key; the first attempt's
     * process died or is still finishing): settle its charge if a crash left it half-done, and
     * answer with the job as it was accepted.
     */
    async acceptAgain(input: {
      accountId: string;
      requestId: string;
      type: JobType;
      jobId: string;
      amount: number;
      operation: CreditOperation;
    }): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
      const existing = await db.jobs.findOne({ _id: input.jobId, accountId: input.accountId });
      if (!existing || existing.type !== input.type)
        throw new AppError('conflict', 'Idempotency-Key: this key already named another job');
      const unpaid = () =>
        new AppError(
          'insufficient_credits',
          `not enough AI credits: ${input.operation} costs ${fromUnits(input.amount)}`,
        );
      if (existing.credits.charged === null) throw unpaid(); // failed unpaid by the sweep
      if (existing.credits.charged === false) {
        // Wait out the dead attempt's claim (it is never longer than the Idempotency-Key lease
        // this retry already outlived), then settle.
        const outcome = await settleOne(existing._id, { requestId: input.requestId, waitMs: settleLeaseMs });
        if (outcome === 'unpaid') throw unpaid();
      }
      return { job: asAccepted(existing), charged: input.amount, retried: true };
    },

    /** Publish a job to its pool (confirmed). False leaves it to the sweep. */
    async publish(job: Pick<JobDoc, '_id' | 'accountId' | 'type' | 'requestId'>): Promise<boolean> {
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
    },

    /** Publish a job to its pool and mark it dispatched. False leaves it to the sweep. */
    async dispatch(
      job: Pick<JobDoc, '_id' | 'accountId' | 'type' | 'requestId'>,
      reason: 'undispatched' | 'stalled',
    ): Promise<boolean> {
      if (!(await api.publish(job))) return false;
      await db.jobs.updateOne({ _id: job._id, dispatchedAt: null }, { $set: { dispatchedAt: new Date() } });
      metrics.jobsRepublished.inc({ type: job.type, reason });
      return true;
    },

    /**
     * Jobs a crash left unpaid or without their ledger entry (`credits.charged: false`, older
     * than `graceMs`, their settlement claim expired): settle each (see settleOne).
     */
    async settleUnpaid(graceMs: number, limit = 200): Promise<{ charged: number; unpaid: number }> {
      const out = { charged: 0, unpaid: 0 };
      const now = new Date();
      const jobs = await db.jobs
        .find(
          {
            'credits.charged': false,
            createdAt: { $lt: new Date(now.getTime() - graceMs) },
            $or: [{ 'credits.settling': null }, { 'credits.settling.until': { $lt: now } }],
          },
          { projection: { _id: 1 } },
        )
        .limit(limit)
        .toArray();
      for (const { _id } of jobs) {
        const r = await settleOne(_id, { requestId: null });
        if (r === 'charged') out.charged++;
        else if (r === 'unpaid') out.unpaid++;
      }
      return out;
    },

    /**
     * Release charge markers of jobs whose charge is recorded (`credits.charged: true`) and that
     * nobody is settling: left by a batch that lost its claim, or by a crash after the mark.
     */
    async releaseSettledMarkers(limit = 100): Promise<number> {
      let released = 0;
      // Page by _id from where the last run stopped, so accounts whose markers must stay cannot
      // keep the others from being looked at.
      const accounts = await db.accounts
        .find({ _id: { $gt: markerCursor }, 'chargedRefs.0': { $exists: true } }, { projection: { chargedRefs: 1 } })
        .sort({ _id: 1 })
        .limit(limit)
        .toArray();
      markerCursor = accounts.length < limit ? '' : accounts[accounts.length - 1]!._id;
      for (const a of accounts) {
        const done: string[] = [];
        for (const ref of a.chargedRefs ?? []) {
          if (ref.startsWith('lse_')) continue; // a lease's marker leaves when the lease is settled
          if (ref.startsWith('hold_')) {
            // A hold whose charge is applied in the ledger (a crash after confirm's first step).
            if (await db.ledger.countDocuments({ _id: `led_charge_${ref}`, state: 'applied' })) done.push(ref);
            continue;
          }
          const j = await db.jobs.findOne({ _id: ref }, { projection: { credits: 1 } });
          if (j && j.credits.charged !== false && !j.credits.settling) done.push(ref);
        }
        if (done.length) await credits.releaseMarkers(a._id, done);
        released += done.length;
      }
      return released;
    },

    /** Write what is waiting in the write-behind batches: accepted jobs, lease ledger entries, published-event marks (on stop, and in tests). */
    flushAccepted: async () => {
      await Promise.all([settled.flush(), leaseLedger.flush(), published.flush()]);
    },
    /** Write the batches and give back what this process's credit leases did not spend. */
    close: async () => {
      await Promise.all([settled.close(), leaseLedger.close(), published.close()]);
      await leases.close();
    },

    /**
     * A job of the account, or null. Read by `_id` alone and checked here: FerretDB serves an
     * `_id` equality from its index, and filters any further field in Go for a few tenths of a
     * millisecond more per read (the hottest read of the API).
     */
    async findForAccount(accountId: string, id: string): Promise<JobDoc | null> {
      const job = await db.jobs.findOne({ _id: id });
      return job && job.accountId === accountId ? job : null;
    },

    /** A job by id, whoever owns it: callers check `accountId` themselves (the API's job cache). */
    findById: (id: string): Promise<JobDoc | null> => db.jobs.findOne({ _id: id }),

    /**
     * Take a job for work: queued, or processing with an expired lease (its worker died or it
     * waits for a retry). Returns null when there is nothing to take (duplicate message,
     * finished job, or another worker holds it).
     */
    async claim(jobId: string, owner: string, leaseMs: number, opts: { again?: boolean } = {}): Promise<JobDoc | null> {
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
      if (job) await announce(jobId);
      return job;
    },

    /** The lease of a job that is processing, or null. */
    async leaseOf(jobId: string): Promise<{ owner: string; until: Date } | null> {
      const j = await db.jobs.findOne({ _id: jobId, status: 'processing' }, { projection: { lease: 1 } });
      return j?.lease ?? null;
    },

    /** Extend the lease while working. False when the job is no longer ours. */
    async renewLease(jobId: string, owner: string, leaseMs: number): Promise<boolean> {
      const r = await db.jobs.updateOne(
        { _id: jobId, status: 'processing', 'lease.owner': owner },
        { $set: { 'lease.until': new Date(Date.now() + leaseMs) } },
      );
      return r.matchedCount === 1;
    },

    async progress(
      jobId: string,
      owner: string,
      p: { rawStatus: string; progressMessage: string; result?: Record<string, unknown> },
    ): Promise<boolean> {
      const set: Record<string, unknown> = {
        rawStatus: p.rawStatus,
        progressMessage: p.progressMessage,
        updatedAt: new Date(),
      };
      if (p.result) set.result = p.result;
      const r = await db.jobs.updateOne({ _id: jobId, status: 'processing', 'lease.owner': owner }, { $set: set });
      if (r.matchedCount === 1) await announce(jobId);
      return r.matchedCount === 1;
    },

    /**
     * processing → complete, once. Publishes `<name>.completed`. `claimed`: the job as its claim
     * returned it (a worker has it), which saves reading whose job it is.
     */
    async complete(
      jobId: string,
      owner: string,
      result: Record<string, unknown>,
      extras: Record<string, unknown> = {},
      claimed?: Pick<JobDoc, '_id' | 'type' | 'accountId'>,
    ): Promise<JobDoc | null> {
      const now = new Date();
      const who = claimed?._id === jobId ? claimed : await identity(jobId);
      if (!who) return null;
      const event = buildEvent(who, 'complete', extras);
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
      await announce(jobId);
      metrics.jobsCompleted.inc({ type: job.type });
      if (job.startedAt)
        metrics.jobDuration.observe(
          { type: job.type, status: 'complete' },
          (now.getTime() - job.startedAt.getTime()) / 1000,
        );
      await sendEvent(job._id, event);
      return job;
    },

    /**
     * queued|processing → failed, once; refunds the job's credits and publishes `<name>.failed`.
     * With `owner`, only the lease holder may fail it.
     */
    async fail(jobId: string, error: string, opts: { owner?: string; reason?: string } = {}): Promise<JobDoc | null> {
      const now = new Date();
      // One read: who the job belongs to, and what it had published (partialAssets).
      const who = await db.jobs.findOne({ _id: jobId }, { projection: { _id: 1, type: 1, accountId: 1, result: 1 } });
      if (!who) return null;
      const event = buildEvent(who, 'failed', { error, ...partialAssets(who) });
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
      await announce(jobId);
      metrics.jobsFailed.inc({ type: job.type, reason: opts.reason ?? 'error' });
      if (job.startedAt)
        metrics.jobDuration.observe(
          { type: job.type, status: 'failed' },
          (now.getTime() - job.startedAt.getTime()) / 1000,
        );
      await refundOnce(job);
      await sendEvent(job._id, event);
      return job;
    },

    /**
     * Hand a job back for a later attempt: the lease becomes the retry time, the sweep republishes
     * it. `uncounted`: the attempt does not count towards JOB_MAX_ATTEMPTS (the database went away
     * under it: nothing was wrong with the job).
     */
    async scheduleRetry(
      jobId: string,
      owner: string,
      delayMs: number,
      error: string,
      opts: { uncounted?: boolean } = {},
    ): Promise<boolean> {
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
      if (r.matchedCount === 1) await announce(jobId);
      return r.matchedCount === 1;
    },

    /**
     * The sweep: publish jobs that never reached the broker (older than `graceMs`) and jobs
     * whose lease expired (worker died, or a retry is due). Returns how many it published.
     */
    async sweep(
      graceMs: number,
      sweepBackoffMs: number,
      limit = 500,
    ): Promise<{ undispatched: number; stalled: number; events: number; refunds: number; settled: number }> {
      const { charged, unpaid } = await api.settleUnpaid(graceMs, limit);
      await api.releaseSettledMarkers();
      const now = Date.now();
      const undispatched = await db.jobs
        .find(
          {
            status: 'queued',
            dispatchedAt: null,
            'credits.charged': { $ne: false },
            createdAt: { $lt: new Date(now - graceMs) },
          },
          { projection: { _id: 1, accountId: 1, type: 1, credits: 1, createdAt: 1, requestId: 1 } },
        )
        .limit(limit)
        .toArray();
      const stalled = await db.jobs
        .find(
          {
            status: 'processing',
            'lease.until': { $lt: new Date(now) },
            $or: [{ sweptAt: null }, { sweptAt: { $lt: new Date(now - sweepBackoffMs) } }],
          },
          { projection: { _id: 1, accountId: 1, type: 1, requestId: 1 } },
        )
        .limit(limit)
        .toArray();
      let u = 0;
      let s = 0;
      for (const j of undispatched) {
        if (j.credits?.lease) {
          // Charged from a lease: its ledger entry is written only once the job is known to have
          // reached the broker (the holder's batch after the confirm, a lease settlement for jobs
          // a worker took or that were marked dispatched, this sweep after publishing), so one
          // that exists says so: mark it, do not publish again. Otherwise publish it, then write
          // the entry, then mark it.
          if (await db.ledger.countDocuments({ _id: `led_charge_${j._id}` }, { limit: 1 })) {
            await db.jobs.updateOne({ _id: j._id, dispatchedAt: null }, { $set: { dispatchedAt: new Date() } });
            continue;
          }
          if (!(await api.publish(j))) continue;
          await credits.recordCharges([
            {
              accountId: j.accountId,
              jobId: j._id,
              operation: j.credits.operation,
              millicredits: j.credits.millicredits,
              requestId: null,
              at: j.createdAt,
            },
          ]);
          await db.jobs.updateOne({ _id: j._id, dispatchedAt: null }, { $set: { dispatchedAt: new Date() } });
          metrics.jobsRepublished.inc({ type: j.type, reason: 'undispatched' });
          u++;
        } else if (await api.dispatch(j, 'undispatched')) u++;
      }
      for (const j of stalled) {
        // sweptAt keeps one republished message per backoff window while a backlog drains.
        await db.jobs.updateOne({ _id: j._id }, { $set: { sweptAt: new Date() } });
        if (await api.dispatch(j, 'stalled')) s++;
      }
      // Events of finished jobs that never reached the broker.
      const unsent = await db.jobs
        .find(
          {
            status: { $in: ['complete', 'failed'] },
            event: { $exists: true },
            eventPublishedAt: null,
            completedAt: { $lt: new Date(now - graceMs) },
          },
          { projection: { _id: 1, event: 1 } },
        )
        .limit(limit)
        .toArray();
      let e = 0;
      for (const j of unsent) if (j.event && (await sendEvent(j._id, j.event))) e++;
      // Refunds a crash interrupted.
      const unrefunded = await db.jobs
        .find(
          {
            status: 'failed',
            'credits.refunded': false,
            'credits.millicredits': { $gt: 0 },
            completedAt: { $lt: new Date(now - graceMs) },
          },
          { projection: { _id: 1, accountId: 1, credits: 1 } },
        )
        .limit(limit)
        .toArray();
      for (const j of unrefunded) await refundOnce(j);
      return { undispatched: u, stalled: s, events: e, refunds: unrefunded.length, settled: charged + unpaid };
    },
  };
  return api;
}
