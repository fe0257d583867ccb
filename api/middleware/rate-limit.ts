import type { RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';
import { AppError } from '../../platform/infra/errors';
import type { RateLimiter } from '../../platform/rate-limits/rate-limits.repository';
import { locals } from '../http/context';

/**
 * The per-key rate limit on every authenticated request (the counting, shared by every API
 * process, is platform/rate-limits/): the X-RateLimit-* and IETF draft RateLimit headers on
 * every answer, and 429 `rate_limited` with Retry-After past the limit.
 */
export function rateLimit(limiter: RateLimiter): RequestHandler {
  const { max, windowSeconds } = limiter;
  return async (req, res, next) => {
    const auth = locals(res).auth;
    // No auth, or the database is away and the route answers 503 without any work.
    if (!auth || locals(res).databaseDown) return next();
    const { remaining, reset } = await limiter.take(auth.key._id);
    const passed = remaining >= 0;
    res.setHeader('X-RateLimit-Limit', String(max));
    res.setHeader('X-RateLimit-Remaining', String(passed ? remaining : 0));
    res.setHeader('X-RateLimit-Reset', String(reset));
    // The same, as draft-ietf-httpapi-ratelimit-headers: quota and window, remaining and reset.
    res.setHeader('RateLimit-Policy', `"default";q=${max};w=${windowSeconds}`);
    res.setHeader('RateLimit', `"default";r=${passed ? remaining : 0};t=${reset}`);
    if (!passed) {
      // First segment only (bounded labels, no ids); a router mounted outside /api/v1 (/mcp) names itself.
      const segment = req.path.split('/')[1] ?? '';
      metrics.rateLimited.inc({ route: segment ? `/${segment}` : req.baseUrl || '/' });
      return next(
        new AppError(
          'rate_limited',
          `rate limit of ${max} requests per ${windowSeconds} s exceeded; retry after ${reset} s`,
          { headers: { 'Retry-After': String(reset) } },
        ),
      );
    }
    next();
  };
}
