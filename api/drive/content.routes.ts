import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of GET /drive/files/{id}/content (302 to a signed link). */
export function driveContentRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
