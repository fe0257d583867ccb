import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/**
 * The IPC protocol between the supervisor (scripts/supervisor.ts) and the API processes it runs.
 *
 * The supervisor owns the listening socket: it accepts each connection (paused, unread) and
 * hands it to a ready API process, or holds it while none is ready (a crashed process being
 * replaced), so clients never see a refused connection. An API process started this way does
 * not listen itself: it serves the sockets it is handed, says when it is ready, and answers
 * GET /metrics with every API process's metrics, gathered by the supervisor.
 */

/** Set by the supervisor in an API process's environment. WARNING: read by every API version. */
export const HANDOFF_ENV = 'SVC_SUPERVISOR_HANDOFF';

export type Metrics = MetricObjectWithValues<MetricValue<string>>[];

/** Supervisor → API process. */
export type ToApi =
  /** A connection (the socket travels as the message's handle): answer `took` before reading from it. */
  | { t: 'conn'; seq: number }
  /** Send your metrics (prom-client JSON) for request `id`. */
  | { t: 'collect'; id: number }
  /** The metrics of every API process (Prometheus text), answering `metrics?` `id`. */
  | { t: 'metrics'; id: number; text: string; contentType: string };

/** API process → supervisor. */
export type FromApi =
  /** Ready to serve: hand me connections. */
  | { t: 'ready' }
  /** I have connection `seq`: close your copy. */
  | { t: 'took'; seq: number }
  /** Stopping: hand me no more connections. */
  | { t: 'draining' }
  /** Gather every API process's metrics for my GET /metrics. */
  | { t: 'metrics?'; id: number }
  /** My metrics, answering `collect` `id`. */
  | { t: 'collected'; id: number; metrics: Metrics };

export const isMessage = <T extends { t: string }>(m: unknown): m is T =>
  typeof m === 'object' && m !== null && typeof (m as { t?: unknown }).t === 'string';
