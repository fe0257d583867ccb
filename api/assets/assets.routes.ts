import { Router } from 'express';
import { PATH_ID_RULE_TEXT, PathId } from '../../contracts/common';
import { AppError } from '../../platform/infra/errors';
import type { BlobStore } from '../../platform/infra/media-blobs';
import { sendBytes } from '../http/byte-range';

/**
 * Public, signed links to generated media: GET /api/v1/assets/{id}/{filename}?exp&sig.
 * No key (the signature is the credential), the stored content type, and HTTP Range support so
 * players can seek audio and video. A malformed id is 400 validation_error (like every path id);
 * a bad signature or an unknown id 404; an expired link 403; a bad Range 416 in the Error shape.
 */
export function assetsRoutes(blobs: BlobStore) {
  const r = Router();
  r.get('/assets/:id/:filename', async (req, res) => {
    const id = req.params.id;
    if (!PathId.safeParse(id).success) throw new AppError('validation_error', `id: ${PATH_ID_RULE_TEXT}`);
    const query = (k: string) => (typeof req.query[k] === 'string' ? (req.query[k] as string) : undefined);
    const check = blobs.verify(id, query('exp'), query('sig'));
    if (check === 'bad') throw new AppError('not_found', 'asset not found');
    if (check === 'expired') throw new AppError('forbidden', 'asset link expired');
    const info = await blobs.info(id);
    if (!info) throw new AppError('not_found', 'asset not found');
    // The 416 of a bad Range is thrown before any header of the file is set (a plain JSON error).
    sendBytes(req, res, {
      size: info.length,
      contentType: info.contentType,
      headers: {
        'X-Content-Type-Options': 'nosniff',
        // Generated pages (code builds, possibly model-written) run in a sandbox: scripts yes, but as
        // an opaque origin with no access to this API's origin.
        'Content-Security-Policy': 'sandbox allow-scripts allow-forms allow-modals allow-popups',
        'Cache-Control': 'private, max-age=3600',
      },
      open: (range) => blobs.open(id, range),
    });
  });
  return r;
}
