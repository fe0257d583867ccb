import type { Request, RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';
import type { Logger } from '../../platform/infra/log';
import { locals } from '../http/context';

/** The route template ("/api/v1/jobs/:id"), never the raw path, so label sets stay bounded. */
export const routeTemplate = (req: Request): string => {
  // Recorded by the route as it matched: by the time an error reaches the funnel, Express has
  // already left the router and reset req.baseUrl.
  const matched = req.res?.locals.route as string | undefined;
  if (matched) return matched;
  return req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
};

/** The operational endpoints, scraped every few seconds: logged at debug, not traced. */
export const PROBES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The request's duration histogram and its access line: one line per request, at info, with the
 * route template (never the raw path: it may hold ids and query strings), the status, the
 * duration and who called (account and key id, never the key). A client that hung up before
 * the answer was sent is logged with `aborted: true` and status 499 (nginx's convention).
 */
export const httpAccess =
  (log: Logger): RequestHandler =>
  (req, res, next) => {
    const end = metrics.httpDuration.startTimer();
    const done = () => {
      res.off('finish', done);
      res.off('close', done);
      const aborted = !res.writableFinished;
      const status = aborted ? 499 : res.statusCode;
      const route = routeTemplate(req);
      const seconds = end({ method: req.method, route, status: String(status) });
      const l = locals(res);
      (PROBES.has(route) ? log.debug : log.info)('request', {
        requestId: l.requestId,
        method: req.method,
        route,
        status,
        durationMs: Math.round(seconds * 1e4) / 10,
        ...(l.auth ? { accountId: l.auth.account._id, keyId: l.auth.key._id } : {}),
        ...(aborted ? { aborted: true } : {}),
      });
    };
    res.once('finish', done);
    res.once('close', done);
    next();
  };
