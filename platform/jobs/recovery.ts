/**
 * Recovery: what the sweep repairs after a crash, a lost batch or a broker outage. Every step of
 * the accept path and the outbox may stop at any line; the state it leaves in the job document
 * (`credits.charged: false`, `dispatchedAt: null`, `eventPublishedAt: null`, `credits.refunded:
 * false`, an expired lease) is what these functions look for, so no accepted job is lost.
 */
import { metrics } from '../../monitoring/metrics';
import { chargeOfJob } from '../credits/ledger';
import { instanceId } from '../infra/instance';
import type { JobDoc } from '../infra/mongo';
import { createLedgerRepository } from '../credits/ledger.repository';
import type { JobsContext } from './context';
import { refundOnce } from './jobs.repository';
import {
  claimSettlement,
  creditsOf,
  failUnpaid,
  markChargedByClaim,
  markDispatched,
  markSwept,
  settlementOf,
  stalledJobs,
  undispatchedJobs,
  unpaidJobs,
  unrefundedJobs,
  unsentEvents,
} from './marks.repository';
import { announce, dispatch, publish, sendEvent } from './outbox';

/**
 * Settle a job whose charge a crash may have left half-done, under its settlement claim
 * (`credits.settling`, taken with a conditional update, so the sweep and a retry never settle
 * one job at once): charge it (the account's marker says whether it was charged already), or
 * fail it unpaid when the balance is short; write its ledger entry, mark it charged, release
 * the marker, and publish it if it never was. Returns 'charged', 'unpaid', or 'busy' when
 * another process holds the claim.
 */
export async function settleOne(
  ctx: JobsContext,
  jobId: string,
  opts: { requestId: string | null; waitMs?: number },
): Promise<'charged' | 'unpaid' | 'busy'> {
  const { claiming } = ctx;
  claiming.set(jobId, (claiming.get(jobId) ?? 0) + 1);
  try {
    return await settleClaimed(ctx, jobId, opts);
  } finally {
    if (claiming.get(jobId) === 1) claiming.delete(jobId);
    else claiming.set(jobId, claiming.get(jobId)! - 1);
  }
}

async function settleClaimed(
  ctx: JobsContext,
  jobId: string,
  opts: { requestId: string | null; waitMs?: number },
): Promise<'charged' | 'unpaid' | 'busy'> {
  const { store, credits, log, settleLeaseMs, claiming } = ctx;
  let job: JobDoc | null = null;
  let claimStartedAt = 0;
  for (const deadline = Date.now() + (opts.waitMs ?? 0); ; ) {
    claimStartedAt = Date.now();
    // A claim of this process that none of its requests holds any more (the attempt failed
    // while the database was away) need not be waited out.
    const stale = (claiming.get(jobId) ?? 0) <= 1;
    job = await claimSettlement(store, jobId, instanceId, new Date(claimStartedAt + settleLeaseMs), stale);
    if (job) break;
    const current = await settlementOf(store, jobId);
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
    const failed = await failUnpaid(store, jobId, instanceId, now);
    // A job that already ran was published, so it was charged: its marker must have gone
    // astray. Leave it for a person to look at rather than fail finished work.
    if (!failed) {
      log.error('job past queued has no charge marker; left unsettled', { jobId });
      return 'busy';
    }
    await announce(ctx, jobId);
    return 'unpaid';
  }
  await credits.recordCharges([
    { accountId: job.accountId, jobId, operation, millicredits, requestId: opts.requestId, at: job.createdAt },
  ]);
  const marked = await markChargedByClaim(store, jobId, instanceId);
  // Release the marker only if the claim was still ours (else releaseSettledMarkers does, later).
  if (marked) await credits.releaseMarkers(job.accountId, [jobId]);
  if (job.status === 'queued' && !job.dispatchedAt) await dispatch(ctx, job, 'undispatched');
  return 'charged';
}

/**
 * Jobs a crash left unpaid or without their ledger entry (`credits.charged: false`, older
 * than `graceMs`, their settlement claim expired): settle each (see settleOne).
 */
