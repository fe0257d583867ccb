import type { RequestHandler } from 'express';
import type { DatabaseHealth } from '../../platform/infra/db-health';
import { databaseUnavailable } from '../../platform/infra/errors';
import { locals } from '../http/context';

/**
 * While this process knows its database is away (platform/infra/db-health.ts), a request answers 503
 * `service_unavailable` with Retry-After at once instead of waiting for the driver to give up on
 * each of its database calls (5 s each). The process probes the database twice a second and lets
 * requests through again as soon as a read succeeds.
 *
 * On /api/v1 it is mounted after authentication (answered from the auth cache) and the audit
 * (which goes to the broker meanwhile), so the refusal is recorded, and it only marks the request
 * (`databaseDown`): the rate limit lets it by and the route answers the 503 itself (api/http/
 * route.ts), so the metrics and the access line name the route, not "unmatched".
 */
export function databaseGate(health: Pick<DatabaseHealth, 'up'>, opts: { inRoute?: boolean } = {}): RequestHandler {
  return (_req, res, next) => {
    if (health.up) return next();
    if (!opts.inRoute) return next(databaseUnavailable());
    locals(res).databaseDown = true;
    next();
  };
}
