import type { ErrorRequestHandler, RequestHandler } from 'express';
import { metrics } from '../../monitoring/metrics';
import { AppError, toAppError } from '../../platform/errors';
import type { Logger } from '../../platform/log';
import { locals } from '../http/context';
import { routeTemplate } from './http-metrics';

/** Unknown route: the Error shape with not_found. */
export const notFoundRoute: RequestHandler = (req, _res, next) => {
  next(new AppError('not_found', `no route for ${req.method} ${req.path}`));
};

/** Map body-parser failures (they carry `type` and `status`) to stable codes. */
function fromBodyParser(err: unknown): AppError | null {
  const e = err as { type?: string; status?: number; message?: string };
  switch (e?.type) {
    case 'entity.parse.failed':
      return new AppError('invalid_json', 'body: malformed JSON', { cause: err });
    case 'entity.too.large':
      return new AppError('payload_too_large', 'body: larger than the accepted limit', { cause: err });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('unsupported_media_type', 'body: unsupported encoding or charset', { cause: err });
    case 'request.aborted':
      return new AppError('validation_error', 'body: request aborted', { cause: err });
    default:
      return null;
  }
}

/** The error funnel for HTTP: every error answers the Error shape; unknown ones are logged. */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const appErr = fromBodyParser(err) ?? toAppError(err);
    const { requestId } = locals(res);
    metrics.errors.inc({ code: appErr.code, source: 'http' });
    if (appErr.status >= 500) {
      log.error('request failed', { requestId, method: req.method, route: routeTemplate(req), code: appErr.code, err: (appErr.cause as Error) ?? appErr });
    }
    if (res.headersSent) return res.end();
    for (const [k, v] of Object.entries(appErr.headers)) res.setHeader(k, v);
    res.status(appErr.status).json({ error: { code: appErr.code, message: appErr.message, requestId } });
  };
}
