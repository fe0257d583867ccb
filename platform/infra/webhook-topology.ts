import type { Channel } from 'amqplib';
import { broker } from '../../contracts/registry';

/** How long a delivery to a busy endpoint waits before it is tried again (not an attempt). */
export const WEBHOOK_DEFER_MS = 500;

export interface WebhookTopologyOptions {
  prefix: string;
  queueType: 'quorum' | 'classic';
  /** Retry delays (config WEBHOOK_RETRY_DELAYS_MS); one delay queue per distinct value. */
  delaysMs: readonly number[];
  /** Arguments of a pool queue (dead-letter exchange, delivery limit), for the delivery queue. */
  poolQueueArgs: Record<string, unknown>;
}

/** Every delay a delivery message can be parked for. */
export const webhookDelays = (delaysMs: readonly number[]) => [...new Set([...delaysMs, WEBHOOK_DEFER_MS])];

/** Names of the queues declared here (tests drop them). */
export const webhookQueueNames = (prefix: string, delaysMs: readonly number[]) => [
  broker.webhookDeliveryQueue(prefix),
  ...webhookDelays(delaysMs).map((ms) => broker.webhookDelayQueue(prefix, ms)),
];

/**
 * Webhook topology, declared by every process on connect (so no event is published before the
 * binding exists):
 * - the webhook pool queue takes every event from the events exchange ('#');
 * - the delivery queue takes one message per (event, webhook);
 * - one delay queue per retry delay: a queue-wide TTL (all messages in it wait the same time,
 *   so expiry is in order) dead-letters each message back to the delivery queue. On quorum
 *   queues dead-lettering is at-least-once, so a retry survives a broker node loss.
 * WARNING: RabbitMQ refuses to redeclare a queue with other arguments; the delay is in the name.
 */
export async function declareWebhookTopology(ch: Channel, t: WebhookTopologyOptions): Promise<void> {
  const deliveries = broker.webhookDeliveryQueue(t.prefix);
  await ch.bindQueue(broker.poolQueue(t.prefix, 'webhook'), broker.eventsExchange(t.prefix), '#');
  await ch.assertQueue(deliveries, { durable: true, arguments: t.poolQueueArgs });
  for (const ms of webhookDelays(t.delaysMs)) {
    const args: Record<string, unknown> = {
      'x-queue-type': t.queueType,
      'x-message-ttl': ms,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': deliveries,
    };
    if (t.queueType === 'quorum') {
      args['x-dead-letter-strategy'] = 'at-least-once';
      args['x-overflow'] = 'reject-publish';
    }
    await ch.assertQueue(broker.webhookDelayQueue(t.prefix, ms), { durable: true, arguments: args });
  }
}
