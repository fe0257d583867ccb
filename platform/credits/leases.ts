import { metrics } from '../../monitoring/metrics';
import { newId } from '../infra/ids';
import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import type { CreditsRepository, LeaseDoc } from './credits.repository';
import { createLedgerRepository } from './ledger.repository';
import { chargeOfJob, type Ledger } from './ledger';
import { toUnits } from './units';

/**
 * Credit leases: credits an API process takes from an account in one update to charge jobs from
 * in memory. `createLeaseBook` is the stored side (take, write down spend, settle, what the
 * balance shown adds); `createCreditLeases` is one process's holding of them.
 */

/**
 * How long the balance shown trusts a lease's `spentMillicredits`: while its holder keeps writing it down
 * (its batches follow each answer within 20 to 100 ms) and for this long after. Past it the
 * holder is idle, dead (its last batch may have died with it), or stopped spending from the
 * lease because a count became uncertain (an insert whose outcome it never learnt, a batch that
 * failed while the database was away): the balance then counts the jobs that name the lease, which
 * is what the lease spent, whatever happened to the holder. So the balance read is exact within
 * this long of an API process dying and as soon as the database answers again, not when the
 * scheduler settles the lease (LEASE_SETTLE_MARGIN_MS after it expired). Clocks that disagree by
 * more than this only make the balance count more often (or trust a dead holder that much longer).
 */
export const LEASE_VOUCH_MS = 2000;

/**
 * A lease is settled by the scheduler only this long after its `until`: `until` comes from the
 * holder's clock and is compared on the scheduler's, so their clocks may disagree by this much
 * (on top of the quarter of the lease, at most 5 s, the holder keeps between its last spend and
 * `until`) before a settlement could count the jobs while the holder's last insert still lands.
 */
export const LEASE_SETTLE_MARGIN_MS = 10_000;

/**
 * What the account's leases (`leaseIds`, from its `leaseRefs`) have not spent, in millicredits:
 * each lease is leased minus what its holder wrote down as spent while the holder vouches for
 * that count (LEASE_VOUCH_MS), else minus the price of the jobs that name it.
 */
async function unspent(repo: CreditsRepository, accountId: string, leaseIds: string[]): Promise<number> {
  // By `_id` one at a time: FerretDB 1.24 scans the collection for `_id: { $in: [...] }`.
  const ls = await Promise.all(leaseIds.map((id) => repo.forAccount(accountId).lease(id)));
  const now = Date.now();
  const each = await Promise.all(
    ls.map(async (l) => {
      if (!l) return 0;
      // The holder's count while it vouches for it; else what the lease's jobs cost.
      const vouched = !l.settling && now < l.until.getTime() && now - (l.spentAt ?? l.at).getTime() <= LEASE_VOUCH_MS;
      const spent = vouched
        ? (l.spentMillicredits ?? 0)
        : (await repo.jobsOfLease(l)).reduce((n, j) => n + j.credits.millicredits, 0);
      return Math.max(0, l.millicredits - spent);
    }),
  );
  return each.reduce((n, u) => n + u, 0);
}

