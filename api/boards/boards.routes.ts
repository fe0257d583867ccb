import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of boards and cards (SPEC 4). */
export function boardsRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
