import express, { type RequestHandler } from 'express';
import { AppError } from '../../platform/errors';

/**
 * JSON bodies only, size-limited. A body with another content type answers 415; malformed JSON
 * 400 invalid_json; an oversized body 413 payload_too_large (mapped in the error handler).
 */
export function jsonBody(limitBytes: number): RequestHandler[] {
  const requireJson: RequestHandler = (req, _res, next) => {
    const hasBody = (req.get('content-length') ?? '0') !== '0' || req.get('transfer-encoding') !== undefined;
    if (hasBody && !req.is('application/json') && !req.is('application/*+json')) {
      return next(new AppError('unsupported_media_type', 'Content-Type must be application/json'));
    }
    next();
  };
  return [requireJson, express.json({ limit: limitBytes, strict: true })];
}
