import type { RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../../platform/errors';
import type { Database } from '../../platform/mongo';
import { locals } from '../http/context';

/**
 * Per-key fixed-window limit kept in MongoDB, so every API process shares one count.
 * One atomic upsert-with-$inc per request. Headers on every authenticated response;
 * X-RateLimit-Reset and Retry-After are seconds until the window ends.
 */
export function rateLimit(db: Database, opts: { max: number; windowSeconds: number }): RequestHandler {
  return async (req, res, next) => {
    const auth = locals(res).auth;
    if (!auth) return next();
    const windowMs = opts.windowSeconds * 1000;
    const now = Date.now();
    const windowStart = Math.floor(now / windowMs) * windowMs;
    const id = `${auth.key._id}:${windowStart}`;
    const expiresAt = new Date(windowStart + windowMs);
    const bump = () =>
      db.rateLimits.findOneAndUpdate({ _id: id }, { $inc: { count: 1 }, $setOnInsert: { expiresAt } }, { upsert: true, returnDocument: 'after' });
    let doc;
    try {
      doc = await bump();
    } catch (err) {
      // Two first requests of a window may race on the upsert; the loser retries once.
      if ((err as { code?: number }).code !== 11000) throw err;
      doc = await bump();
    }
    const count = doc?.count ?? 1;
    const reset = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
    res.setHeader('X-RateLimit-Limit', String(opts.max));
    res.setHeader('X-RateLimit-Remaining', String(Math.max(0, opts.max - count)));
    res.setHeader('X-RateLimit-Reset', String(reset));
    if (count > opts.max) {
      metrics.rateLimited.inc({ route: req.path.split('/').slice(0, 4).join('/') });
      return next(new AppError('rate_limited', `rate limit of ${opts.max} requests per ${opts.windowSeconds} s exceeded; retry after ${reset} s`, { headers: { 'Retry-After': String(reset) } }));
    }
    next();
  };
}
