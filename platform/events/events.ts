import { randomUUID } from 'node:crypto';
import { EVENTS, type BusEvent, type EventName, type JobEventName } from '../../contracts/events';
import { broker } from '../../contracts/registry';
import type { AmqpClient } from '../infra/amqp';
import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import { createEventOutbox } from './outbox.repository';

export interface EmitDeps {
  amqp: AmqpClient;
  log: Logger;
  store: Store;
  config: { QUEUE_PREFIX: string };
}

const send = async (deps: EmitDeps, event: BusEvent): Promise<boolean> => {
  try {
    await deps.amqp.publish(broker.eventsExchange(deps.config.QUEUE_PREFIX), event.event, event, {
      messageId: event.eventId,
    });
  } catch (err) {
    deps.log.warn('event publish failed; the sweep will publish it', { event: event.event, err: err as Error });
    return false;
  }
  await createEventOutbox(deps.store).markPublished(event.eventId);
  return true;
};

/** Publish outbox events the broker never confirmed (older than `graceMs`); the scheduler calls it. */
export async function sweepEventOutbox(deps: EmitDeps, graceMs: number, limit = 500): Promise<number> {
  const pending = await createEventOutbox(deps.store).unpublished(new Date(Date.now() - graceMs), limit);
  let sent = 0;
  for (const doc of pending) if (await send(deps, doc.event)) sent++;
  return sent;
}

/** Delete published outbox entries older than `before`. */
export async function expireEventOutbox(store: Store, before: Date): Promise<number> {
  return createEventOutbox(store).expirePublished(before);
}

/**
 * Announce a non-job event (projects, teams, exports, …; SPEC 6.1) to the events exchange, with
 * the event name as routing key; the webhook pool fans it out to the account's subscriptions.
 * Job events (`<name>.completed` / `.failed`) are published by platform/jobs/outbox.ts in the same
 * shape. Call it after the change is stored. A feature that starts emitting a name flips its
 * `emitted` flag in contracts/events.ts so customers may subscribe to it.
 *
 * At least once, like the job events: the event is stored in the outbox first, marked published
 * after the broker's confirm, and the scheduler's sweep publishes whatever was not (a broker
 * outage or a crash loses no event; receivers dedupe on the event id). `published` says whether
 * it went out at once.
 */
export async function emitEvent(
  deps: EmitDeps,
  accountId: string,
  name: Exclude<EventName, JobEventName>,
  data: Record<string, unknown>,
  opts: { occurredAt?: Date } = {},
): Promise<{ eventId: string; published: boolean }> {
  const event: BusEvent = {
    eventId: randomUUID(),
    event: name,
    accountId,
    occurredAt: (opts.occurredAt ?? new Date()).toISOString(),
    data,
  };
  if (!EVENTS[name].emitted)
    deps.log.warn(
      'emitting an event marked not emitted in contracts/events.ts; flip its flag so customers can subscribe',
      { event: name },
    );
  await createEventOutbox(deps.store).add(event);
  return { eventId: event.eventId, published: await send(deps, event) };
}