export function createLeaseBook(store: Store, repo: CreditsRepository, ledger: Pick<Ledger, 'recordCharges'>) {
  const rows = createLedgerRepository(store);

  const book = {
    /** What the account's leases have not spent (see `unspent` above). */
    unspent: (accountId: string, leaseIds: string[]) => unspent(repo, accountId, leaseIds),

    /** Write down what leases spent (lease id → millicredits), in one command: see LeaseDoc.spentMillicredits. */
    async addLeaseSpend(spends: ReadonlyMap<string, number>): Promise<void> {
      if (!spends.size) return;
      await repo.addLeaseSpend(spends, new Date());
    },

    /**
     * Take `amount` credits from the account for this process to spend in memory, when the
     * account keeps at least `minBalance` besides: the lease is stored first, then the account is
     * debited with the lease's marker in one conditional update. Null when the balance is short
     * (the lease is dropped again). A crash between the two leaves a lease the scheduler settles
     * after `until`: nothing to give back when the marker never reached the account.
     */
    async takeLease(input: {
      accountId: string;
      millicredits: number;
      minBalance: number;
      ttlMs: number;
      owner: string;
      timeoutMs?: number;
    }): Promise<LeaseDoc | null> {
      const at = new Date();
      const lease: LeaseDoc = {
        _id: newId('lse'),
        accountId: input.accountId,
        owner: input.owner,
        millicredits: input.millicredits,
        at,
        until: new Date(at.getTime() + input.ttlMs),
        settling: null,
        spentMillicredits: 0,
      };
      await repo.insertLease(lease);
      if (await rows.forAccount(input.accountId).takeForLease(input, lease._id)) {
        metrics.creditLeases.inc({ outcome: 'taken' });
        return lease;
      }
      await repo.deleteLease(lease._id);
      metrics.creditLeases.inc({ outcome: 'refused' });
      return null;
    },

    /**
     * Give back what a lease did not spend, once: claim it (`settling`), count its spend (`spent`, in millicredits,
     * when the holder knows it exactly, else the charges of the jobs naming it), then add
     * `millicredits - spent` to the account in the same update that removes the lease's marker (so a
     * second settlement gives nothing), and drop the lease. `expiredBefore` settles it only if
     * its `until` is before then (the scheduler). Null when someone else settles it or it is gone.
     *
     * Counting the jobs also writes the ledger entries a crash lost, but only of jobs known to
     * have reached the broker (a worker took them, or `dispatchedAt` is set): the jobs sweep reads
     * a lease job's entry as its dispatch record, so a job still queued and undispatched keeps
     * none, and the sweep publishes it, then writes its entry.
     */
    async settleLease(
      leaseId: string,
      opts: { spent?: number; expiredBefore?: Date } = {},
    ): Promise<{ spent: number; returned: number } | null> {
      const now = new Date();
      const l = await repo.claimLease(leaseId, now, opts.expiredBefore);
      if (!l) return null;
      let spent = opts.spent;
      if (spent === undefined) {
        const jobs = await repo.jobsOfLease(l);
        const published = jobs.filter((j) => j.status !== 'queued' || j.dispatchedAt);
        await ledger.recordCharges(published.map((j) => chargeOfJob(j)));
        spent = jobs.reduce((n, j) => n + j.credits.millicredits, 0);
      }
      const returned = Math.max(0, l.millicredits - spent);
      const gaveBack = await rows.forAccount(l.accountId).returnLease(l._id, returned);
      await repo.deleteLease(l._id);
      metrics.creditLeases.inc({ outcome: opts.spent === undefined ? 'settled_by_count' : 'returned' });
      return { spent, returned: gaveBack ? returned : 0 };
    },

    /**
     * Leases whose holder did not settle them (it died, or its count is uncertain): settled from
     * their jobs once `until` is LEASE_SETTLE_MARGIN_MS past on this clock.
     */
    async settleExpiredLeases(now = new Date()): Promise<{ settled: number; returned: number }> {
      const before = new Date(now.getTime() - LEASE_SETTLE_MARGIN_MS);
      const expired = await repo.expiredLeases(before);
      const out = { settled: 0, returned: 0 };
      for (const l of expired) {
        const r = await book.settleLease(l._id, { expiredBefore: before });
        if (!r) continue;
        out.settled++;
        out.returned += r.returned;
      }
      return out;
    },
  };
  return book;
}
type LeaseBook = ReturnType<typeof createLeaseBook>;

export interface CreditLeaseSettings {
  /** Credits per lease; 0 turns leases off (every charge is a conditional update of the account). */
  credits: number;
  /** A lease is taken only while the account keeps at least this much besides. */
  minBalance: number;
  /** How long a lease lives; the holder stops spending a quarter before (at most 5 s before). */
  ttlMs: number;
}

