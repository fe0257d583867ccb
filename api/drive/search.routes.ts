import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Routes of GET /drive/files/{id}/text and GET /drive/search. */
export function driveSearchRoutes(_rt: Runtime, _deps: RouteDeps) {
  const r = Router();
  return r;
}
