import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import { type AmqpLink, INTERNAL_ERROR, outsideWork } from './amqp-link';

/**
 * The confirm channel publishes go through, one per connection: opened when the connection is,
 * opened again when the broker closes it alone (with backoff; after 5 failures the connection is
 * replaced), replaced after a nack. Publishes wait here (`ready`) while there is none.
 */
export class PublishChannels {
  /** The channel in use, or undefined while there is none. */
  current?: ConfirmChannel;
  /** Publishes waiting for a publish channel (a new connection, or a channel reopened after an error). */
  private waiters = new Set<() => void>();
  /** The next try at reopening the publish channel, after a failed one. */
  private retry?: NodeJS.Timeout;
  /** Publish channels the broker closed with an error (a publish there is not retried). */
  readonly failed = new WeakSet<Channel>();
  /** Publish channels of connections the broker closed with 541 INTERNAL_ERROR. */
  readonly crashed = new WeakSet<Channel>();
  /** The publish channels opened on each connection. */
  private opened = new WeakMap<ChannelModel, Set<ConfirmChannel>>();

  constructor(private readonly link: AmqpLink) {}

  /**
   * The confirm channel publishes go through. When the broker closes it alone (a channel error)
   * while the connection lives on, another one is opened on the same connection.
   */
  async open(conn: ChannelModel): Promise<ConfirmChannel> {
    const pub = await conn.createConfirmChannel();
    const mine = this.opened.get(conn) ?? new Set<ConfirmChannel>();
    this.opened.set(conn, mine.add(pub));
    pub.once('close', () => setImmediate(() => mine.delete(pub)));
    pub.setMaxListeners(0); // one 'close' listener per publish awaiting its confirm
    pub.on('error', (err) => {
      this.failed.add(pub);
      this.link.log.warn('amqp publish channel error', { err });
    });
    pub.on('close', () => {
      if (this.current !== pub) return;
      this.current = undefined;
      // A lost connection closes its channels first, then itself: look again once it has.
      setImmediate(() => this.reopen(conn));
    });
    return pub;
  }

  /**
   * A new publish channel on `conn`, unless the connection is gone or another one is open. A
   * failed open is tried again with backoff (100 ms doubling, publishes wait meanwhile); after 5
   * failures in a row the connection is closed, and the reconnect makes a new one.
   */
  private reopen(conn: ChannelModel, failures = 0) {
    if (this.link.conn !== conn || this.link.closing || this.current) return;
    clearTimeout(this.retry);
    this.retry = undefined;
    this.open(conn).then(
      (next) => {
        if (this.link.conn !== conn || this.current) {
          void next.close().catch(() => {});
          return;
        }
        this.current = next;
        if (failures > 0) this.link.log.info('amqp publish channel reopened', { node: this.link.node, failures });
        this.wake();
      },
      (err) => {
        if (this.link.conn !== conn || this.link.closing || this.current || this.retry) return;
        if (failures + 1 >= 5) {
          this.link.log.warn('amqp publish channel not reopened after 5 tries; replacing the connection', {
            node: this.link.node,
            err: err as Error,
          });
          void conn.close().catch(() => {});
          return;
        }
        const delay = Math.min(5000, 100 * 2 ** failures) * (0.8 + Math.random() * 0.4);
        this.link.log.warn('amqp publish channel not reopened; trying again', {
          node: this.link.node,
          delayMs: Math.round(delay),
          err: err as Error,
        });
        this.retry = outsideWork.runInAsyncScope(() =>
          setTimeout(() => {
            this.retry = undefined;
            this.reopen(conn, failures + 1);
          }, delay),
        );
        this.retry.unref?.();
      },
    );
  }

  /**
   * A nack: close the publish channel and go on with a new one. Measured on RabbitMQ 3.10: a
   * channel opened on a surviving node while a quorum queue's leader was still the dead node kept
   * nacking every publish to that queue after the election (20 s and counting), while a new
   * channel's publishes were confirmed at once. Publishes outstanding on the old channel are sent
   * again on the new one ('closing' counts as lost).
   */
  replace(ch: ConfirmChannel) {
    if (this.current !== ch || !this.link.conn) return;
    this.link.log.info('amqp publish channel replaced after a nack', { node: this.link.node });
    this.current = undefined;
    ch.close().catch(() => {});
    this.reopen(this.link.conn);
  }

  wake() {
    for (const wake of [...this.waiters]) wake();
  }

  /** `conn` closed with `err`: its channels are marked when the broker failed internally. */
  connectionClosed(conn: ChannelModel, err?: Error) {
    if ((err as { code?: unknown } | undefined)?.code === INTERNAL_ERROR)
      for (const ch of this.opened.get(conn) ?? []) this.crashed.add(ch);
  }

  /** The connection in use is gone (or closing): no channel, and no reopening. */
  detach() {
    this.current = undefined;
    this.stopRetry();
  }

  stopRetry() {
    clearTimeout(this.retry);
    this.retry = undefined;
  }

  /** The publish channel, once there is one, or a rejection after `ms`. */
  async ready(ms: number): Promise<ConfirmChannel> {
    if (this.current) return this.current;
    if (this.link.closing) throw new Error('amqp client is closed');
    if (ms <= 0) throw new Error(`amqp not connected after ${this.link.publishTimeoutMs} ms`);
    return new Promise((resolve, reject) => {
      const wake = () => {
        if (!this.current && !this.link.closing) return;
        clearTimeout(t);
        this.waiters.delete(wake);
        this.current ? resolve(this.current) : reject(new Error('amqp client is closed'));
      };
      const t = setTimeout(() => {
        this.waiters.delete(wake);
        reject(new Error(`amqp not connected after ${ms} ms`));
      }, ms);
      this.waiters.add(wake);
    });
  }
}
