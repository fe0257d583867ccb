import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';
import type { RouteDeps } from '../http/route';

/** POST /chat (SPEC 4.6, 2.7): one assistant turn, streamed (AI SDK v5 UI-message SSE) or assembled. */
export function chatRoutes(_rt: Runtime, _deps: RouteDeps): Router {
  const r = Router();
  return r;
}
