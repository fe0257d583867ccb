import { Router } from 'express';
import { AppError } from '../../platform/errors';
import type { BlobStore } from '../../platform/blobs';

/**
 * Public, signed links to generated media: GET /api/v1/assets/{id}/{filename}?exp&sig.
 * No key (the signature is the credential), the stored content type, and HTTP Range support so
 * players can seek audio and video.
 */
export function assetsRoutes(blobs: BlobStore) {
  const r = Router();
  r.get('/assets/:id/:filename', async (req, res) => {
    const id = req.params.id;
    const check = blobs.verify(id, req.query.exp as string | undefined, req.query.sig as string | undefined);
    if (check === 'bad') throw new AppError('not_found', 'asset not found');
    if (check === 'expired') throw new AppError('forbidden', 'asset link expired');
    const info = await blobs.info(id);
    if (!info) throw new AppError('not_found', 'asset not found');
    res.setHeader('Content-Type', info.contentType);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // Generated pages (code builds, possibly model-written) run in a sandbox: scripts yes, but as
    // an opaque origin with no access to this API's origin.
    res.setHeader('Content-Security-Policy', 'sandbox allow-scripts allow-forms allow-modals allow-popups');
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('Cache-Control', 'private, max-age=3600');
    let range: { start: number; end: number } | undefined;
    const header = req.get('range');
    if (header && info.length > 0) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
      let start = m?.[1] ? Number(m[1]) : NaN;
      let end = m?.[2] ? Number(m[2]) : info.length - 1;
      if (m && !m[1] && m[2]) {
        start = Math.max(0, info.length - Number(m[2]));
        end = info.length - 1;
      }
      if (!m || Number.isNaN(start) || start > end || start >= info.length) {
        res.setHeader('Content-Range', `bytes */${info.length}`);
        return res.status(416).end();
      }
      end = Math.min(end, info.length - 1);
      range = { start, end };
      res.status(206);
      res.setHeader('Content-Range', `bytes ${start}-${end}/${info.length}`);
      res.setHeader('Content-Length', String(end - start + 1));
    } else {
      res.setHeader('Content-Length', String(info.length));
    }
    if (req.method === 'HEAD') return res.end();
    const stream = blobs.open(id, range);
    stream.on('error', (err) => res.destroy(err));
    stream.pipe(res);
  });
  return r;
}
