import type { IncomingMessage } from 'node:http';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { bindContext } from '../../platform/infra/context';
import { AppError } from '../../platform/infra/errors';
import { assertSafeKeys } from '../../platform/infra/safe-keys';

/** Deepest nesting of objects and arrays a JSON body may have (the body object itself is level 1). */
export const MAX_JSON_DEPTH = 32;

/**
 * Throws 400 when `json` (UTF-8 bytes) nests objects and arrays deeper than `max`.
 *
 * Hand-written, and without recursion: body-parser has no depth option, the maintained JSON
 * libraries we looked at guard against prototype poisoning, not depth, and a streaming tokenizer
 * would be a dependency for these lines. It runs before JSON.parse, so a 16 MiB body of `[` is
 * refused after one pass over its bytes instead of being built into millions of nested arrays
 * (and then overflowing the stack of whatever walks them: zod, the idempotency hash, BSON).
 * Byte-wise is exact for UTF-8, where every byte of a multi-byte character is >= 0x80; strings
 * are skipped, escapes included. Malformed JSON is left to JSON.parse.
 */
export function assertJsonDepth(json: Uint8Array, max = MAX_JSON_DEPTH): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const b = json[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x7b || b === 0x5b) {
      if (++depth > max)
        throw new AppError('validation_error', `body: nested deeper than ${max} levels of objects and arrays`);
    } else if (b === 0x7d || b === 0x5d) depth--;
  }
}

/** A body limit for one route, lower than the global one (the smaller of the two applies). */
export interface RouteBodyLimit {
  method: string;
  /** The request path under the mount point, e.g. `/drive/files`. */
  path: string;
  limitBytes: number;
}

/**
 * JSON bodies only, size-limited, at most MAX_JSON_DEPTH levels deep, without field names that
 * could be read as database operators. A body with another content type answers 415, a charset
 * other than UTF-8 415 (RFC 8259 8.1); malformed JSON 400 invalid_json; an oversized body 413
 * payload_too_large; a Content-Encoding that does not match the bytes 400, an unknown one 415
 * (body-parser's errors are mapped in platform/infra/errors.ts toAppError).
 */
export function jsonBody(limitBytes: number, routeLimits: readonly RouteBodyLimit[] = []): RequestHandler[] {
  const requireJson: RequestHandler = (req, _res, next) => {
    const hasBody = (req.get('content-length') ?? '0') !== '0' || req.get('transfer-encoding') !== undefined;
    if (!hasBody) return next();
    if (!req.is('application/json') && !req.is('application/*+json')) {
      return next(new AppError('unsupported_media_type', 'Content-Type must be application/json'));
    }
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.get('content-type') ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return next(new AppError('unsupported_media_type', 'Content-Type: unsupported charset; JSON is UTF-8'));
    }
    next();
  };
  const safeKeys: RequestHandler = (req, _res, next) => {
    // body-parser reads an empty JSON body as {}; it is no JSON object, so a route with a body
    // schema answers 400 "body: must be a JSON object" (as for a request without a body).
    if ((req as { emptyJsonBody?: boolean }).emptyJsonBody) req.body = undefined;
    if (req.body !== undefined) assertSafeKeys(req.body);
    next();
  };
  const verify = (req: IncomingMessage, _res: unknown, buf: Buffer) => {
    if (buf.length === 0) (req as { emptyJsonBody?: boolean }).emptyJsonBody = true;
    assertJsonDepth(buf);
  };
  const parse = express.json({ limit: limitBytes, strict: true, verify });
  // Routes with a body limit of their own (POST /drive/files: a 4 MB file in base64, not 16 MiB):
  // an oversized body is refused from its Content-Length before a byte is read, or while reading.
  // A route limit only lowers the global one.
  const routeParsers = routeLimits.map((l) => ({
    ...l,
    method: l.method.toUpperCase(),
    parse: express.json({ limit: Math.min(limitBytes, l.limitBytes), strict: true, verify }),
  }));
  const parseJson: RequestHandler = (req, res, next) => {
    const own = routeParsers.find((l) => l.method === req.method && (req.path === l.path || req.path === `${l.path}/`));
    // body-parser calls next from the socket's 'end' event: keep the request's context (its id, its trace).
    return (own?.parse ?? parse)(req, res, bindContext(next));
  };
  return [requireJson, parseJson, safeKeys];
}

/**
 * The JSON body parser of jsonBody as one call, for the route to run when it needs the body: after
 * authentication, the rate limit and the scope check (SPEC §5.4, §7), so a request without a valid
 * key answers 401 and one without the route's scope 403 whatever its body is, and a 400
 * invalid_json to a valid key carries the rate-limit headers. A body left unread is drained by
 * Node when the answer ends. Runs at most once per request.
 */
export function lazyJsonBody(
  limitBytes: number,
  routeLimits: readonly RouteBodyLimit[] = [],
): (req: Request, res: Response) => Promise<void> {
  const chain = jsonBody(limitBytes, routeLimits);
  return (req, res) => {
    const state = req as { jsonBodyRead?: Promise<void> };
    state.jsonBodyRead ??= new Promise<void>((resolve, reject) => {
      let i = 0;
      const next = (err?: unknown) => {
        if (err) return reject(err);
        const handler = chain[i++];
        if (!handler) return resolve();
        try {
          handler(req, res, next);
        } catch (e) {
          reject(e);
        }
      };
      next();
    });
    return state.jsonBodyRead;
  };
}