/** A charge taken from a lease, until the job it pays for is stored (`commit`) or not (`release`). */
export interface LeaseSpend {
  leaseId: string;
  /** How long the job insert may take: it must reach the server while the lease is spendable. */
  timeoutMs: number;
  commit(): void;
  /**
   * `stored: false` only when the server refused the insert (a duplicate key); `'unknown'` (any
   * other failure: a timeout, a write-concern error after the write applied) leaves the lease to
   * the scheduler, which settles it from its jobs after it expired.
   */
  release(stored: false | 'unknown'): void;
}

interface HeldLease {
  doc: LeaseDoc;
  spent: number;
  reserved: number;
  /** Every spend's insert and ledger entry is known to have landed (or not): the count is exact. */
  exact: boolean;
  retired: boolean;
  timer?: NodeJS.Timeout;
  settled?: Promise<void>;
}

/**
 * Reserve `amount` of `h` until the caller knows whether its job was stored; `then` runs once,
 * with `true` when it was (the amount is spent), else with what `release` was told.
 */
function spendFrom(
  h: HeldLease,
  amount: number,
  margin: number,
  then: (stored: true | false | 'unknown') => void,
): LeaseSpend {
  h.reserved += amount;
  let done = false;
  const end = () => {
    if (done) return false;
    done = true;
    h.reserved -= amount;
    return true;
  };
  return {
    leaseId: h.doc._id,
    timeoutMs: Math.max(100, Math.min(margin / 2, h.doc.until.getTime() - Date.now() - margin / 2)),
    commit: () => {
      if (!end()) return;
      h.spent += amount;
      then(true);
    },
    release: (stored) => {
      if (!end()) return;
      then(stored);
    },
  };
}

/**
 * Credit leases of one API process: for an account with a large balance, the process takes
 * `credits` from the account in one update and charges jobs from it in memory, so a job POST
 * makes no account update. The job document names the lease (`credits.lease`) and is inserted
 * charged; the lease's spend is the sum of its jobs, so it is recoverable after a crash.
 *
 * A lease is retired when it cannot cover the next charge or its spending time ends (a timer:
 * an idle account gets its credits back at once), then settled by the holder with its exact
 * count (after the ledger batch holding its jobs was written: `beforeSettle`). A lease whose
 * count is not exact (an insert's outcome unknown, a ledger batch failed: the database went away)
 * is retired at once, and it and the leases of a holder that died are settled by the scheduler
 * after `until` (plus LEASE_SETTLE_MARGIN_MS), from their jobs (settleExpiredLeases); the balance
 * shown counts their jobs meanwhile (LEASE_VOUCH_MS). Below `minBalance` no lease is taken and
 * `reserve` returns null: the caller charges the account per job, exactly.
 */
