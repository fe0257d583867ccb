import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** Agents (SPEC 4.9, 2.18, 3.4): runs, messages, approvals, usage, and POST /chat/completions. */
export function agentsRoutes(_rt: Runtime, _deps: RouteDeps): Router {
  const r = Router();
  return r;
}
