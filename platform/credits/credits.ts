/**
 * Credits: what an account can spend, and the four ways work takes it. All four move the
 * balance with ONE conditional single-document update (`$inc` guarded by `millicredits >=
 * amount` and by a marker that this ref is not charged yet), because there are no
 * multi-document transactions (FerretDB has none). They differ in what records the charge
 * before the balance moves, and so in who repairs it after a crash:
 *
 * - Job charge with a marker (ledger.ts `chargeJob`): every job POST that no lease covers. The
 *   job document is inserted first, unpaid (`credits.charged: false`) and priced, so the job
 *   itself is the crash record. The charge pushes the job id into the account's `chargedRefs` in
 *   the same update. The ledger entry follows in a batch (`recordCharges`), and the marker leaves
 *   once the job says it is charged (`releaseMarkers`). The jobs sweep finishes a job a crash
 *   left half-done. A failed job is refunded by the jobs module (`refund`, once per job).
 * - Plain debit (ledger.ts `debit`, `confirm`, `reconcile`): a charge for something that has no
 *   document yet. A `pending` ledger entry is written first and is the crash record. `confirm`
 *   applies it once what was paid for exists. When the process dies before that, `reconcile`
 *   (the scheduler, CHARGE_SETTLE_GRACE_MS later) applies it if the thing exists, else it fences
 *   the ref and gives the credits back. Today only `hold` calls it, as its first step.
 * - Hold (holds.ts): synchronous calls that answer in the response and may fail after the charge
 *   (POST /images, /speech, /sheets/{id}/edit, /extract-flowchart, chat turns, live sessions and
 *   tools, agent run fees). The debit stays provisional until `capture` (delivered) or `release`
 *   (failed). If the waiting process dies, the scheduler settles the hold after `until`: it
 *   captures when the `deliveredBy` document exists, else it releases.
 * - Lease (leases.ts): the job POST of an account with a large balance. An API process takes
 *   CREDIT_LEASE_CREDITS from the account in one update and charges jobs in memory. The job
 *   document names the lease, so the lease's spend is the sum of its jobs: the holder gives back
 *   the rest, or the scheduler does after `until` if the holder died. The request path makes one
 *   database command: the job insert.
 *
 * Why not fewer:
 * - Jobs through `debit`: a pending ledger entry and its `confirm` would add two commands to every
 *   job POST (test/jobs/accept-ops.test.ts counts them), only to record what the job document
 *   already records.
 * - Holds through `chargeJob`: a synchronous call has no document before its charge for a sweep
 *   to find. A crash after the `$inc` would leave a marker that nothing reads, and the credits
 *   would be gone. The pending ledger entry and `reconcile` exist for that window.
 * - Holds through `debit` alone: `confirm` makes the charge final, and `reconcile` looks only at
 *   entries still pending. A call that fails a minute later, or whose process dies then, would
 *   stay paid. The hold adds the deadline (`until`, `extend`) and the test of delivery
 *   (`deliveredBy`) that decide after a crash.
 * - Every charge from a lease: a lease keeps CREDIT_LEASE_CREDITS away from the other processes.
 *   On a small balance they would answer 402 while the lease still holds credits, so leases
 *   start only above CREDIT_LEASE_MIN_BALANCE. A lease's spend is also recovered by counting the
 *   jobs that name it. A synchronous call leaves no such document, so after its holder died a
 *   lease would give back credits its calls had spent.
 * - Leases replaced by per-job charges: every job POST of a busy account would update the same
 *   account document. That is the command the leases take off the hot path (on FerretDB an
 *   update rewrites the whole document, and updates of one collection run one at a time).
 *
 * Amounts are integer millicredits (units.ts). The balance shown adds the unspent part of the
 * account's leases (ledger.ts `balance`).
 */
import type { CreditOperation } from '../../contracts/registry';
import type { Store } from '../infra/mongo';
import { createCreditsRepository } from './credits.repository';
import { createHolds } from './holds';
import { createLeaseBook } from './leases';
import { createLedger } from './ledger';
import { toUnits } from './units';

export type { HoldDelivery } from './credits.repository';
export { CHARGE_SETTLE_GRACE_MS } from './ledger';
export {
  LEASE_SETTLE_MARGIN_MS,
  LEASE_VOUCH_MS,
  createCreditLeases,
  type CreditLeaseSettings,
  type LeaseSpend,
} from './leases';
export { addCredits, fromUnits, migrateCreditUnits, toUnits } from './units';

export function createCredits(store: Store, prices: Readonly<Record<CreditOperation, number>>) {
  const unitPrices = Object.fromEntries(Object.entries(prices).map(([op, p]) => [op, toUnits(p)])) as Record<
    CreditOperation,
    number
  >;
  const repo = createCreditsRepository(store);
  const ledger = createLedger(store, repo, (accountId, leaseIds) => leases.unspent(accountId, leaseIds));
  const holds = createHolds(repo, ledger);
  const leases = createLeaseBook(store, repo, ledger);
  return {
    /** What `count` of `op` costs, in millicredits (speech: `count` characters). */
    millicreditsFor: (op: CreditOperation, count = 1) => unitPrices[op] * count,
    balance: ledger.balance,
    debit: ledger.debit,
    chargeJob: ledger.chargeJob,
    releaseMarkers: ledger.releaseMarkers,
    recordCharges: ledger.recordCharges,
    confirm: ledger.confirm,
    reconcile: ledger.reconcile,
    refund: ledger.refund,
    hold: holds.hold,
    extend: holds.extend,
    pending: holds.pending,
    capture: holds.capture,
    settle: holds.settle,
    release: holds.release,
    settleExpiredHolds: holds.settleExpiredHolds,
    addLeaseSpend: leases.addLeaseSpend,
    takeLease: leases.takeLease,
    settleLease: leases.settleLease,
    settleExpiredLeases: leases.settleExpiredLeases,
  };
}
export type Credits = ReturnType<typeof createCredits>;
