import type { IncomingMessage } from 'node:http';
import express, { type RequestHandler } from 'express';
import { AppError, clip } from '../../platform/errors';

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
      if (b === 0x5c) i++; // backslash: skip the escaped byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x7b || b === 0x5b) {
      if (++depth > max) throw new AppError('validation_error', `body: nested deeper than ${max} levels of objects and arrays`);
    } else if (b === 0x7d || b === 0x5d) depth--;
  }
}

/** A field name that must never reach the database: operators ($…), paths (a.b), NUL. */
const UNSAFE_KEY = /^\$|[.\u0000]/;

/**
 * Throws 400 naming the first field name, at any depth, that starts with `$` or holds `.` or NUL.
 * Iterative (an explicit stack), like the depth check; the depth is already bounded here.
 */
export function assertSafeKeys(body: unknown): void {
  const stack: { value: unknown; path: string }[] = [{ value: body, path: '' }];
  while (stack.length) {
    const { value, path } = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: `${path}${path ? '.' : ''}${i}` }));
      continue;
    }
    for (const [k, v] of Object.entries(value)) {
      if (UNSAFE_KEY.test(k)) {
        const where = path ? `${clip(path)}: ` : '';
        throw new AppError('validation_error', `${where}${JSON.stringify(clip(k))}: field names must not start with $ or contain . or NUL`);
      }
      stack.push({ value: v, path: `${path}${path ? '.' : ''}${clip(k)}` });
    }
  }
}

/**
 * JSON bodies only, size-limited, at most MAX_JSON_DEPTH levels deep, without field names that
 * could be read as database operators. A body with another content type answers 415, a charset
 * other than UTF-8 415 (RFC 8259 8.1); malformed JSON 400 invalid_json; an oversized body 413
 * payload_too_large; a Content-Encoding that does not match the bytes 400, an unknown one 415
 * (body-parser's errors are mapped in platform/errors.ts toAppError).
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
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
    if (req.body !== undefined) assertSafeKeys(req.body);
    next();
  };
  return [
    requireJson,
    express.json({ limit: limitBytes, strict: true, verify: (_req: IncomingMessage, _res, buf: Buffer) => assertJsonDepth(buf) }),
    safeKeys,
  ];
}
