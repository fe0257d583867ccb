import type { RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../../platform/errors';
import type { Database } from '../../platform/mongo';
import { locals } from '../http/context';

/**
 * Per-key fixed-window limit kept in MongoDB, so every API process shares one count.
 *
 * Each request claims a numbered slot of the window with a unique insert
 * (`<keyId>:<windowStart>:<n>`); the insert that succeeds tells the request its rank, and ranks
 * above the limit are refused. Unique inserts are race-free on MongoDB and on FerretDB alike
 * (FerretDB's `$inc` is not, see platform/mongo-locks.ts), so exactly `max` requests pass per
 * window whatever the concurrency, with no lock. A per-process hint of the last slot seen keeps
 * collisions rare, and once a window is known full the refusal needs no database call.
 * X-RateLimit-Reset and Retry-After are seconds until the window ends.
 */
export function rateLimit(db: Database, opts: { max: number; windowSeconds: number }): RequestHandler {
  const hints = new Map<string, number>();
  const slots = db.rateLimits;

  /** The next slot number this process may try, reserved synchronously so that concurrent
   * requests in one process never collide with each other. */
  const reserve = (window: string, atLeast = 0) => {
    const n = Math.max(hints.get(window) ?? 0, atLeast) + 1;
    hints.set(window, n);
    return n;
  };

  const claim = async (window: string, expiresAt: Date): Promise<number> => {
    let n = reserve(window);
    for (;;) {
      if (n > opts.max) return n; // full: ranks past the limit are not stored
      try {
        await slots.insertOne({ _id: `${window}:${n}`, count: n, expiresAt });
        return n;
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
        // Taken by another process: jump past the highest slot stored, then try again.
        const top = await slots.find({ _id: { $gte: `${window}:`, $lt: `${window};` } }).sort({ count: -1 }).limit(1).next();
        n = reserve(window, top?.count ?? n);
      }
    }
  };

  return async (req, res, next) => {
    const auth = locals(res).auth;
    if (!auth) return next();
    const windowMs = opts.windowSeconds * 1000;
    const now = Date.now();
    const windowStart = Math.floor(now / windowMs) * windowMs;
    const window = `${auth.key._id}:${windowStart}`;
    if (hints.size > 10_000) for (const k of hints.keys()) if (!k.endsWith(`:${windowStart}`)) hints.delete(k);
    const rank = await claim(window, new Date(windowStart + windowMs));
    const reset = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
    res.setHeader('X-RateLimit-Limit', String(opts.max));
    res.setHeader('X-RateLimit-Remaining', String(Math.max(0, opts.max - rank)));
    res.setHeader('X-RateLimit-Reset', String(reset));
    if (rank > opts.max) {
      metrics.rateLimited.inc({ route: `/${req.path.split('/')[1] ?? ''}` }); // first segment only: bounded labels, no ids
      return next(new AppError('rate_limited', `rate limit of ${opts.max} requests per ${opts.windowSeconds} s exceeded; retry after ${reset} s`, { headers: { 'Retry-After': String(reset) } }));
    }
    next();
  };
}
