import { Router } from 'express';
import { PATH_ID_RULE_TEXT, PathId } from '../../contracts/common';
import { AppError } from '../../platform/errors';
import type { BlobStore } from '../../platform/blobs';

/**
 * The byte range a Range header asks of a file of `size` bytes (RFC 9110 14.1.2): undefined when
 * the whole file is to be sent (no header, another unit, which must be ignored, or an empty
 * file); throws 416 range_not_satisfiable, with Content-Range: bytes *\/size, for a bytes range
 * that is malformed, multiple, or outside the file.
 */
export function byteRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  if (header === undefined || size === 0) return undefined;
  const unit = /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=/.exec(header)?.[1];
  if (unit !== undefined && unit.toLowerCase() !== 'bytes') return undefined;
  const unsatisfiable = () =>
    new AppError('range_not_satisfiable', `Range: must be one satisfiable bytes range of a ${size}-byte file, e.g. bytes=0-1023`, {
      headers: { 'Content-Range': `bytes */${size}` },
    });
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m || (!m[1] && !m[2])) throw unsatisfiable();
  let start: number;
  let end: number;
  if (!m[1]) {
    // Suffix range: the last N bytes.
    const n = Number(m[2]);
    if (n === 0) throw unsatisfiable();
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
  }
  if (!Number.isSafeInteger(start) || start >= size || start > end) throw unsatisfiable();
  return { start, end };
}

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
    // Before any header of the file is set, so a 416 goes out as a plain JSON error.
    const range = byteRange(req.get('range'), info.length);
    res.setHeader('Content-Type', info.contentType);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // Generated pages (code builds, possibly model-written) run in a sandbox: scripts yes, but as
    // an opaque origin with no access to this API's origin.
    res.setHeader('Content-Security-Policy', 'sandbox allow-scripts allow-forms allow-modals allow-popups');
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('Cache-Control', 'private, max-age=3600');
    if (range) {
      res.status(206);
      res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${info.length}`);
      res.setHeader('Content-Length', String(range.end - range.start + 1));
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
