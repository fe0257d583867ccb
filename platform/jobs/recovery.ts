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
import type { JobsContext } from './context';
import { refundOnce } from './jobs.repository';
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
  const { db, credits, log, settleLeaseMs, claiming } = ctx;
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
    await announce(ctx, jobId);
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
  const { db } = ctx;
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
  const { db, credits } = ctx;
  let released = 0;
  // Page by _id from where the last run stopped, so accounts whose markers must stay cannot
  // keep the others from being looked at.
  const accounts = await db.accounts
    .find({ _id: { $gt: ctx.markerCursor }, 'chargedRefs.0': { $exists: true } }, { projection: { chargedRefs: 1 } })
    .sort({ _id: 1 })
    .limit(limit)
    .toArray();
  ctx.markerCursor = accounts.length < limit ? '' : accounts[accounts.length - 1]!._id;
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
  const { db, credits } = ctx;
  const { charged, unpaid } = await settleUnpaid(ctx, graceMs, limit);
  await releaseSettledMarkers(ctx);
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
      if (!(await publish(ctx, j))) continue;
      await credits.recordCharges([chargeOfJob(j)]);
      await db.jobs.updateOne({ _id: j._id, dispatchedAt: null }, { $set: { dispatchedAt: new Date() } });
      metrics.jobsRepublished.inc({ type: j.type, reason: 'undispatched' });
      u++;
    } else if (await dispatch(ctx, j, 'undispatched')) u++;
  }
  for (const j of stalled) {
    // sweptAt keeps one republished message per backoff window while a backlog drains.
    await db.jobs.updateOne({ _id: j._id }, { $set: { sweptAt: new Date() } });
    if (await dispatch(ctx, j, 'stalled')) s++;
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
  for (const j of unsent) if (j.event && (await sendEvent(ctx, j._id, j.event))) e++;
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
  for (const j of unrefunded) await refundOnce(ctx, j);
  return { undispatched: u, stalled: s, events: e, refunds: unrefunded.length, settled: charged + unpaid };
}
