import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { AmqpClient } from '../amqp';
import type { Logger } from '../log';
import type { AuditDoc, Database } from '../mongo';

export interface AuditRecorderDeps {
  db: Database;
  amqp: AmqpClient;
  log: Logger;
  /** QUEUE_PREFIX of the deployment. */
  prefix: string;
}

/**
 * Records one audit entry durably before the caller answers: published to the audit queue
 * (persistent, confirmed by the broker) for the batch writer (audit.writer.ts); when the broker
 * is away or the confirm does not come within PUBLISH_TIMEOUT_MS, inserted straight into
 * `audit_log`. Resolves once the entry is safe (or, if MongoDB failed too, logged as lost);
 * never rejects, so an audit failure never changes an answer.
 */
export function createAuditRecorder({ db, amqp, log, prefix }: AuditRecorderDeps) {
  const queue = broker.auditQueue(prefix);
  return {
    async record(entry: AuditDoc): Promise<void> {
      if (amqp.connected) {
        try {
          await amqp.publish('', queue, entry, { messageId: entry._id });
          return;
        } catch (err) {
          log.warn('audit publish failed; writing the entry directly', { requestId: entry.requestId, err: err as Error });
        }
      }
      try {
        // If the broker did take a message whose confirm timed out, the writer's copy is a
        // duplicate _id and is dropped there.
        await db.audit.insertOne(entry);
        metrics.auditDirectWrites.inc();
      } catch (err) {
        if ((err as { code?: number }).code === 11000) return;
        log.error('audit entry lost: broker and database both failed', { requestId: entry.requestId, err: err as Error });
      }
    },
  };
}
export type AuditRecorder = ReturnType<typeof createAuditRecorder>;
