/**
 * The accept path (SPEC 3.1 step 1): what a POST that starts a job does on the request path
 * (insert, charge, publish, answer) and what it leaves to a batch a few milliseconds later (the
 * ledger entry, the charge and dispatch marks, the lease spends). Apart from the state machine
 * because it is the API's hot path: its shape is set by the round trips it saves, and every
 * step it defers is one the sweep (recovery.ts) repairs.
 */
import { JOB_ID_PREFIX, type CreditOperation, type JobType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { createCreditLeases, fromUnits, type LeaseSpend } from '../credits/credits';
import { chargeOfJob } from '../credits/ledger';
import { AppError } from '../infra/errors';
import { faultPoint } from '../infra/faults';
import { newId } from '../infra/ids';
import { instanceId } from '../infra/instance';
import type { JobDoc } from '../infra/mongo';
import { createWriteBehind } from '../infra/write-behind';
import { type AcceptedJob, type JobsBase, type JobsContext, WRITE_BEHIND } from './context';
import { create } from './jobs.repository';
import { deleteUncharged, forAccount, markAccepted } from './marks.repository';
import { publish } from './outbox';
import { settleOne } from './recovery';

/**
 * The accept path's batches and this process's credit leases, made once per createJobs: the
 * lease ledger and the leases refer to each other (a failed batch makes its leases inexact, a
 * lease waits for the batch before it settles).
 */
export function createAcceptBatches(base: JobsBase) {
  const { store, credits, log, deps } = base;
  /**
   * What a charged, published job still needs written: its ledger entry, `credits.charged`,
   * `dispatchedAt`, and the release of its account marker. These lag the answer by 20 ms (up to
   * 100 ms under a steady stream, see WRITE_BEHIND) and go in one batch (one insertMany, one
   * bulkWrite, one marker release per account, for many jobs); a crash that loses a batch is
   * repaired by the sweep (`settleUnpaid`, and the undispatched sweep re-publishes, which a worker
   * treats as a duplicate).
   */
  const settled = createWriteBehind<AcceptedJob>(
    async (items) => {
      await credits.recordCharges(items.map(({ job, requestId }) => chargeOfJob(job, requestId)));
      const now = new Date();
      // Marked only while this process still holds the settlement claim its insert took.
      const matched = await markAccepted(
        store,
        items.map(({ job, dispatched }) => ({ jobId: job._id, dispatched })),
        instanceId,
        now,
      );
      // Only now that the jobs say they are charged may their markers leave the account. If a
      // claim was lost meanwhile (this batch came later than the claim lasts), keep them all: the
      // sweep releases markers of charged jobs (releaseSettledMarkers).
      if (matched !== items.length) return;
      const byAccount = new Map<string, string[]>();
      for (const { job } of items) byAccount.set(job.accountId, [...(byAccount.get(job.accountId) ?? []), job._id]);
      for (const [accountId, ids] of byAccount) await credits.releaseMarkers(accountId, ids);
    },
    { ...WRITE_BEHIND, log, name: 'job-accept' },
  );

  /**
   * What jobs charged from a credit lease leave to write, within 20 to 100 ms, in two commands per
   * batch: each lease's spend (one $inc per lease, for the balance shown: LeaseDoc.spentMillicredits), and
   * the ledger entries of the jobs whose publish was confirmed. The entry doubles as the job's
   * dispatch record (the sweep reads it before it republishes an undispatched job, see `sweep`),
   * so a job whose publish failed gets none here: the sweep publishes it, then writes it.
   */
  const leaseLedger = createWriteBehind<AcceptedJob>(
    async (items) => {
      try {
        const spends = new Map<string, number>();
        for (const { job } of items)
          if (job.credits.lease)
            spends.set(job.credits.lease, (spends.get(job.credits.lease) ?? 0) + job.credits.millicredits);
        await credits.addLeaseSpend(spends);
        await credits.recordCharges(
          items.filter((i) => i.dispatched).map(({ job, requestId }) => chargeOfJob(job, requestId)),
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
  return { settled, leaseLedger, leases };
}

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

/** What every accept path is asked: whose job, of what, for which request, and how to undo it. */
interface AcceptRequest {
  accountId: string;
  requestId: string;
  type: JobType;
  operation: CreditOperation;
  input: Record<string, unknown>;
  notes?: string[];
  /** Removes what the caller made for the job (with `before`, say) when the request is refused. */
  undo?: (jobId: string) => Promise<void>;
}

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
export async function accept(
  ctx: JobsContext,
  input: AcceptRequest & {
    /** In millicredits; defaults to the operation's price. */
    millicredits?: number;
    /** Defaults to a random id; derive it from an Idempotency-Key so a retry finds the job. */
    jobId?: string;
    before?: (jobId: string) => Promise<void>;
  },
): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
  const { credits, settleLeaseMs, claiming, leases } = ctx;
  const amount = input.millicredits ?? credits.millicreditsFor(input.operation);
  const jobId = input.jobId ?? newId(JOB_ID_PREFIX[input.type]);
  await input.before?.(jobId);
  const spend = await leases.reserve(input.accountId, amount);
  if (spend) return acceptFromLease(ctx, { ...input, jobId, amount }, spend);
  let job: JobDoc;
  const insertedAt = Date.now();
  try {
    // The insert is also this process's claim to settle the job's charge (credits.settling).
    job = await create(ctx, {
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
    return acceptAgain(ctx, { ...input, jobId, amount });
  }
  claiming.set(jobId, (claiming.get(jobId) ?? 0) + 1);
  try {
    return await chargeAndPublish(ctx, { ...input, jobId, amount }, job, insertedAt);
  } finally {
    if (claiming.get(jobId) === 1) claiming.delete(jobId);
    else claiming.set(jobId, claiming.get(jobId)! - 1);
  }
}

/** accept() after its insert: the charge, the publish, the batch (under the insert's claim). */
export async function chargeAndPublish(
  ctx: JobsContext,
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
  const { store, credits, settleLeaseMs, leases, settled } = ctx;
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
    await deleteUncharged(store, jobId);
    await input.undo?.(jobId);
    throw new AppError('insufficient_credits', `not enough AI credits: ${input.operation} costs ${fromUnits(amount)}`);
  }
  faultPoint('accept.after-charge');
  const dispatched = await publish(ctx, job);
  faultPoint('accept.after-publish');
  settled.add({ job, requestId: input.requestId, dispatched });
  if (dispatched) metrics.jobsDispatched.inc({ type: job.type }); // else the sweep publishes it (jobs_republished_total)
  return { job, charged: amount, retried: false };
}

/**
 * accept() for an account with a large balance, charged from this process's credit lease:
 * ONE database command on the request path (the job inserted charged, naming the lease), the
 * publish with its confirm, then the ledger entry in a batch. A crash after the insert leaves
 * a charged job the sweep publishes (with its ledger entry) if it never reached the broker,
 * and a lease the scheduler settles from its jobs.
 */
export async function acceptFromLease(
  ctx: JobsContext,
  input: AcceptRequest & { amount: number; jobId: string },
  spend: LeaseSpend,
): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
  const { leaseLedger } = ctx;
  let job: JobDoc;
  try {
    job = await create(ctx, {
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
    return acceptAgain(ctx, { ...input });
  }
  faultPoint('accept.after-insert');
  faultPoint('accept.after-charge');
  const dispatched = await publish(ctx, job);
  faultPoint('accept.after-publish');
  leaseLedger.add({ job, requestId: input.requestId, dispatched });
  if (dispatched) metrics.jobsDispatched.inc({ type: job.type });
  // Counted once the job is in the ledger batch, so settling the lease waits for that batch.
  spend.commit();
  return { job, charged: input.amount, retried: false };
}

/**
 * A retry of a request whose job exists already (same Idempotency-Key; the first attempt's
 * process died or is still finishing): settle its charge if a crash left it half-done, and
 * answer with the job as it was accepted.
 */
export async function acceptAgain(
  ctx: JobsContext,
  input: {
    accountId: string;
    requestId: string;
    type: JobType;
    jobId: string;
    amount: number;
    operation: CreditOperation;
  },
): Promise<{ job: JobDoc; charged: number; retried: boolean }> {
  const { store, settleLeaseMs } = ctx;
  const existing = await forAccount(store, input.accountId).job(input.jobId);
  if (!existing || existing.type !== input.type)
    throw new AppError('conflict', 'Idempotency-Key: this key already named another job');
  const unpaid = () =>
    new AppError('insufficient_credits', `not enough AI credits: ${input.operation} costs ${fromUnits(input.amount)}`);
  if (existing.credits.charged === null) throw unpaid(); // failed unpaid by the sweep
  if (existing.credits.charged === false) {
    // Wait out the dead attempt's claim (it is never longer than the Idempotency-Key lease
    // this retry already outlived), then settle.
    const outcome = await settleOne(ctx, existing._id, { requestId: input.requestId, waitMs: settleLeaseMs });
    if (outcome === 'unpaid') throw unpaid();
  }
  return { job: asAccepted(existing), charged: input.amount, retried: true };
}
