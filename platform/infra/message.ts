import type { z } from 'zod';
import { metrics } from '../../monitoring/metrics';
import type { Logger } from './log';

/**
 * Why a consumer dead-letters a message (the `reason` of messages_dead_lettered_total):
 * invalid_json (not JSON), invalid_message (JSON, but not the queue's contract), wrong_pool (a job
 * of another type on a pool queue), no_reply_to (a request/reply request without reply-to or
 * correlation id: nobody could read its answer).
 */
export type DeadLetterReason = 'invalid_json' | 'invalid_message' | 'wrong_pool' | 'no_reply_to';

export interface DeadLetterOptions {
  /** The `queue` label: the pool (image, drive, webhook …) or the queue's own name. */
  queue: string;
  log: Logger;
  /** Called once the message is dead-lettered (a consumer's own event, say). */
  onDeadLettered?: (reason: DeadLetterReason) => void;
}

/** What of an AMQP delivery (platform/infra/amqp-link.ts `Delivery`) dead-lettering needs: its body, and the way off the queue. */
export interface Unreadable {
  msg: { content: Buffer };
  deadLetter(): void;
}

/**
 * Dead-letter a message this consumer cannot handle: counted in
 * messages_dead_lettered_total{queue,reason} and said in one warning, "dead-lettering a message",
 * with its queue, reason and size (never its content: it may hold user data). The scheduler parks
 * it in the dead_letters collection (scheduler/dead-letters.ts).
 */
export function deadLetter(
  d: Unreadable,
  reason: DeadLetterReason,
  o: DeadLetterOptions & { invalid?: string[] },
): void {
  metrics.deadLettered.inc({ queue: o.queue, reason });
  o.log.warn('dead-lettering a message', {
    queue: o.queue,
    reason,
    bytes: d.msg.content.length,
    ...(o.invalid ? { invalid: o.invalid } : {}),
  });
  d.deadLetter();
  o.onDeadLettered?.(reason);
}

/**
 * A message's JSON body checked against `schema`: the value, or undefined once the message is
 * dead-lettered (deadLetter: invalid_json, or invalid_message with the paths of the first fields
 * that do not match, never their values).
 */
export function parseOrDeadLetter<T>(d: Unreadable, schema: z.ZodType<T>, o: DeadLetterOptions): T | undefined {
  let body: unknown;
  try {
    body = JSON.parse(d.msg.content.toString('utf8'));
  } catch {
    deadLetter(d, 'invalid_json', o);
    return undefined;
  }
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const invalid = [...new Set(r.error.issues.slice(0, 5).map((i) => i.path.join('.') || '(message)'))];
  deadLetter(d, 'invalid_message', { ...o, invalid });
  return undefined;
}
