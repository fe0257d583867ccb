import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { AppError } from '../../platform/infra/errors';

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
    new AppError(
      'range_not_satisfiable',
      `Range: must be one satisfiable bytes range of a ${size}-byte file, e.g. bytes=0-1023`,
      {
        headers: { 'Content-Range': `bytes */${size}` },
      },
    );
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
 * Answer a GET (or HEAD) for stored bytes with HTTP Range support: 200 with the whole file, 206
 * with Content-Range for one satisfiable range, 416 (thrown before any header is set, so it goes
 * out as a plain JSON error) for a bad one. Sets Content-Type, Content-Length, Accept-Ranges and
 * the caller's extra headers, then streams `open(range)`; a read error mid-stream cuts the
 * connection (the status is already sent), and a client that disconnects destroys the source.
 * Returns the range served (undefined: all of it).
 */
export function sendBytes(
  req: Request,
  res: Response,
  file: {
    size: number;
    contentType: string;
    headers?: Record<string, string>;
    open(range?: { start: number; end: number }): Readable;
  },
): { start: number; end: number } | undefined {
  const range = byteRange(req.get('range'), file.size);
  res.setHeader('Content-Type', file.contentType);
  for (const [k, v] of Object.entries(file.headers ?? {})) res.setHeader(k, v);
  res.setHeader('Accept-Ranges', 'bytes');
  if (range) {
    res.status(206);
    res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${file.size}`);
    res.setHeader('Content-Length', String(range.end - range.start + 1));
  } else {
    res.setHeader('Content-Length', String(file.size));
  }
  if (req.method === 'HEAD' || file.size === 0) {
    res.end();
    return range;
  }
  // pipeline, not pipe: a client that goes away (players abort ranges all the time) destroys the
  // source too, so the GridFS cursor is closed; a read error mid-stream cuts the connection.
  pipeline(file.open(range), res).catch(() => {
    /* client gone, or the read failed: both ends are destroyed already; nothing left to answer */
  });
  return range;
}
