import type { CreditOperation } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { onlyDuplicateKeys, type JobDoc, type Store } from '../infra/mongo';
import type { CreditsRepository } from './credits.repository';
import { createLedgerRepository, type LedgerRepository } from './ledger.repository';
import { fromUnits } from './units';

/**
 * The account's balance and the ledger: the conditional debit with its charge marker, the
 * ledger entries of charged jobs, and the repairs (`confirm`, `reconcile`, `refund`) that make a
 * crash between two documents safe. Each debit is ONE conditional single-document update ($inc
 * guarded by balance >= amount, and by the reference not being charged already), so concurrent
 * debits never take the balance below zero and a retried debit never charges twice.
 */

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
const CHARGE_DROP_GRACE_MS = 5 * 60_000;

interface ChargeInput {
  accountId: string;
  ref: string;
  operation: CreditOperation;
  millicredits: number;
  timeoutMs?: number;
  onBalance?: (millicredits: number) => void;
}

interface ChargeEntry {
  accountId: string;
  jobId: string;
  operation: CreditOperation;
  millicredits: number;
  requestId: string | null;
  at: Date;
}

/** The ledger entry of a charged job; `requestId` null when written after the fact (a sweep, a lease's settlement). */
export const chargeOfJob = (
  j: Pick<JobDoc, '_id' | 'accountId' | 'credits' | 'createdAt'>,
  requestId: string | null = null,
): ChargeEntry => ({
  accountId: j.accountId,
  jobId: j._id,
  operation: j.credits.operation,
  millicredits: j.credits.millicredits,
  requestId,
  at: j.createdAt,
});

interface RefundInput {
  accountId: string;
  operation: CreditOperation;
  millicredits: number;
  jobId?: string;
}

/**
 * Move the balance for `ref` and set its charge marker in ONE conditional update (balance
 * covers it, `ref` not charged already). True when `ref` is paid for, now or before; false
 * when the balance is short.
 */
async function charge(rows: LedgerRepository, input: ChargeInput): Promise<boolean> {
  const after = await rows.forAccount(input.accountId).charge(input);
  if (after) {
    input.onBalance?.(after.millicredits);
    metrics.creditsCharged.inc({ operation: input.operation }, fromUnits(input.millicredits));
    return true;
  }
  if (await rows.forAccount(input.accountId).markedCount(input.ref)) return true;
  metrics.insufficientCredits.inc({ operation: input.operation });
  return false;
}

async function releaseMarkers(rows: LedgerRepository, accountId: string, refs: string[]): Promise<void> {
  if (refs.length) await rows.forAccount(accountId).pullMarkers(refs);
}

async function recordCharges(rows: LedgerRepository, entries: ChargeEntry[]): Promise<void> {
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
    await rows.insertEntries(docs);
  } catch (err) {
    if (!onlyDuplicateKeys(err)) throw err;
  }
}

/**
 * Give back a debit. With a jobId it is idempotent per job: the account remembers the jobs it
 * refunded (the last 1000) in the same single-document update that adds the credits, and the
 * ledger entry has a unique id per job, so calling it again after a crash refunds nothing twice.
 */
