import type { ChannelModel, ConsumeMessage } from 'amqplib';
import { type Consumer, ConsumerRecovery, restartReason } from './amqp-consumer-recovery';
import type { AmqpLink, Delivery } from './amqp-link';
import { consumerSpan, headerString } from './amqp-spans';
import { REQUEST_ID_HEADER, startContext } from './context';
import { endSpan, runInSpan, tracingOn } from './tracing';

/** The queues this process consumes, each on a channel of its own, started again on every connection. */
export class ConsumerRegistry {
  list: Consumer[] = [];
  private readonly recovery: ConsumerRecovery;

  constructor(private readonly link: AmqpLink) {
    this.recovery = new ConsumerRecovery(
      link,
      (c) => this.list.includes(c),
      (c, conn) => this.start(c, conn),
    );
  }

  /** Consume a queue with `prefetch` unacked messages at most; survives reconnects. */
  async consume(
    queue: string,
    prefetch: number,
    handler: (d: Delivery) => Promise<void>,
  ): Promise<() => Promise<void>> {
    const c: Consumer = { queue, prefetch, handler };
    this.list.push(c);
    if (this.link.conn) await this.start(c);
    return async () => {
      this.list = this.list.filter((x) => x !== c);
      // The channel stays open so messages in flight can still be acked after the cancel;
      // closing the connection returns whatever was never settled.
      const ch = c.channel;
      if (ch && c.tag) await ch.cancel(c.tag).catch(() => {});
    };
  }

  /** Subscribe every consumer on a new connection. */
  async startAll(conn: ChannelModel) {
    for (const c of this.list) await this.start(c, conn);
  }

  /** The connection is gone: so are the consumers' channels. */
  detach() {
    for (const c of this.list) c.channel = undefined;
  }

  /** Close a consumer's channel: its unacked messages go back to the queue. */
  async closeChannels(): Promise<void> {
    await Promise.all(this.list.map((c) => c.channel?.close().catch(() => {})));
  }

  /**
   * Subscribe consumer `c` on a new channel of `conn`. When the broker stops the consumer while
   * the connection stays up (it closes the channel with an error: 406 after an ack of an unknown
   * delivery tag, 404; or it cancels the consumer: queue deleted, quorum leader moved), it is
   * subscribed again (ConsumerRecovery). After a cancel the old channel stays open until the
   * deliveries in flight on it are settled, then closes.
   */
  private async start(c: Consumer, conn = this.link.conn) {
    if (!conn) return;
    const ch = await conn.createChannel();
    let failure: Error | undefined;
    let open = true;
    let unsettled = 0;
    let retired = false;
    const closeIfRetired = () => {
      if (retired && unsettled === 0 && open) void ch.close().catch(() => {});
    };
    // The restart's warning carries the error: one line per restart.
    ch.on('error', (err) => {
      failure = err;
      this.link.log.debug('amqp consumer channel error', { queue: c.queue, err });
    });
    ch.on('close', () => {
      open = false;
      // A lost connection closes its channels first, then itself: look once it has.
      setImmediate(() => {
        if (c.channel !== ch) return;
        c.channel = undefined;
        c.tag = undefined;
        if (failure && this.link.conn === conn) this.recovery.restart(c, conn, restartReason(failure), failure);
      });
    });
    try {
      await ch.prefetch(c.prefetch);
      c.channel = ch;
      const settleOnce = (msg: ConsumeMessage) => {
        let settled = false;
        const guard = (fn: () => void, event: 'ack' | 'requeue' | 'deadLetter') => () => {
          if (settled) return;
          settled = true;
          unsettled--;
          // A message from a channel that has since closed is redelivered by the broker anyway.
          if (!open) return;
          try {
            fn();
            this.link.events.emit(event, { queue: c.queue });
          } catch (err) {
            this.link.log.warn('amqp settle failed', { queue: c.queue, err: err as Error });
          }
          closeIfRetired();
        };
        return {
          msg,
          ack: guard(() => ch.ack(msg), 'ack'),
          requeue: guard(() => ch.nack(msg, false, true), 'requeue'),
          deadLetter: guard(() => ch.nack(msg, false, false), 'deadLetter'),
        } satisfies Delivery;
      };
      const { consumerTag } = await ch.consume(c.queue, (msg) => {
        if (!msg) {
          // Cancelled by the broker: settle what is in flight here, subscribe again elsewhere.
          if (c.channel !== ch) return;
          c.channel = undefined;
          c.tag = undefined;
          retired = true;
          closeIfRetired();
          this.recovery.restart(c, conn, 'cancelled');
          return;
        }
        unsettled++;
        const d = settleOnce(msg);
        const requestId = headerString(msg, REQUEST_ID_HEADER);
        const span = tracingOn ? consumerSpan(c.queue, msg) : undefined;
        const handled = startContext(requestId ? { requestId } : {}, () => runInSpan(span, () => c.handler(d)));
        if (span)
          handled.then(
            () => endSpan(span),
            (err) => endSpan(span, err),
          );
        handled.catch((err) => {
          // Usually the database or broker blinked. Requeueing at once would burn the quorum
          // delivery limit in milliseconds and dead-letter a good message; back off first
          // (0.5 s, 1 s, 2 s … capped at 30 s by delivery count), holding the message meanwhile.
          const count = Number(msg.properties.headers?.['x-delivery-count'] ?? (msg.fields.redelivered ? 1 : 0)) || 0;
          const delay = Math.min(30_000, 500 * 2 ** count);
          this.link.log.error('consumer handler crashed; requeueing after a backoff', {
            queue: c.queue,
            delayMs: delay,
            err: err as Error,
          });
          setTimeout(() => d.requeue(), delay).unref?.();
        });
      });
      if (c.channel === ch) c.tag = consumerTag;
    } catch (err) {
      if (c.channel === ch) c.channel = undefined;
      await ch.close().catch(() => {});
      throw err;
    }
  }
}
