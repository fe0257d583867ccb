import type { Channel, ChannelModel, Options } from 'amqplib';
import { broker, type PoolType } from '../../contracts/registry';
import { declareWebhookTopology } from './webhook-topology';

export interface TopologyOptions {
  prefix: string;
  queueType: 'quorum' | 'classic';
  deliveryLimit: number;
  pools: readonly PoolType[];
  /** Webhook retry delays (config WEBHOOK_RETRY_DELAYS_MS); default the SPEC's 1 s and 3 s. */
  webhookDelaysMs?: readonly number[];
}

/** Arguments of a pool queue. WARNING: RabbitMQ refuses to redeclare a queue with other arguments. */
export function poolQueueArgs(t: TopologyOptions): Record<string, unknown> {
  const args: Record<string, unknown> = {
    'x-queue-type': t.queueType,
    'x-dead-letter-exchange': broker.deadLetterExchange(t.prefix),
  };
  if (t.queueType === 'quorum') args['x-delivery-limit'] = t.deliveryLimit;
  return args;
}

/** Every queue and exchange declared in this process, by prefix (tests delete them afterwards). */
export const declaredNames = new Map<string, { queues: Set<string>; exchanges: Set<string> }>();

export const recording = (ch: Channel, prefix: string): Channel => {
  const names = declaredNames.get(prefix) ?? { queues: new Set<string>(), exchanges: new Set<string>() };
  declaredNames.set(prefix, names);
  return new Proxy(ch, {
    get(target, prop) {
      if (prop === 'assertQueue') {
        return (q: string, o?: Options.AssertQueue) => {
          names.queues.add(q);
          return target.assertQueue(q, o);
        };
      }
      if (prop === 'assertExchange') {
        return (x: string, type: string, o?: Options.AssertExchange) => {
          names.exchanges.add(x);
          return target.assertExchange(x, type, o);
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
};

/** Declare exchanges and queues. Idempotent. */
export async function declareTopology(raw: Channel, t: TopologyOptions): Promise<void> {
  const ch = recording(raw, t.prefix);
  await ch.assertExchange(broker.eventsExchange(t.prefix), 'topic', { durable: true });
  await ch.assertExchange(broker.deadLetterExchange(t.prefix), 'fanout', { durable: true });
  await ch.assertQueue(broker.deadLetterQueue(t.prefix), { durable: true, arguments: { 'x-queue-type': t.queueType } });
  await ch.bindQueue(broker.deadLetterQueue(t.prefix), broker.deadLetterExchange(t.prefix), '');
  for (const pool of t.pools) {
    await ch.assertQueue(broker.poolQueue(t.prefix, pool), { durable: true, arguments: poolQueueArgs(t) });
  }
  await declareWebhookTopology(ch, {
    prefix: t.prefix,
    queueType: t.queueType,
    delaysMs: t.webhookDelaysMs ?? [1000, 3000],
    poolQueueArgs: poolQueueArgs(t),
  });
  await ch.assertQueue(broker.auditQueue(t.prefix), { durable: true, arguments: poolQueueArgs(t) }); // audit entries (platform/audit/)
}

/** Messages ready in `queue`, checked on a channel of its own; null when the broker is away (no `conn`) or refuses. */
export async function readyMessages(conn: ChannelModel | undefined, queue: string): Promise<number | null> {
  if (!conn) return null;
  let ch: Channel | undefined;
  try {
    ch = await conn.createChannel();
    ch.on('error', () => {});
    const q = await ch.checkQueue(queue);
    return q.messageCount;
  } catch {
    return null;
  } finally {
    await ch?.close().catch(() => {});
  }
}
