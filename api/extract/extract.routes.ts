import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of POST /extract-flowchart (SPEC 4). */
export function extractRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
