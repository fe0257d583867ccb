import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { DriveDownloadLink } from '../../contracts/drive-downloads';
import { driveCallerOf } from '../../platform/drive/access';
import { createDriveRepository } from '../../platform/drive/drive.repository';
import { driveDownloadLink } from '../../platform/drive/links';
import { notFound } from '../../platform/errors';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

/**
 * GET /drive/files/{id}/content: 302 to the file's signed, time-limited stream (the same link as
 * DriveFileHandle.downloadUrl), Cache-Control: no-store. A trashed file, another account's, a
 * team the caller is not in or a file outside the key's pins is 404.
 */
export function driveContentRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const repo = createDriveRepository(rt.db);
  mount(
    r,
    endpoints.getDriveFileContent,
    async ({ auth, params, res }): Promise<DriveDownloadLink> => {
      const found = await repo.findFileForCaller(driveCallerOf(auth.key), params.id!);
      if (!found || found.file.trashedAt || found.file.purgingAt) throw notFound('file');
      const link = driveDownloadLink(rt.config, { fileId: found.file._id, keyId: auth.key._id });
      res.setHeader('Location', link.url);
      res.setHeader('Cache-Control', 'no-store');
      return { downloadUrl: link.url, downloadExpiresAt: link.expiresAt.toISOString() };
    },
    deps,
  );
  return r;
}