export async function settleUnpaid(
  ctx: JobsContext,
  graceMs: number,
  limit = 200,
): Promise<{ charged: number; unpaid: number }> {
  const out = { charged: 0, unpaid: 0 };
  const now = new Date();
  const jobs = await unpaidJobs(ctx.store, now, new Date(now.getTime() - graceMs), limit);
  for (const { _id } of jobs) {
    const r = await settleOne(ctx, _id, { requestId: null });
    if (r === 'charged') out.charged++;
    else if (r === 'unpaid') out.unpaid++;
  }
  return out;
}

/**
 * Release charge markers of jobs whose charge is recorded (`credits.charged: true`) and that
 * nobody is settling: left by a batch that lost its claim, or by a crash after the mark.
 */
export async function releaseSettledMarkers(ctx: JobsContext, limit = 100): Promise<number> {
  const { store, credits } = ctx;
  const rows = createLedgerRepository(store);
  let released = 0;
  // Page by _id from where the last run stopped, so accounts whose markers must stay cannot
  // keep the others from being looked at.
  const accounts = await rows.markedAccounts(ctx.markerCursor, limit);
  ctx.markerCursor = accounts.length < limit ? '' : accounts[accounts.length - 1]!._id;
  for (const a of accounts) {
    const done: string[] = [];
    for (const ref of a.chargedRefs ?? []) {
      if (ref.startsWith('lse_')) continue; // a lease's marker leaves when the lease is settled
      if (ref.startsWith('hold_')) {
        // A hold whose charge is applied in the ledger (a crash after confirm's first step).
        if (await rows.appliedCount(`led_charge_${ref}`)) done.push(ref);
        continue;
      }
      const j = await creditsOf(store, ref);
      if (j && j.credits.charged !== false && !j.credits.settling) done.push(ref);
    }
    if (done.length) await credits.releaseMarkers(a._id, done);
    released += done.length;
  }
  return released;
}

/**
 * The sweep: publish jobs that never reached the broker (older than `graceMs`) and jobs
 * whose lease expired (worker died, or a retry is due). Returns how many it published.
 */
export async function sweep(
  ctx: JobsContext,
  graceMs: number,
  sweepBackoffMs: number,
  limit = 500,
): Promise<{ undispatched: number; stalled: number; events: number; refunds: number; settled: number }> {
  const { store, credits } = ctx;
  const { charged, unpaid } = await settleUnpaid(ctx, graceMs, limit);
  await releaseSettledMarkers(ctx);
  const now = Date.now();
  const undispatched = await undispatchedJobs(store, new Date(now - graceMs), limit);
  const stalled = await stalledJobs(store, new Date(now), new Date(now - sweepBackoffMs), limit);
  let u = 0;
  let s = 0;
  for (const j of undispatched) {
    if (j.credits?.lease) {
      // Charged from a lease: its ledger entry is written only once the job is known to have
      // reached the broker (the holder's batch after the confirm, a lease settlement for jobs
      // a worker took or that were marked dispatched, this sweep after publishing), so one
      // that exists says so: mark it, do not publish again. Otherwise publish it, then write
      // the entry, then mark it.
      if (await createLedgerRepository(store).entryCount(`led_charge_${j._id}`, { limit: 1 })) {
        await markDispatched(store, j._id);
        continue;
      }
      if (!(await publish(ctx, j))) continue;
      await credits.recordCharges([chargeOfJob(j)]);
      await markDispatched(store, j._id);
      metrics.jobsRepublished.inc({ type: j.type, reason: 'undispatched' });
      u++;
    } else if (await dispatch(ctx, j, 'undispatched')) u++;
  }
  for (const j of stalled) {
    // sweptAt keeps one republished message per backoff window while a backlog drains.
    await markSwept(store, j._id);
    if (await dispatch(ctx, j, 'stalled')) s++;
  }
  // Events of finished jobs that never reached the broker.
  const unsent = await unsentEvents(store, new Date(now - graceMs), limit);
  let e = 0;
  for (const j of unsent) if (j.event && (await sendEvent(ctx, j._id, j.event))) e++;
  // Refunds a crash interrupted.
  const unrefunded = await unrefundedJobs(store, new Date(now - graceMs), limit);
  for (const j of unrefunded) await refundOnce(ctx, j);
  return { undispatched: u, stalled: s, events: e, refunds: unrefunded.length, settled: charged + unpaid };
}
