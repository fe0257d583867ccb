import { type Store, openStore } from '../infra/mongo';

/** Options of the rate limit (config RATE_LIMIT_MAX, RATE_LIMIT_WINDOW_SECONDS). */
export interface RateLimitOptions {
  /** Requests a key may make per window. */
  max: number;
  /** Length of the fixed window, in seconds. */
  windowSeconds: number;
  /** Units one process leases at a time. Default ceil(max / 20), at least 1. */
  leaseSize?: number;
}

/** Lease size: small enough that leases left unspent in other processes cost at most a few % of the limit. */
export const defaultLeaseSize = (max: number) => Math.max(1, Math.ceil(max / 20));

interface WindowState {
  windowStart: number;
  /** Units this process leased and has not spent yet. */
  available: number;
  /** The shared count as of this process's last lease (leased by anyone, spent or not). */
  usedKnown: number;
  /** The window is known full: refuse without asking the database until it ends. */
  full: boolean;
  /** The lease request in flight; concurrent requests of this process wait for it (no herd). */
  leasing?: Promise<void>;
}

/**
 * Per-key fixed-window limit shared by every API process, counted in MongoDB by leases.
 *
 * One counter document per (key, window) in `rate_limits`: `{ _id: "<keyId>:<windowStart>",
 * count, expiresAt }`, where `count` is the units leased so far by all processes (it may pass
 * `max` by less than one lease; only `min(count, max)` were ever granted). A process that has no
 * unit left leases a share with ONE atomic `findOneAndUpdate({ _id, count: { $lt: max } },
 * { $inc: { count: lease } })` and is granted `min(lease, max - countBefore)`; when the document
 * does not exist yet it inserts it with the first lease (a duplicate-key race falls back to the
 * update). It then spends the share in memory, one unit per request, with no database call.
 * Concurrent requests of one process share one lease request in flight. Once the update finds
 * the window full, the process refuses with no database call until the window ends.
 *
 * Exactness: the database never grants more than `max` units per window, so at most `max`
 * requests pass across all processes. Units a process leased but did not spend before the window
 * ended are lost: with the default lease of ceil(max/20) and two processes at least 90% of the
 * limit stays usable even in the worst case, and under load every leased unit is spent.
 *
 * Headers: X-RateLimit-Limit; X-RateLimit-Remaining = `max - usedKnown + available`, exact for a
 * single process (it is `max` minus the requests it let through) and, across processes, what is
 * left as far as this process last saw (other processes' unspent units count as used);
 * X-RateLimit-Reset and Retry-After are seconds until the window ends. The same values go out as
 * the IETF draft's `RateLimit-Policy: "default";q=<max>;w=<window s>` and
 * `RateLimit: "default";r=<remaining>;t=<reset s>`. `expiresAt` is the window
 * end; the scheduler deletes expired counters (`ratelimits.expire`).
 */
export function createRateLimiter(store: Store, opts: RateLimitOptions) {
  const db = openStore(store);
  const { max } = opts;
  const lease = opts.leaseSize ?? defaultLeaseSize(max);
  const windowMs = opts.windowSeconds * 1000;
  const windows = new Map<string, WindowState>();
  let currentStart = 0;

  const leaseUnits = async (id: string, s: WindowState): Promise<void> => {
    const expiresAt = new Date(s.windowStart + windowMs);
    const take = async (): Promise<boolean> => {
      const before = await db.rateLimits.findOneAndUpdate(
        { _id: id, count: { $lt: max } },
        { $inc: { count: lease } },
        { returnDocument: 'before' },
      );
      if (!before) return false;
      const granted = Math.min(lease, max - before.count);
      s.available += granted;
      s.usedKnown = Math.min(max, before.count + lease);
      return true;
    };
    if (await take()) return;
    // No document below the limit: either the window is new, or it is full.
    const first = Math.min(lease, max);
    try {
      await db.rateLimits.insertOne({ _id: id, count: first, expiresAt });
      s.available += first;
      s.usedKnown = first;
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
    }
    // Another process created it meanwhile: one more try decides.
    if (await take()) return;
    s.full = true;
    s.usedKnown = max;
  };

  const stateOf = (id: string, windowStart: number): WindowState => {
    if (windowStart !== currentStart) {
      // Windows are aligned for every key: at a boundary every older state is stale.
      currentStart = windowStart;
      for (const [k, v] of windows) if (v.windowStart < windowStart) windows.delete(k);
    }
    let s = windows.get(id);
    if (!s) {
      s = { windowStart, available: 0, usedKnown: 0, full: false };
      windows.set(id, s);
    }
    return s;
  };

  /** Spend one unit: the units left after it (exact at the moment of taking), or -1 when refused. */
  const spend = async (id: string, s: WindowState): Promise<number> => {
    for (;;) {
      if (s.available > 0) {
        s.available--;
        return Math.max(0, max - s.usedKnown + s.available);
      }
      if (s.full) return -1;
      s.leasing ??= leaseUnits(id, s).finally(() => {
        s.leasing = undefined;
      });
      await s.leasing;
    }
  };

  return {
    max,
    windowSeconds: opts.windowSeconds,
    /**
     * One request of key `keyId` at `now`: the units left after it (exact at the moment of
     * taking) or -1 when the window is full, and the seconds until the window ends.
     */
    async take(keyId: string, now = Date.now()): Promise<{ remaining: number; reset: number }> {
      const windowStart = Math.floor(now / windowMs) * windowMs;
      const id = `${keyId}:${windowStart}`;
      const remaining = await spend(id, stateOf(id, windowStart));
      return { remaining, reset: Math.max(1, Math.ceil((windowStart + windowMs - Date.now()) / 1000)) };
    },
  };
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;

/** Deletes the counters of windows that ended before `now` (the scheduler's `ratelimits.expire`). */
export async function expireRateLimitWindows(store: Store, now: Date): Promise<number> {
  const db = openStore(store);
  return (await db.rateLimits.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
}
