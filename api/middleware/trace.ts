import type { RequestHandler, Response } from 'express';
import { ATTR, endSpan, incomingSpanOptions, runInSpan, startSpan, tracingOn } from '../../platform/infra/tracing';
import type { Span } from '@opentelemetry/api';
import { PROBES, routeTemplate } from './http-access';

/** The error that made a request's 5xx, for its span (set by the error funnel). */
const failures = new WeakMap<Response, unknown>();

/** Called by the error funnel for a 5xx: the request's span records the exception. */
export function recordRequestFailure(res: Response, err: unknown): void {
  if (tracingOn) failures.set(res, err);
}

/**
 * The HTTP server span, first middleware of the app so that everything the request does runs
 * inside it: one span per request, linked to the caller's span when it sends a W3C `traceparent`
 * (or continuing its trace, with TRACE_INCOMING=parent), named `METHOD /route/template` once the route is known (never the raw path,
 * which holds ids, nor the query string). A 5xx sets the span's status to ERROR and records the
 * exception (message and stack redacted like a log line). Mounted only while tracing is on.
 */
export const traceRequest: RequestHandler = (req, res, next) => {
  if (!tracingOn || PROBES.has(req.path)) return next();
  const span = startSpan(
    req.method,
    'server',
    { [ATTR.httpRequestMethod]: req.method, [ATTR.urlScheme]: 'http', 'network.protocol.version': req.httpVersion },
    incomingSpanOptions(req.headers as Record<string, unknown>),
  );
  const done = () => {
    res.off('finish', done);
    res.off('close', done);
    end(span!, req.method, routeTemplate(req), res);
  };
  res.once('finish', done);
  res.once('close', done);
  runInSpan(span, next);
};

function end(span: Span, method: string, route: string, res: Response) {
  if (route !== 'unmatched') {
    span.updateName(`${method} ${route}`);
    span.setAttribute(ATTR.httpRoute, route);
  }
  if (!res.writableFinished) {
    // The client hung up before the answer was sent (the access line's 499).
    endSpan(span, undefined, { errorType: 'aborted' });
    return;
  }
  span.setAttribute(ATTR.httpResponseStatusCode, res.statusCode);
  if (res.statusCode >= 500)
    endSpan(span, failures.get(res) ?? new Error(`HTTP ${res.statusCode}`), {
      record: failures.has(res),
      errorType: failures.has(res) ? undefined : String(res.statusCode),
    });
  else endSpan(span);
}
