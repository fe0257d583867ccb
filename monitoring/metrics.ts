import client from 'prom-client';

/**
 * The process's metrics. One registry per process (prom-client's default), created once on
 * import; every process (API, workers, scheduler) serves it at /metrics.
 */
export const registry = client.register;
client.collectDefaultMetrics({ register: registry });

const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
  new client.Counter<L>({ name, help, labelNames, registers: [registry] });

/**
 * Where an error reached the funnel (the `source` of app_errors_total): an HTTP request, an MCP
 * request or tool call, a consumer (request/reply pool), a scheduler task, the process itself
 * (an uncaught exception or unhandled rejection).
 */
export const ERROR_SOURCES = ['http', 'mcp', 'consumer', 'scheduler', 'process'] as const;
export type ErrorSource = (typeof ERROR_SOURCES)[number];

export const metrics = {
  httpDuration: new client.Histogram<'method' | 'route' | 'status'>({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by method, route template and status.',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  }),
  jobsDispatched: counter('jobs_dispatched_total', 'Jobs accepted and published to their pool, by type.', ['type']),
  jobsRepublished: counter(
    'jobs_republished_total',
    'Jobs published again by the sweep (undispatched or stalled), by type and reason.',
    ['type', 'reason'],
  ),
  jobsCompleted: counter('jobs_completed_total', 'Jobs that reached complete, by type.', ['type']),
  jobsFailed: counter(
    'jobs_failed_total',
    'Jobs that reached failed, by type and reason (error, attempts_exhausted, dead_letter).',
    ['type', 'reason'],
  ),
  jobsRetried: counter('jobs_retried_total', 'Transient job errors scheduled for another attempt, by type.', ['type']),
  jobDuration: new client.Histogram<'type' | 'status'>({
    name: 'job_duration_seconds',
    help: 'Time from a job starting to it finishing, by type and final status.',
    labelNames: ['type', 'status'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
    registers: [registry],
  }),
  jobQueueWait: new client.Histogram<'type'>({
    name: 'job_queue_wait_seconds',
    help: 'Time from dispatch (or creation, when the dispatch mark is not written yet) to a worker first starting the job, by type.',
    labelNames: ['type'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry],
  }),
  jobsInFlight: new client.Gauge<'pool'>({
    name: 'pool_jobs_in_flight',
    help: 'Jobs this process is working on, by pool.',
    labelNames: ['pool'],
    registers: [registry],
  }),
  queueDepth: new client.Gauge<'queue'>({
    name: 'queue_depth',
    help: 'Messages ready in a RabbitMQ queue (read at scrape time).',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      for (const source of queueDepthSources) {
        for (const q of source.queues) {
          const n = await source.depth(q);
          if (n !== null) this.set({ queue: q }, n);
        }
      }
    },
  }),
  deadLettered: counter(
    'messages_dead_lettered_total',
    'Messages sent to the dead-letter queue, by queue and reason.',
    ['queue', 'reason'],
  ),
  creditsCharged: counter('credits_charged_total', 'Credits debited, by operation.', ['operation']),
  creditsRefunded: counter('credits_refunded_total', 'Credits refunded, by operation.', ['operation']),
  creditLeases: counter(
    'credit_leases_total',
    'Credit leases of API processes, by outcome: taken, refused (balance under the lease threshold), returned (settled by the holder with its count), settled_by_count (settled from the jobs that name it).',
    ['outcome'],
  ),
  jobCacheLookups: counter(
    'job_cache_lookups_total',
    'GET /jobs/{id} lookups in the API process job cache, by outcome (hit: an in-flight job, no database read; finished_hit: a finished job, no database read; miss: read from the database).',
    ['outcome'],
  ),
  jobCacheFinishedEvictions: counter(
    'job_cache_finished_evictions_total',
    'Finished jobs dropped from the job cache to stay within JOB_CACHE_FINISHED_BYTES (least recently used first).',
    [],
  ),
  jobCacheFinishedBytes: new client.Gauge({
    name: 'job_cache_finished_bytes',
    help: 'Bytes of finished jobs held by this API process job cache (JSON length plus a fixed overhead per entry), bounded by JOB_CACHE_FINISHED_BYTES.',
    registers: [registry],
  }),
  jobWatchers: new client.Gauge({
    name: 'job_watchers',
    help: 'Clients this API process holds waiting for job changes, by kind (stream: GET /jobs/{id}/events; wait: GET /jobs/{id} with Prefer: wait).',
    labelNames: ['kind'],
    registers: [registry],
  }),
  jobEventsSent: counter(
    'job_events_sent_total',
    'Events written on GET /jobs/{id}/events streams, by event (progress, complete, failed).',
    ['event'],
  ),
  jobWaits: counter(
    'job_waits_total',
    'GET /jobs/{id} requests with Prefer: wait, by outcome (changed: answered on a change; timeout: the wait ran out; immediate: nothing to wait for).',
    ['outcome'],
  ),
  jobChangesAnnounced: counter(
    'job_changes_announced_total',
    'Job state changes announced on the job-changes fanout, by outcome (sent; failed: broker away, the caches fall back on their expiry).',
    ['outcome'],
  ),
  insufficientCredits: counter('credit_debits_refused_total', 'Debits refused for a short balance, by operation.', [
    'operation',
  ]),
  rateLimited: counter('rate_limited_requests_total', 'Requests refused with 429, by route.', ['route']),
  errors: counter(
    'app_errors_total',
    `Errors through the error funnel (platform/infra/error-funnel.ts), by code and source (${ERROR_SOURCES.join(', ')}).`,
    ['code', 'source'],
  ),
  schedulerRuns: counter('scheduler_runs_total', 'Scheduler task runs, by task and outcome.', ['task', 'outcome']),
  rpcCalls: counter(
    'rpc_calls_total',
    'Synchronous request/reply calls to a pool (/images, /images/moonlight), by pool, operation and outcome (ok, refused, timeout, unavailable).',
    ['pool', 'operation', 'outcome'],
  ),
  rpcDuration: new client.Histogram<'pool' | 'operation'>({
    name: 'rpc_duration_seconds',
    help: 'Time from the API sending a request/reply call to a pool to its answer, by pool and operation.',
    labelNames: ['pool', 'operation'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  }),
  webhookAttempts: counter(
    'webhook_delivery_attempts_total',
    'Webhook delivery attempts, by outcome (delivered, http_error, timeout, network_error, blocked).',
    ['outcome'],
  ),
  webhookAttemptDuration: new client.Histogram<'outcome'>({
    name: 'webhook_delivery_attempt_duration_seconds',
    help: 'Duration of one webhook delivery attempt, by outcome.',
    labelNames: ['outcome'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  }),
  webhookDeliveries: counter(
    'webhook_deliveries_total',
    'Webhook deliveries finished, by result (delivered, failed after retries, skipped: webhook gone or inactive, deferred: endpoint busy).',
    ['result'],
  ),
  dbCommandDuration: new client.Histogram<'command' | 'collection' | 'outcome'>({
    name: 'db_command_duration_seconds',
    help: 'MongoDB command latency seen by this process (driver command monitoring), by command name, collection (known collections, else "other") and outcome (ok, error).',
    labelNames: ['command', 'collection', 'outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  }),
  publishConfirmDuration: new client.Histogram<'exchange' | 'outcome'>({
    name: 'amqp_publish_confirm_duration_seconds',
    help: 'Time from a publish call to the broker confirm (a wait for a connection and the sends again after a failover included), by exchange kind (pool, events, webhooks, audit, auth, job_changes, other) and outcome (confirmed, failed).',
    labelNames: ['exchange', 'outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3],
    registers: [registry],
  }),
  amqpReconnects: counter(
    'amqp_reconnects_total',
    'RabbitMQ connections re-established after a loss, by outcome (failover: to another node of AMQP_URL; same_node: to the one that was lost; failed: a round in which no node of AMQP_URL answered).',
    ['outcome'],
  ),
  amqpConnectedNode: new client.Gauge<'node' | 'index'>({
    name: 'amqp_connected_node',
    help: 'The RabbitMQ node this process is connected to: 1 for it, 0 for the other nodes of AMQP_URL (node is host:port, index its place in the list from 0). Summed over processes: how many are connected to each node.',
    labelNames: ['node', 'index'],
    registers: [registry],
  }),
  amqpPublishesResent: counter(
    'amqp_publishes_resent_total',
    'Publishes sent again within their PUBLISH_TIMEOUT_MS because the connection died before the broker confirmed them (connection_lost) or the broker refused them (nacked), by exchange kind.',
    ['exchange', 'reason'],
  ),
  amqpConsumerRestarts: counter(
    'amqp_consumer_restarts_total',
    'Consumers the broker stopped while the connection stayed up, each subscribed again on a new channel (queue and exchanges declared again first), by queue and reason: cancelled (the broker cancelled the consumer: its queue was deleted, or its quorum leader moved), precondition_failed (406: an ack of an unknown delivery tag, a double ack), not_found (404), channel_error (another channel error).',
    ['queue', 'reason'],
  ),
  webhooksDisabled: counter(
    'webhooks_disabled_total',
    'Webhooks disabled automatically after consecutive failed deliveries.',
    [],
  ),
  auditEntriesWritten: counter(
    'audit_entries_written_total',
    'Audit entries written to audit_log, by the API before its answer or by the audit queue writer (duplicates not counted).',
    [],
  ),
  auditDirectWrites: counter(
    'audit_direct_writes_total',
    'Audit entries an API process inserted into audit_log itself before answering (the normal path).',
    [],
  ),
  auditQueuedEntries: counter(
    'audit_queued_entries_total',
    'Audit entries published to the audit queue because the direct insert failed or timed out (database away); the audit writer stores them.',
    [],
  ),
  ready: new client.Gauge({
    name: 'process_ready',
    help: '1 when every readiness probe of this process (MongoDB, RabbitMQ) passes at scrape time, else 0: the /readyz check, for alerting.',
    registers: [registry],
    async collect() {
      if (readinessChecks.size === 0) return;
      const results = await Promise.all([...readinessChecks].map((check) => check()));
      this.set(results.every(Boolean) ? 1 : 0);
    },
  }),
};

interface QueueDepthSource {
  queues: readonly string[];
  depth(queue: string): Promise<number | null>;
}
const queueDepthSources = new Set<QueueDepthSource>();

/** Report the depth of `queues` at scrape time; returns an unregister function. */
export function reportQueueDepth(source: QueueDepthSource): () => void {
  queueDepthSources.add(source);
  return () => queueDepthSources.delete(source);
}

const readinessChecks = new Set<() => Promise<boolean>>();

/** Report this process's readiness as `process_ready` at scrape time; returns an unregister function. */
export function reportReadiness(check: () => Promise<boolean>): () => void {
  readinessChecks.add(check);
  return () => readinessChecks.delete(check);
}
