import { Router } from 'express';
import type { AuthCache } from '../../platform/accounts';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import type { Runtime } from '../../platform/runtime';

/** What the developer console shares with the REST API of this process. */
export interface ConsoleParts {
  authCache: AuthCache;
  audit: AuditRecorder;
}

/** The developer console (server-rendered pages), mounted at /console. */
export function consoleRoutes(_rt: Runtime, _parts: ConsoleParts): Router {
  return Router();
}