export function createCreditLeases(
  credits: Pick<LeaseBook, 'takeLease' | 'settleLease'>,
  s: CreditLeaseSettings & { owner: string; log: Logger; beforeSettle: () => Promise<void> },
) {
  const margin = Math.min(5000, s.ttlMs / 4);
  // Settings are in credits (config); everything the leases count is in millicredits.
  const leaseUnits = toUnits(s.credits);
  const minUnits = toUnits(s.minBalance);
  const byAccount = new Map<string, HeldLease>();
  const byId = new Map<string, HeldLease>();
  const taking = new Map<string, Promise<HeldLease | null>>();
  /**
   * Balances seen lately (after a per-job charge): a lease is tried only for an account last seen
   * holding enough for one, so an account under the threshold costs no futile attempt.
   */
  const seen = new Map<string, number>();
  const settling = new Set<Promise<void>>();
  let closed = false;

  const spendable = (h: HeldLease) => Date.now() < h.doc.until.getTime() - margin;

  const settle = (h: HeldLease) => {
    if (!h.retired || h.reserved > 0 || h.settled !== undefined) return;
    clearTimeout(h.timer);
    h.settled = (async () => {
      try {
        await s.beforeSettle();
        // A spend whose insert timed out may still land in the server: counting its jobs now
        // could miss it, so such a lease waits for the scheduler, after `until`.
        if (!h.exact) return;
        await credits.settleLease(h.doc._id, { spent: h.spent });
      } catch (err) {
        s.log.warn('credit lease not settled; the scheduler settles it after it expires', {
          leaseId: h.doc._id,
          err: err as Error,
        });
      } finally {
        byId.delete(h.doc._id);
      }
    })();
    settling.add(h.settled);
    void h.settled.finally(() => settling.delete(h.settled!));
  };

  const retire = (h: HeldLease) => {
    h.retired = true;
    if (byAccount.get(h.doc.accountId) === h) byAccount.delete(h.doc.accountId);
    settle(h);
  };

  /**
   * The lease's count is no longer certain: spend no more from it (the next spend takes a new
   * lease), so its `spentMillicredits` stops being written down and the balance shown counts its jobs
   * (LEASE_VOUCH_MS); the scheduler settles it from them after it expired.
   */
  const uncertain = (h: HeldLease) => {
    h.exact = false;
    retire(h);
  };

  const take = async (accountId: string): Promise<HeldLease | null> => {
    let doc: LeaseDoc | null;
    try {
      doc = await credits.takeLease({
        accountId,
        millicredits: leaseUnits,
        minBalance: minUnits,
        ttlMs: s.ttlMs,
        owner: s.owner,
        timeoutMs: margin / 2,
      });
    } catch (err) {
      s.log.warn('credit lease not taken; charging per job', { accountId, err: err as Error });
      doc = null;
    }
    if (!doc) {
      seen.delete(accountId);
      return null;
    }
    const h: HeldLease = { doc, spent: 0, reserved: 0, exact: true, retired: false };
    h.timer = setTimeout(() => retire(h), Math.max(0, doc.until.getTime() - margin - Date.now()));
    h.timer.unref();
    byId.set(doc._id, h);
    if (closed) retire(h);
    else byAccount.set(accountId, h);
    return h;
  };

  return {
    /**
     * A spend of `amount` from this process's lease on the account (taking one when the account
     * was last seen with enough for it), or null: charge the account per job.
     */
    async reserve(accountId: string, amount: number): Promise<LeaseSpend | null> {
      if (leaseUnits <= 0 || closed || !(amount > 0) || amount > leaseUnits) return null;
      for (let tries = 0; tries < 3; tries++) {
        const h = byAccount.get(accountId);
        if (h && (!spendable(h) || h.doc.millicredits - h.spent - h.reserved < amount)) retire(h);
        else if (h) return spendFrom(h, amount, margin, (stored) => (stored === 'unknown' ? uncertain(h) : settle(h)));
        if ((seen.get(accountId) ?? 0) < leaseUnits + minUnits) return null;
        let p = taking.get(accountId);
        if (!p) {
          p = take(accountId).finally(() => taking.delete(accountId));
          taking.set(accountId, p);
        }
        if (!(await p)) return null;
      }
      return null;
    },

    /** The account's balance after a per-job charge (see `reserve`). */
    saw(accountId: string, millicredits: number): void {
      if (leaseUnits <= 0) return;
      if (seen.size >= 10_000) seen.clear();
      seen.set(accountId, millicredits);
    },

    /** A ledger batch with jobs of this lease failed: settle it from its jobs, which writes their entries. */
    inexact(leaseId: string): void {
      const h = byId.get(leaseId);
      if (h) uncertain(h);
    },

    /** Retire every lease and settle it (on shutdown). May be called twice. */
    async close(): Promise<void> {
      closed = true;
      for (const h of [...byId.values()]) retire(h);
      while (settling.size) await Promise.allSettled([...settling]);
    },
  };
}
