import type { Channel } from 'amqplib';
import type { AmqpLink } from './amqp-link';
import type { ConfirmPublisher } from './amqp-publisher';
import type { PublishChannels } from './amqp-publish-channels';
import { recording } from './amqp-topology';

interface Broadcast {
  exchange: string;
  handler: (body: unknown) => void;
  hooks: { onReady?: () => void; onLost?: () => void };
  channel?: Channel;
}

/** Broadcasts through fanout exchanges, and this process's subscriptions to them (set up again on every connection). */
export class BroadcastSubscriptions {
  private subs: Broadcast[] = [];
  private declaredFanouts = new Set<string>();

  constructor(
    private readonly link: AmqpLink,
    private readonly channels: PublishChannels,
    private readonly publisher: ConfirmPublisher,
  ) {}

  /** AmqpClient.subscribe: a private, auto-deleted queue bound to `exchange`, set up again on every connection. */
  async subscribe(
    exchange: string,
    handler: (body: unknown) => void,
    hooks: { onReady?: () => void; onLost?: () => void } = {},
  ): Promise<() => Promise<void>> {
    const sub: Broadcast = { exchange, handler, hooks };
    this.subs.push(sub);
    if (this.link.conn) await this.start(sub);
    return async () => {
      this.subs = this.subs.filter((x) => x !== sub);
      const ch = sub.channel;
      sub.channel = undefined;
      await ch?.close().catch(() => {});
    };
  }

  /** Publish to a fanout exchange (declared here, idempotently) with a confirm. */
  async broadcast(exchange: string, body: unknown): Promise<void> {
    if (!this.declaredFanouts.has(exchange)) {
      const ch = await this.channels.ready(this.link.publishTimeoutMs);
      await recording(ch, this.link.topology.prefix).assertExchange(exchange, 'fanout', { durable: true });
      this.declaredFanouts.add(exchange);
    }
    await this.publisher.publish(exchange, '', body, { persistent: false });
  }

  private async start(sub: Broadcast) {
    if (!this.link.conn) return;
    const ch = await this.link.conn.createChannel();
    ch.on('error', (err) => this.link.log.warn('amqp broadcast channel error', { exchange: sub.exchange, err }));
    const rec = recording(ch, this.link.topology.prefix);
    await rec.assertExchange(sub.exchange, 'fanout', { durable: true });
    this.declaredFanouts.add(sub.exchange);
    const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    await ch.bindQueue(queue, sub.exchange, '');
    await ch.consume(
      queue,
      (msg) => {
        if (!msg) {
          // Cancelled by the broker (queue deleted): invalidations no longer arrive. Say so,
          // and subscribe again on a new channel.
          if (sub.channel !== ch) return;
          sub.channel = undefined;
          sub.hooks.onLost?.();
          void ch.close().catch(() => {});
          if (this.subs.includes(sub))
            this.start(sub).catch((err) =>
              this.link.log.warn('broadcast resubscribe failed', { exchange: sub.exchange, err: err as Error }),
            );
          return;
        }
        let body: unknown;
        try {
          body = JSON.parse(msg.content.toString('utf8'));
        } catch {
          return this.link.log.warn('broadcast message is not JSON; ignored', { exchange: sub.exchange });
        }
        sub.handler(body);
      },
      { noAck: true },
    );
    ch.on('close', () => {
      if (sub.channel !== ch) return;
      sub.channel = undefined;
      sub.hooks.onLost?.();
    });
    sub.channel = ch;
    sub.hooks.onReady?.();
  }

  /** Subscribe every broadcast on a new connection. */
  async startAll() {
    for (const b of this.subs) await this.start(b);
  }

  /** The connection is gone: every subscription is lost until the next one, and the exchanges are declared again. */
  detach() {
    this.declaredFanouts.clear();
    for (const b of this.subs) {
      if (!b.channel) continue;
      b.channel = undefined;
      b.hooks.onLost?.();
    }
  }
}
