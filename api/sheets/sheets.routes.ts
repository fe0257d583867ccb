import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of sheets (SPEC 4). */
export function sheetsRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
