import { z } from 'zod';
import { JOB_TYPES, broker } from '../contracts/registry';
import { metrics } from '../monitoring/metrics';
import type { Delivery } from '../platform/infra/amqp';
import type { Runtime } from '../platform/runtime';
import { createDeadLetters } from './dead-letters.repository';

const JobMessage = z.object({ jobId: z.string(), accountId: z.string(), type: z.enum(JOB_TYPES) });

/** Parked messages hold up to 64 KiB of content (prompts, event data): kept this long, then deleted. */
export const DEAD_LETTER_RETENTION_DAYS = 14;

/**
 * Drains the dead-letter queue: a job whose message died (delivery limit reached, or refused by
 * its pool) is failed with a clear error and refunded; every dead message is parked in MongoDB
 * with its headers and a bounded copy of its bytes for inspection, then acked.
 */
export async function startDeadLetterHandler(rt: Runtime) {
  const parked = createDeadLetters(rt.store);
  return rt.amqp.consume(broker.deadLetterQueue(rt.config.QUEUE_PREFIX), 10, async (d: Delivery) => {
    const headers = (d.msg.properties.headers ?? {}) as Record<string, unknown>;
    const reason = String(headers['x-first-death-reason'] ?? 'unknown');
    const queue = String(headers['x-first-death-queue'] ?? 'unknown');
    let jobId: string | null = null;
    try {
      const r = JobMessage.safeParse(JSON.parse(d.msg.content.toString('utf8')));
      if (r.success) {
        jobId = r.data.jobId;
        await rt.jobs.fail(
          r.data.jobId,
          `the job's message was dead-lettered (${reason}) after repeated delivery failures`,
          { reason: 'dead_letter' },
        );
      }
    } catch {
      // not JSON: parked below
    }
    await parked.park({
      queue,
      reason,
      jobId,
      deliveryCount: headers['x-delivery-count'] ?? null,
      bytes: d.msg.content.length,
      contentBase64: d.msg.content.subarray(0, 64 * 1024).toString('base64'),
    });
    metrics.deadLettered.inc({ queue, reason: `parked:${reason}` });
    d.ack();
  });
}
