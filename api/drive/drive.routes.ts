import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of Drive files, folders, bulk operations and team drives (SPEC 4.10). */
export function driveRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
