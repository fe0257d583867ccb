import { randomUUID } from 'node:crypto';
import { EVENTS, type BusEvent, type EventName, type JobEventName } from '../contracts/events';
import { broker } from '../contracts/registry';
import type { AmqpClient } from './amqp';
import type { Logger } from './log';

export interface EmitDeps {
  amqp: AmqpClient;
  log: Logger;
  config: { QUEUE_PREFIX: string };
}

/**
 * Announce a non-job event (projects, teams, exports, …; SPEC 6.1) to the events exchange, with
 * the event name as routing key; the webhook pool fans it out to the account's subscriptions.
 * Job events (`<name>.completed` / `.failed`) are published by platform/jobs.ts in the same
 * shape. Call it after the change is stored. A feature that starts emitting a name flips its
 * `emitted` flag in contracts/events.ts so customers may subscribe to it.
 *
 * Best effort like the job events: a publish the broker does not confirm is logged and answers
 * false rather than failing the request that made the change.
 */
export async function emitEvent(
  deps: EmitDeps,
  accountId: string,
  name: Exclude<EventName, JobEventName>,
  data: Record<string, unknown>,
  opts: { occurredAt?: Date } = {},
): Promise<{ eventId: string; published: boolean }> {
  const event: BusEvent = { eventId: randomUUID(), event: name, accountId, occurredAt: (opts.occurredAt ?? new Date()).toISOString(), data };
  if (!EVENTS[name].emitted) deps.log.warn('emitting an event marked not emitted in contracts/events.ts; flip its flag so customers can subscribe', { event: name });
  try {
    await deps.amqp.publish(broker.eventsExchange(deps.config.QUEUE_PREFIX), name, event, { messageId: event.eventId });
    return { eventId: event.eventId, published: true };
  } catch (err) {
    deps.log.error('event publish failed', { event: name, err: err as Error });
    return { eventId: event.eventId, published: false };
  }
}
