import { DEAD_LETTER_RETENTION_DAYS } from './dead-letters';
import { createCreditsRepository } from '../platform/credits/credits.repository';
import { expireEventOutbox, sweepEventOutbox } from '../platform/events/events';
import type { Runtime } from '../platform/runtime';
import { purgeTrashedDriveFiles } from '../platform/drive/purge';
import { repairDrive } from '../platform/drive/repair';
import { sweepPendingDriveText } from '../platform/drive/text-queue';
import { AGENT_RUN_SWEEP_GRACE_MS, createAgentRuns } from '../platform/agents/runs.service';
import { createLiveSessions } from '../platform/live/sessions';
import { createDeadLetters } from './dead-letters.repository';
import { expireAuditEntries } from '../platform/audit/audit.repository';
import { expireIdempotencyRecords } from '../platform/idempotency/idempotency.repository';
import { expireRateLimitWindows } from '../platform/rate-limits/rate-limits.repository';

/** Scheduler tasks: plain functions over the runtime, so tests can call them directly too. */
export function createTasks(rt: Runtime) {
  const { store, config } = rt;
  const creditsRepo = createCreditsRepository(store);
  const deadLetters = createDeadLetters(store);
  return {
    /** Publish jobs that never reached the broker, and jobs whose worker died or whose retry is due. */
    sweepJobs: () => rt.jobs.sweep(config.DISPATCH_GRACE_MS, config.JOB_LEASE_MS),

    /**
     * Publish non-job events the broker never confirmed; drop published ones after a week.
     * Broadcast key and account invalidations that were stored but never confirmed.
     */
    async sweepEvents(now = new Date()) {
      const sent = await sweepEventOutbox(rt, config.DISPATCH_GRACE_MS);
      const expired = await expireEventOutbox(store, new Date(now.getTime() - 7 * 86_400_000));
      const invalidations = await rt.sweepAuthInvalidations(1000);
      return { sent, expired, invalidations };
    },

    /** Audit entries are kept AUDIT_RETENTION_DAYS (90), then deleted. */
    async expireAudit(now = new Date()) {
      const cutoff = new Date(now.getTime() - config.AUDIT_RETENTION_DAYS * 86_400_000);
      return expireAuditEntries(store, cutoff);
    },

    async expireIdempotencyKeys(now = new Date()) {
      return expireIdempotencyRecords(store, now);
    },

    /**
     * Settle credits held for synchronous calls whose process died while waiting (given back, or
     * kept when the call delivered: see credits.settle), credit leases whose API process died
     * (credits.settleLease), and charges a crash left pending.
     */
    async settleCredits() {
      const { released, captured } = await rt.credits.settleExpiredHolds();
      // Credit leases whose API process died: the unspent part goes back (counted from their
      // jobs), 10 s after their `until` at the earliest, in case the clocks disagree.
      const leases = await rt.credits.settleExpiredLeases();
      // What a pending debit paid for: its hold (a fence is not one), or a job of an older debit.
      const isLive = async (ref: string) => (await rt.jobs.exists(ref)) || (await creditsRepo.holdMade(ref));
      // Debits whose hold was never made are given back CHARGE_SETTLE_GRACE_MS (15 s) after them.
      const reconciled = await rt.credits.reconcile(isLive);
      return {
        released,
        captured,
        leasesSettled: leases.settled,
        leaseCreditsReturned: leases.returned,
        ...reconciled,
      };
    },

    /** Parked dead letters older than DEAD_LETTER_RETENTION_DAYS. */
    async expireDeadLetters(now = new Date()) {
      const cutoff = new Date(now.getTime() - DEAD_LETTER_RETENTION_DAYS * 86_400_000);
      return deadLetters.expire(cutoff);
    },

    async expireRateLimitWindows(now = new Date()) {
      return expireRateLimitWindows(store, now);
    },

    /** Drive files trashed more than DRIVE_TRASH_DAYS ago: text, search postings, bytes, meter share, record (resumable). */
    purgeDriveTrash: (now = new Date()) => purgeTrashedDriveFiles(rt, { now }),

    /**
     * What a crash mid-write left in the Drive: upload reservations older than their grace (10
     * minutes: the bytes deleted and the meter given back once, or only the reservation when the
     * file was recorded), and folder paths a move marked more than a minute ago (recomputed).
     */
    repairDrive: (now = new Date()) => repairDrive(rt, { now }),

    /** Drive files whose text is still `pending` 30 s after upload: the extraction is published again (with a backoff; failed after 6 tries). */
    sweepDriveText: (now = new Date()) => sweepPendingDriveText(rt, { now }),

    /**
     * Live sessions still `connected` whose API process stopped heart-beating (lastSeenAt older
     * than LIVE_STALE_AFTER_MS: the process died without closing them) become `dropped`, so
     * their state is true and they resume by handle like any dropped session.
     */
    dropStaleLiveSessions: (now = new Date()) =>
      createLiveSessions(rt).dropStale(new Date(now.getTime() - config.LIVE_STALE_AFTER_MS)),

    /** Agent runs left queued (a lost publish) or under an expired lease, and finished runs whose evi.* event was not emitted. */
    sweepAgentRuns: (now = new Date()) => createAgentRuns(rt).sweep(AGENT_RUN_SWEEP_GRACE_MS, now),
  };
}
