import { Router } from 'express';
import { PATH_ID_RULE_TEXT, PathId } from '../../contracts/common';
import { AppError } from '../../platform/infra/errors';
import { openDriveBlob } from '../../platform/drive/blobs.repository';
import { contentDisposition, createDriveDownloads } from '../../platform/drive/downloads';
import { DRIVE_DOWNLOAD_PATH } from '../../platform/drive/links';
import type { Runtime } from '../../platform/runtime';
import { sendBytes } from '../http/byte-range';

/**
 * The signed Drive download stream (SPEC 2.19 downloadUrl, 5.5): GET (or HEAD)
 * /api/v1/drive/downloads/{fileId}?key=&exp=&sig=, public (no Authorization header), mounted
 * before authentication. Every request re-checks the signature, the expiry, the signing key (read
 * fresh: revoked is 410 link_revoked) and the file (trashed, purged, outside the key's pins or no
 * longer reachable is 404), then streams the bytes with Range support. See
 * contracts/drive-downloads.ts for the rules as documented.
 */
export function driveDownloadRoutes(rt: Runtime) {
  const r = Router();
  const downloads = createDriveDownloads({
    store: rt.store,
    log: rt.log.child({ component: 'drive-downloads' }),
    config: rt.config,
  });
  r.get(`${DRIVE_DOWNLOAD_PATH}/:fileId`, async (req, res) => {
    res.locals.route = `${req.baseUrl}${DRIVE_DOWNLOAD_PATH}/:fileId`;
    const fileId = req.params.fileId;
    if (!PathId.safeParse(fileId).success) throw new AppError('validation_error', `fileId: ${PATH_ID_RULE_TEXT}`);
    const query = (k: string) => (typeof req.query[k] === 'string' ? (req.query[k] as string) : undefined);
    const file = await downloads.resolve({ fileId, keyId: query('key'), exp: query('exp'), sig: query('sig') });
    sendBytes(req, res, {
      size: file.sizeBytes,
      contentType: file.mimeType,
      headers: {
        'Content-Disposition': contentDisposition(file.name),
        'X-Content-Type-Options': 'nosniff',
        // Whatever the bytes are (HTML included), never a page with this API's origin.
        'Content-Security-Policy': "sandbox; default-src 'none'",
        // Access is re-checked on every fetch: no cache may answer for it.
        'Cache-Control': 'no-store',
      },
      open: (range) => openDriveBlob(rt.store, file.blobId, range),
    });
    if (req.method === 'GET') void downloads.touch(file);
  });
  return r;
}
