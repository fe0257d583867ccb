import type { Channel, ChannelModel } from 'amqplib';
import { metrics } from '../../monitoring/metrics';
import { type AmqpLink, type ConsumerRestartReason, type Delivery, outsideWork, sleep } from './amqp-link';
import { declareTopology } from './amqp-topology';

export interface Consumer {
  queue: string;
  prefetch: number;
  handler: (d: Delivery) => Promise<void>;
  channel?: Channel;
  tag?: string;
  /** When the broker last stopped it (see ConsumerRecovery.restart), and the wait before that restart. */
  restartedAt?: number;
  restartDelayMs?: number;
}

export const restartReason = (err: unknown): ConsumerRestartReason => {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === 406 ? 'precondition_failed' : code === 404 ? 'not_found' : 'channel_error';
};

/** Subscribes again a consumer the broker stopped while its connection stays up. */
export class ConsumerRecovery {
  constructor(
    private readonly link: AmqpLink,
    /** Whether `c` is still wanted (not unsubscribed). */
    private readonly registered: (c: Consumer) => boolean,
    /** Subscribes `c` on a new channel of `conn`. */
    private readonly start: (c: Consumer, conn: ChannelModel) => Promise<void>,
  ) {}

  /**
   * The broker stopped consumer `c` while `conn` stays up: counted
   * (amqp_consumer_restarts_total{queue,reason}) and logged (one warning), then the topology is
   * declared again (the queue may have been deleted) and the consumer subscribed on a new channel.
   * A failed try is repeated with backoff while the connection lives (a lost connection restarts
   * every consumer anyway). Restarts in quick succession (a handler that keeps causing channel
   * errors) wait first, 100 ms doubling to 5 s, so they cannot spin.
   */
  restart(c: Consumer, conn: ChannelModel, reason: ConsumerRestartReason, err?: Error) {
    if (this.link.closing || this.link.conn !== conn || !this.registered(c)) return;
    const now = Date.now();
    const quick = c.restartedAt !== undefined && now - c.restartedAt < 30_000;
    const delayMs = quick ? Math.min(5000, Math.max(100, (c.restartDelayMs ?? 0) * 2)) : 0;
    c.restartedAt = now;
    c.restartDelayMs = delayMs;
    metrics.amqpConsumerRestarts.inc({ queue: c.queue, reason });
    this.link.log.warn('amqp consumer stopped by the broker; subscribing again', {
      queue: c.queue,
      reason,
      node: this.link.node,
      ...(delayMs ? { delayMs } : {}),
      ...(err ? { err } : {}),
    });
    void outsideWork.runInAsyncScope(() => this.resubscribe(c, conn, reason, delayMs));
  }

  private async resubscribe(
    c: Consumer,
    conn: ChannelModel,
    reason: ConsumerRestartReason,
    delayMs: number,
  ): Promise<void> {
    const gone = () => this.link.closing || this.link.conn !== conn || !this.registered(c) || !!c.channel;
    for (let failures = 0; ; failures++) {
      if (delayMs > 0) await sleep(delayMs * (0.8 + Math.random() * 0.4));
      if (gone()) return;
      try {
        const setup = await conn.createChannel();
        setup.on('error', () => {}); // a declaration refused: thrown by it
        try {
          await declareTopology(setup, this.link.topology);
        } finally {
          await setup.close().catch(() => {});
        }
        if (gone()) return;
        await this.start(c, conn);
        this.link.events.emit('consumerRestarted', { queue: c.queue, reason });
        return;
      } catch (err) {
        delayMs = Math.min(5000, Math.max(100, delayMs * 2));
        const log =
          failures % 10 === 9 ? this.link.log.warn.bind(this.link.log) : this.link.log.debug.bind(this.link.log);
        log('amqp consumer not subscribed again yet; trying again', {
          queue: c.queue,
          failures: failures + 1,
          err: err as Error,
        });
      }
    }
  }
}
