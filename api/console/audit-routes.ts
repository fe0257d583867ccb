import { endpoints } from '../../contracts/endpoints';
import { expressPath } from '../http/route';

/**
 * Route templates as the audit log records them (api/middleware/audit.ts: the versioned base plus
 * the Express path), for the route filter's suggestions. The base is spelled here because
 * importing it from api/app.ts would make an import cycle.
 */
export const AUDIT_ROUTES: readonly string[] = [
  ...new Set(Object.values(endpoints).map((ep) => `/api/v1${expressPath(ep.path)}`)),
].sort();
