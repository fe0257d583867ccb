import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of projects (flowcharts, whiteboards, notes, templates, shares) (SPEC 4). */
export function projectsRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
