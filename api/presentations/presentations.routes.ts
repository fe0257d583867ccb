import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

export function presentationsRoutes(_rt: Runtime, _deps: RouteDeps) {
  return Router();
}
