import type { CreditOperation } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { onlyDuplicateKeys, type Database, type JobDoc } from '../infra/mongo';
import type { CreditsRepository } from './credits.repository';
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
async function charge(db: Database, input: ChargeInput): Promise<boolean> {
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
}

async function releaseMarkers(db: Database, accountId: string, refs: string[]): Promise<void> {
  if (refs.length) await db.accounts.updateOne({ _id: accountId }, { $pullAll: { chargedRefs: refs } });
}

async function recordCharges(db: Database, entries: ChargeEntry[]): Promise<void> {
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
}

/**
 * Give back a debit. With a jobId it is idempotent per job: the account remembers the jobs it
 * refunded (the last 1000) in the same single-document update that adds the credits, and the
 * ledger entry has a unique id per job, so calling it again after a crash refunds nothing twice.
 */
async function refund(db: Database, input: RefundInput): Promise<void> {
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
  db: Database,
  repo: CreditsRepository,
  isLive: (ref: string) => Promise<boolean>,
  graceMs: number,
  dropGraceMs: number,
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
    } else if ((await isLive(ref)) || !(await repo.fence(e.accountId, ref, e.operation, e.millicredits))) {
      await db.ledger.updateOne({ _id: e._id }, { $set: { state: 'applied' } });
      await releaseMarkers(db, e.accountId, [ref]);
      out.applied++;
    } else {
      // Refund first (idempotent per ref), then mark: a crash between leaves it pending and
      // the next run refunds nothing twice.
      await refund(db, { accountId: e.accountId, operation: e.operation, millicredits: e.millicredits, jobId: ref });
      await db.ledger.updateOne({ _id: e._id }, { $set: { state: 'applied' } });
      await releaseMarkers(db, e.accountId, [ref]);
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
  db: Database,
  repo: CreditsRepository,
  unspentOfLeases: (accountId: string, leaseIds: string[]) => Promise<number>,
) {
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
      const a = await db.accounts.findOne({ _id: accountId }, { projection: { millicredits: 1, leaseRefs: 1 } });
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
      const { accountId, operation, millicredits } = input;
      if (!(await charge(db, { accountId, ref, operation, millicredits }))) {
        await db.ledger.deleteOne({ _id: ledgerId, state: 'pending' });
        throw new AppError(
          'insufficient_credits',
          `not enough AI credits: ${operation} costs ${fromUnits(millicredits)}`,
        );
      }
    },

    /** Whether a debit for `ref` was made once (its ledger entry exists, pending or applied). */
    async debited(ref: string): Promise<boolean> {
      return (await db.ledger.countDocuments({ _id: `led_charge_${ref}` })) > 0;
    },

    /**
     * Charge a job: ONE conditional update, idempotent per job (the account's chargedRefs), with
     * no ledger write: the job document already says what it costs, and its ledger entry is
     * written after (`recordCharges`, batched by the jobs module; the sweep writes any a crash
     * lost). True when the job is paid for (now or before), false when the balance is short.
     */
    chargeJob: (input: Omit<ChargeInput, 'ref'> & { jobId: string }) => charge(db, { ...input, ref: input.jobId }),

    /** Drop charge markers whose charge is recorded elsewhere now (see AccountDoc.chargedRefs). */
    releaseMarkers: (accountId: string, refs: string[]) => releaseMarkers(db, accountId, refs),

    /** Ledger entries of charged jobs, idempotent (one id per job: a repeat is ignored). */
    recordCharges: (entries: ChargeEntry[]) => recordCharges(db, entries),

    /** What the debit for `ref` paid for now exists: the charge stands (and its marker goes). */
    async confirm(ref: string, accountId?: string): Promise<void> {
      await db.ledger.updateOne({ _id: `led_charge_${ref}` }, { $set: { state: 'applied' } });
      if (accountId) await releaseMarkers(db, accountId, [ref]);
    },

    /** Settle charges a crash left `pending` (see `reconcile` above). */
    reconcile: (
      isLive: (ref: string) => Promise<boolean>,
      graceMs = CHARGE_SETTLE_GRACE_MS,
      dropGraceMs = CHARGE_DROP_GRACE_MS,
    ) => reconcile(db, repo, isLive, graceMs, dropGraceMs),

    /** Give back a debit, idempotent per job (see `refund` above). */
    refund: (input: RefundInput) => refund(db, input),
  };
  return ledger;
}
export type Ledger = ReturnType<typeof createLedger>;
