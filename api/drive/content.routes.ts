import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { DriveDownloadLink } from '../../contracts/drive-downloads';
import { driveCallerOf } from '../../platform/drive/access';
import { notFound } from '../../platform/infra/errors';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createDriveService } from '../../platform/drive/drive.service';

/**
 * GET /drive/files/{id}/content: 302 to the file's signed, time-limited stream (the same link as
 * DriveFileHandle.downloadUrl), Cache-Control: no-store. A trashed file, another account's, a
 * team the caller is not in or a file outside the key's pins is 404.
 */
export function driveContentRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createDriveService(rt);
  mount(
    r,
    endpoints.getDriveFileContent,
    async ({ auth, params, res }): Promise<DriveDownloadLink> => {
      const { link } = await service.link(driveCallerOf(auth.key), params.id!);
      if (!link) throw notFound('file');
      res.setHeader('Location', link.url);
      res.setHeader('Cache-Control', 'no-store');
      return { downloadUrl: link.url, downloadExpiresAt: link.expiresAt.toISOString() };
    },
    deps,
  );
  return r;
}
