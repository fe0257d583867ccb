import { Router } from 'express';
import type { Runtime } from '../../platform/runtime';

/**
 * The signed Drive download stream (SPEC 2.19 downloadUrl, 5.5): public (no Authorization
 * header), mounted before authentication; the signature and the signing key are re-checked on
 * every request.
 */
export function driveDownloadRoutes(_rt: Runtime) {
  const r = Router();
  return r;
}
