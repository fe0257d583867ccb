import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { AmqpClient } from '../infra/amqp';
import type { Logger } from '../infra/log';
import type { DatabaseHealth } from '../infra/db-health';
import { onlyDuplicateKeys, type AuditDoc, type Store } from '../infra/mongo';
import { batchSpan, currentSpanContext } from '../infra/tracing';
import { insertAuditEntries } from './audit.repository';
import type { SpanContext } from '@opentelemetry/api';

export interface AuditRecorderDeps {
  store: Store;
  /** Whether the database answers (Runtime dbHealth). */
  health: DatabaseHealth;
  amqp: AmqpClient;
  log: Logger;
  /** QUEUE_PREFIX of the deployment. */
  prefix: string;
  /** How long the direct insert may take before the entries go to the audit queue instead. Default 2000 ms. */
  insertTimeoutMs?: number;
  /** Under load, how long a batch waits for more entries before it is written. Default 2 ms. */
  lingerMs?: number;
}

/**
 * Records audit entries durably before the caller answers: inserted straight into `audit_log`
 * by this process, with group commit (while one insertMany runs, the entries that arrive wait
 * and then go together in the next one; under load (a batch started within the last 10 ms) a
 * batch also waits `lingerMs` for more, so one command carries many entries, while an idle
 * process still writes each entry at once). No broker hop, no second parse: an entry costs the
 * database a share of one batched insert. (A command costs FerretDB about 0.45 ms of CPU plus
 * 0.05 ms per entry, and the API a socket write: batches of one or two entries, which is what
 * group commit alone gives at 10 concurrent requests, cost several times batches of ten.)
 *
 * When the insert fails or does not answer within `insertTimeoutMs`, or the database is known to
 * be away (`health`, platform/infra/db-health.ts: then no insert is tried), the entries are published
 * to the audit queue instead (persistent, confirmed by the broker) and the audit queue's writer
 * (audit.writer.ts) stores them once the database answers; copies of entries the failed insert
 * did store are duplicate `_id`s and are dropped there. `record` resolves once the entry is safe
 * (or, if the broker failed too, logged as lost); it never rejects, so an audit failure never
 * changes an answer.
 */
export function createAuditRecorder({
  store: dbStore,
  health,
  amqp,
  log,
  prefix,
  insertTimeoutMs = 2000,
  lingerMs = 2,
}: AuditRecorderDeps) {
  const queue = broker.auditQueue(prefix);
  const waiting: { entry: AuditDoc; done: () => void; from?: SpanContext }[] = [];
  let inFlight = false;
  let lastBatchAt = 0;

  const store = async (entries: AuditDoc[]): Promise<void> => {
    // While the database is known to be away, straight to the queue: no insert to wait for.
    if (health.up) {
      try {
        await insertAuditEntries(dbStore, entries, { timeoutMS: insertTimeoutMs });
        metrics.auditDirectWrites.inc(entries.length);
        metrics.auditEntriesWritten.inc(entries.length);
        return;
      } catch (err) {
        if (onlyDuplicateKeys(err)) return;
        log.warn('audit insert failed; publishing the entries to the audit queue', {
          entries: entries.length,
          err: err as Error,
        });
      }
    }
    try {
      await amqp.publish('', queue, entries, { messageId: entries[0]!._id });
      metrics.auditQueuedEntries.inc(entries.length);
    } catch (err) {
      log.error('audit entries lost: database and broker both failed', { entries: entries.length, err: err as Error });
    }
  };

  const pump = async (): Promise<void> => {
    if (inFlight) return;
    inFlight = true;
    try {
      while (waiting.length) {
        if (lingerMs > 0 && waiting.length < 50 && performance.now() - lastBatchAt < 10)
          await new Promise((r) => setTimeout(r, lingerMs));
        lastBatchAt = performance.now();
        const batch = waiting.splice(0, 500);
        // A group commit serves many requests: a trace of its own, linked to theirs.
        await batchSpan(
          'batch audit',
          batch.map((w) => w.from),
          () => store(batch.map((w) => w.entry)),
        );
        for (const w of batch) w.done();
      }
    } finally {
      inFlight = false;
    }
  };

  return {
    record(entry: AuditDoc): Promise<void> {
      return new Promise<void>((done) => {
        waiting.push({ entry, done, from: currentSpanContext() });
        void pump();
      });
    },
  };
}
export type AuditRecorder = ReturnType<typeof createAuditRecorder>;
