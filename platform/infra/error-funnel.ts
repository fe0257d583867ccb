import { type ErrorSource, metrics } from '../../monitoring/metrics';
import { type AppError, toAppError } from './errors';
import type { Logger } from './log';

export interface FunnelOptions {
  /** Where the error was caught: the `source` label of app_errors_total. */
  source: ErrorSource;
  log: Logger;
  /** The line's message: "request failed", "task failed" … */
  msg: string;
  /** What the line is about (requestId, jobId, route, task, tool …); `code` and `err` are added. */
  fields?: Record<string, unknown>;
  /** Raised while serving a client's request (HTTP, MCP): a library's 4xx stays the client's (toAppError). */
  request?: boolean;
  /**
   * Which errors get the line: `server` (default), a 5xx not marked quiet (its cause is logged
   * once by the process: the database going away); `always`; `never` (counted only).
   */
  logWhen?: 'server' | 'always' | 'never';
  /** `error` (default), or `fatal` for the last line of a dying process. */
  level?: 'error' | 'fatal';
}

/**
 * The error funnel: converts `err` to an AppError (toAppError: anything unknown becomes
 * internal_error, the original kept as its cause), counts it in app_errors_total{code,source},
 * and logs it once, with its stack (the cause's when that is an Error; else the AppError's, its
 * cause beside it), per `logWhen`. Returns the
 * AppError for the answer. Used by the HTTP and MCP error handlers, request/reply pools, the
 * scheduler's tasks and the process's last-resort handlers.
 */
export function funnelError(err: unknown, o: FunnelOptions): AppError {
  const e = toAppError(err, { request: o.request });
  metrics.errors.inc({ code: e.code, source: o.source });
  const when = o.logWhen ?? 'server';
  if (when === 'always' || (when === 'server' && e.status >= 500 && !e.quiet)) {
    o.log[o.level ?? 'error'](o.msg, { ...o.fields, code: e.code, err: e.cause instanceof Error ? e.cause : e });
  }
  return e;
}
