import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError, boundedMessage, type ErrorCode } from '../../platform/infra/errors';
import { funnelError } from '../../platform/infra/error-funnel';
import type { Logger } from '../../platform/infra/log';
import { locals } from '../http/context';
import { routeTemplate } from './http-access';
import { recordRequestFailure } from './trace';

/** Retry-After of a 503 whose error names none (an engine or a pool that is away). */
export const DEFAULT_RETRY_AFTER_SECONDS = 5;

/** Unknown route: the Error shape with not_found. */
export const notFoundRoute: RequestHandler = (req, _res, next) => {
  next(new AppError('not_found', `no route for ${req.method} ${req.path}`));
};

/**
 * The error funnel for HTTP: every error answers the Error shape; unknown ones are logged.
 * Errors of other libraries that carry a 4xx status (body-parser, the router) keep it under a
 * stable code (platform/infra/errors.ts toAppError); messages never quote more than ECHO_MAX
 * characters of the request in one piece.
 */
export function errorHandler(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const { requestId } = locals(res);
    const appErr = funnelError(err, {
      source: 'http',
      log,
      msg: 'request failed',
      request: true,
      fields: { requestId, method: req.method, route: routeTemplate(req) },
    });
    if (appErr.status >= 500) recordRequestFailure(res, (appErr.cause as Error) ?? appErr);
    if (res.headersSent) return res.end();
    for (const [k, v] of Object.entries(appErr.headers)) res.setHeader(k, v);
    // Every 503 and 504 says when to come back; the database's says 1 s (platform/infra/errors.ts databaseUnavailable).
    if ((appErr.status === 503 || appErr.status === 504) && !res.hasHeader('retry-after'))
      res.setHeader('Retry-After', String(DEFAULT_RETRY_AFTER_SECONDS));
    // Every 401 names the scheme (RFC 6750 §3); a key that was sent but is not valid says so.
    if (appErr.status === 401) res.setHeader('WWW-Authenticate', wwwAuthenticate(req.get('authorization')));
    const details = appErr.details?.map((d) => ({
      path: boundedMessage(d.path),
      code: d.code,
      message: boundedMessage(d.message),
    }));
    res.status(appErr.status).json({
      error: {
        code: appErr.code,
        message: boundedMessage(appErr.message),
        requestId,
        ...(details ? { details } : {}),
      },
    });
  };
}

/**
 * The WWW-Authenticate challenge of a 401: `Bearer realm="api"`, plus `error="invalid_token"`
 * when a bearer key was sent (revoked, unknown, malformed); no error code when none was (RFC 6750 §3.1).
 */
export function wwwAuthenticate(authorization: string | undefined): string {
  return /^Bearer\s+\S/i.test(authorization ?? '') ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"';
}

/** What Node's HTTP parser refuses, by its error code. */
const CLIENT_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  HPE_HEADER_OVERFLOW: { code: 'headers_too_large', message: 'request headers are larger than 16 KiB' },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'request_timeout', message: 'the request was not received in time' },
  ERR_HTTP_HEADERS_TIMEOUT: { code: 'request_timeout', message: 'the request headers were not received in time' },
};

/**
 * The server's 'clientError' handler: a request Node's HTTP parser refuses (a raw non-ASCII byte
 * in the path, a malformed header, headers over 16 KiB) never reaches Express, so without this
 * it gets a bare 400/431 with no body and no X-Request-Id. There is no request or response
 * object here: the answer is written to the socket as it goes on the wire, then the connection
 * is destroyed, not half-closed (the parser cannot go on after such an error, and a peer that
 * never closes its side must not keep the socket).
 */
export function clientErrorHandler(log: Logger) {
  return (err: Error & { code?: string }, socket: Socket) => {
    // Nothing to answer: the peer left, or an answer to an earlier request is half-written.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const known = CLIENT_ERRORS[err.code ?? ''];
    const appErr = new AppError(
      known?.code ?? 'bad_request',
      known?.message ?? 'the request could not be parsed as HTTP/1.1',
    );
    const requestId = `req_${randomUUID().replaceAll('-', '')}`;
    // Counted only: the client's mistake, not ours.
    funnelError(appErr, { source: 'http', log, msg: 'client error', logWhen: 'never' });
    log.debug('client error', { requestId, code: err.code });
    const body = JSON.stringify({ error: { code: appErr.code, message: appErr.message, requestId } });
    // Half-closing is not enough: a client that keeps its side open (and trickles bytes) would hold
    // the socket forever. Read and drop what it still sends, so the close goes out as a FIN after
    // the answer rather than a reset that could discard it, and destroy once the answer is flushed.
    socket.on('data', () => {});
    socket.resume();
    socket.end(
      `HTTP/1.1 ${appErr.status} ${REASONS[appErr.status] ?? 'Bad Request'}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
      () => socket.destroy(),
    );
  };
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};