async function refund(rows: LedgerRepository, input: RefundInput): Promise<void> {
  // Refunded before (its ledger entry exists): nothing to do, whatever the account remembers.
  if (input.jobId && (await rows.entryCount(`led_refund_${input.jobId}`))) return;
  if (input.millicredits > 0) {
    if (input.jobId) {
      await rows.forAccount(input.accountId).creditRefund(input.jobId, input.millicredits);
    } else {
      await rows.forAccount(input.accountId).addToBalance(input.millicredits);
    }
  }
  try {
    await rows.insertEntry({
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
}

/**
 * Settle charges that a crash or a database outage left `pending` (older than `graceMs`,
 * CHARGE_SETTLE_GRACE_MS): when the balance moved and what it paid for exists (`isLive`: the
 * hold, or the job), the entry is applied; when it moved and nothing was made, the ref is
 * fenced (a HoldDoc with `fence`, so the hold can no longer be made: a request still running
 * fails on it instead of delivering) and the credits are given back. When the balance never
 * moved, nothing is owed; the entry goes after `dropGraceMs`.
 */
async function reconcile(
  rows: LedgerRepository,
  repo: CreditsRepository,
  isLive: (ref: string) => Promise<boolean>,
  graceMs: number,
  dropGraceMs: number,
): Promise<{ dropped: number; applied: number; refunded: number }> {
  const out = { dropped: 0, applied: 0, refunded: 0 };
  const now = Date.now();
  const pending = await rows.pendingCharges(new Date(now - graceMs));
  for (const e of pending) {
    const ref = e._id.replace(/^led_charge_/, '');
    const charged = await rows.forAccount(e.accountId).markedCount(ref);
    if (!charged) {
      if (e.at.getTime() >= now - dropGraceMs) continue;
      await rows.deletePending(e._id);
      out.dropped++;
    } else if ((await isLive(ref)) || !(await repo.forAccount(e.accountId).fence(ref, e.operation, e.millicredits))) {
      await rows.markApplied(e._id);
      await releaseMarkers(rows, e.accountId, [ref]);
      out.applied++;
    } else {
      // Refund first (idempotent per ref), then mark: a crash between leaves it pending and
      // the next run refunds nothing twice.
      await refund(rows, { accountId: e.accountId, operation: e.operation, millicredits: e.millicredits, jobId: ref });
      await rows.markApplied(e._id);
      await releaseMarkers(rows, e.accountId, [ref]);
      out.refunded++;
    }
  }
  return out;
}

/**
 * `unspentOfLeases`: what the account's leases (their ids, from its `leaseRefs`) have not spent,
 * in millicredits (leases.ts), added to the balance shown.
 */
export function createLedger(
  store: Store,
  repo: CreditsRepository,
  unspentOfLeases: (accountId: string, leaseIds: string[]) => Promise<number>,
) {
  const rows = createLedgerRepository(store);
  const ledger = {
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
      const a = await rows.forAccount(accountId).balance();
      if (!a) return 0;
      if (!a.leaseRefs?.length) return a.millicredits;
      return a.millicredits + (await unspentOfLeases(accountId, a.leaseRefs));
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
      await rows.insertEntry({
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
      const { accountId, operation, millicredits } = input;
      if (!(await charge(rows, { accountId, ref, operation, millicredits }))) {
        await rows.deletePending(ledgerId);
        throw new AppError(
          'insufficient_credits',
          `not enough AI credits: ${operation} costs ${fromUnits(millicredits)}`,
        );
      }
    },

    /** Whether a debit for `ref` was made once (its ledger entry exists, pending or applied). */
    async debited(ref: string): Promise<boolean> {
      return (await rows.entryCount(`led_charge_${ref}`)) > 0;
    },

    /**
     * Charge a job: ONE conditional update, idempotent per job (the account's chargedRefs), with
     * no ledger write: the job document already says what it costs, and its ledger entry is
     * written after (`recordCharges`, batched by the jobs module; the sweep writes any a crash
     * lost). True when the job is paid for (now or before), false when the balance is short.
     */
    chargeJob: (input: Omit<ChargeInput, 'ref'> & { jobId: string }) => charge(rows, { ...input, ref: input.jobId }),

    /** Drop charge markers whose charge is recorded elsewhere now (see AccountDoc.chargedRefs). */
    releaseMarkers: (accountId: string, refs: string[]) => releaseMarkers(rows, accountId, refs),

    /** Ledger entries of charged jobs, idempotent (one id per job: a repeat is ignored). */
    recordCharges: (entries: ChargeEntry[]) => recordCharges(rows, entries),

    /** What the debit for `ref` paid for now exists: the charge stands (and its marker goes). */
    async confirm(ref: string, accountId?: string): Promise<void> {
      await rows.markApplied(`led_charge_${ref}`);
      if (accountId) await releaseMarkers(rows, accountId, [ref]);
    },

    /** Settle charges a crash left `pending` (see `reconcile` above). */
    reconcile: (
      isLive: (ref: string) => Promise<boolean>,
      graceMs = CHARGE_SETTLE_GRACE_MS,
      dropGraceMs = CHARGE_DROP_GRACE_MS,
    ) => reconcile(rows, repo, isLive, graceMs, dropGraceMs),

    /** Give back a debit, idempotent per job (see `refund` above). */
    refund: (input: RefundInput) => refund(rows, input),
  };
  return ledger;
}
export type Ledger = ReturnType<typeof createLedger>;
