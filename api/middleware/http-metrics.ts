import type { Request, RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';

/** The route template ("/api/v1/jobs/:id"), never the raw path, so label sets stay bounded. */
export const routeTemplate = (req: Request): string => {
  // Recorded by the route as it matched: by the time an error reaches the funnel, Express has
  // already left the router and reset req.baseUrl.
  const matched = req.res?.locals.route as string | undefined;
  if (matched) return matched;
  return req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
};

export const httpMetrics: RequestHandler = (req, res, next) => {
  const end = metrics.httpDuration.startTimer();
  res.once('finish', () => end({ method: req.method, route: routeTemplate(req), status: String(res.statusCode) }));
  next();
};
