import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { driveCallerOf } from '../../platform/drive/access';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createDriveSearchService } from '../../platform/drive/search.service';

/** Seconds a client should wait before asking again for a text still being extracted. */
const PENDING_RETRY_AFTER_S = 2;

/** Routes of GET /drive/files/{id}/text and GET /drive/search. */
export function driveSearchRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const search = createDriveSearchService(rt);
  mount(
    r,
    endpoints.getDriveFileText,
    async ({ auth, params, res }) => {
      const { body, pending } = await search.text(driveCallerOf(auth.key), params.id!);
      if (pending) res.setHeader('Retry-After', String(PENDING_RETRY_AFTER_S));
      return body;
    },
    deps,
  );
  mount(r, endpoints.searchDrive, ({ auth, query }) => search.search(driveCallerOf(auth.key), query), deps);
  return r;
}
