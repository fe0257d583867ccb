import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { AmqpClient } from '../amqp';
import type { Logger } from '../log';
import { onlyDuplicateKeys, type AuditDoc, type Database } from '../mongo';

export interface AuditRecorderDeps {
  db: Database;
  amqp: AmqpClient;
  log: Logger;
  /** QUEUE_PREFIX of the deployment. */
  prefix: string;
}

/**
 * Records audit entries durably before the caller answers: published to the audit queue
 * (persistent, confirmed by the broker) for the batch writer (audit.writer.ts); when the broker
 * is away or the confirm does not come within PUBLISH_TIMEOUT_MS, inserted straight into
 * `audit_log`. `record` resolves once the entry is safe (or, if MongoDB failed too, logged as
 * lost); it never rejects, so an audit failure never changes an answer.
 *
 * Group commit: while one publish waits for its confirm, the entries that arrive meanwhile wait
 * too and then go together as one message (a JSON array), so under load one broker message and
 * one confirm carry many entries, and an idle process still publishes each entry at once.
 */
export function createAuditRecorder({ db, amqp, log, prefix }: AuditRecorderDeps) {
  const queue = broker.auditQueue(prefix);
  let waiting: { entry: AuditDoc; done: () => void }[] = [];
  let inFlight = false;

  const store = async (entries: AuditDoc[]): Promise<void> => {
    if (amqp.connected) {
      try {
        await amqp.publish('', queue, entries, { messageId: entries[0]!._id });
        return;
      } catch (err) {
        log.warn('audit publish failed; writing the entries directly', { entries: entries.length, err: err as Error });
      }
    }
    try {
      // If the broker did take a message whose confirm timed out, the writer's copies are
      // duplicate _ids and are dropped there (and here: unordered, duplicates ignored).
      await db.audit.insertMany(entries, { ordered: false, timeoutMS: 5000 });
      metrics.auditDirectWrites.inc(entries.length);
    } catch (err) {
      if (onlyDuplicateKeys(err)) return;
      log.error('audit entries lost: broker and database both failed', { entries: entries.length, err: err as Error });
    }
  };

  const pump = async (): Promise<void> => {
    if (inFlight) return;
    inFlight = true;
    try {
      while (waiting.length) {
        const batch = waiting.splice(0, 500);
        await store(batch.map((w) => w.entry));
        for (const w of batch) w.done();
      }
    } finally {
      inFlight = false;
    }
  };

  return {
    record(entry: AuditDoc): Promise<void> {
      return new Promise<void>((done) => {
        waiting.push({ entry, done });
        void pump();
      });
    },
  };
}
export type AuditRecorder = ReturnType<typeof createAuditRecorder>;
