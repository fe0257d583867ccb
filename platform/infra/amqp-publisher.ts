import type { Span } from '@opentelemetry/api';
import type { ConfirmChannel, Options } from 'amqplib';
import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { type AmqpLink, INTERNAL_ERROR, sleep } from './amqp-link';
import type { PublishChannels } from './amqp-publish-channels';
import { contextHeaders, producerSpan } from './amqp-spans';
import { endSpan, runInSpan, tracingOn } from './tracing';

/** What became of one send of a publish. */
type SendOutcome = 'confirmed' | 'lost' | 'nacked';

/** The socket buffer of the publish channel is full: publishes wait for its 'drain' (or its close). */
class BackPressure {
  private draining?: Promise<void>;

  /** `ch.publish` said the buffer is full: hold later publishes until it drains. */
  hold(ch: ConfirmChannel) {
    if (this.draining !== undefined) return;
    this.draining = new Promise<void>((r) => {
      const release = () => {
        this.draining = undefined;
        ch.off('close', release);
        r();
      };
      ch.once('drain', release);
      ch.once('close', release);
    });
  }

  /** Back-pressure: while the socket buffer is full, wait for 'drain', never past the deadline. */
  async drained(deadline: number, timeoutMs: number): Promise<void> {
    while (this.draining !== undefined) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`publish not confirmed within ${timeoutMs} ms: the broker is not reading (flow control)`);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.draining, new Promise<void>((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
  }
}

/**
 * Publishing with confirms: a publish resolves on the broker's confirm, waits for 'drain' rather
 * than buffering without bound, is sent again after a failover or a nack, and fails after
 * `publishTimeoutMs` while no broker takes it.
 */
export class ConfirmPublisher {
  private readonly backPressure = new BackPressure();

  constructor(
    private readonly link: AmqpLink,
    private readonly channels: PublishChannels,
  ) {}

  /** Publish a persistent message and wait for the broker's confirm. */
  publish(exchange: string, routingKey: string, body: unknown, opts: Options.Publish = {}): Promise<void> {
    return this.publishContent(exchange, routingKey, Buffer.from(JSON.stringify(body)), {
      contentType: 'application/json',
      ...opts,
    });
  }

  /** `publish` of bytes as they are (a streamed reply's audio chunk), with the same confirm and back-pressure. */
  async publishContent(exchange: string, routingKey: string, content: Buffer, opts: Options.Publish): Promise<void> {
    if (!tracingOn) return this.publishConfirmed(exchange, routingKey, content, opts);
    // The producer span covers the wait for a connection and for 'drain', and the confirm.
    const span = producerSpan(exchange, routingKey, opts, content.length);
    try {
      await runInSpan(span, () => this.publishConfirmed(exchange, routingKey, content, opts, span));
      endSpan(span);
    } catch (err) {
      endSpan(span, err);
      throw err;
    }
  }

  /**
   * Send until the broker confirms, within `publishTimeoutMs` from the first try: a send whose
   * connection died before its confirm (failover), or that the broker refused (nack), goes again
   * on the publish channel of the next connection. The receivers absorb a message that arrives
   * twice (see the comment of AmqpClient).
   */
  private async publishConfirmed(
    exchange: string,
    routingKey: string,
    content: Buffer,
    opts: Options.Publish,
    span?: Span,
  ): Promise<void> {
    const deadline = Date.now() + this.link.publishTimeoutMs;
    const kind = exchangeKind(this.link.topology.prefix, exchange, routingKey);
    const sentAt = process.hrtime.bigint();
    const observe = (outcome: 'confirmed' | 'failed') =>
      metrics.publishConfirmDuration.observe(
        { exchange: kind, outcome },
        Number(process.hrtime.bigint() - sentAt) / 1e9,
      );
    opts = { persistent: true, ...opts, headers: contextHeaders(opts.headers, span) };
    for (;;) {
      let outcome: SendOutcome;
      let ch: ConfirmChannel;
      try {
        ch = await this.channels.ready(deadline - Date.now());
        if (this.link.blocked) throw new Error(`the broker blocked publishing (${this.link.blocked})`);
        await this.backPressure.drained(deadline, this.link.publishTimeoutMs);
        outcome = await this.sendOnce(ch, exchange, routingKey, content, opts, deadline);
      } catch (err) {
        observe('failed');
        throw err;
      }
      if (outcome === 'confirmed') break;
      if (outcome === 'lost' && this.channels.crashed.has(ch)) {
        // The broker closed the connection with an internal error: the publish itself may be
        // what it choked on (see RpcResponder.markCallerGone), so it is not sent again.
        observe('failed');
        throw Object.assign(
          new Error('the broker closed the connection with an internal error (541) before the publish was confirmed'),
          { code: INTERNAL_ERROR },
        );
      }
      if (Date.now() >= deadline || this.link.closing) {
        observe('failed');
        throw new Error(
          outcome === 'lost'
            ? 'channel closed before the publish was confirmed'
            : 'the broker refused the publish (nack)',
        );
      }
      metrics.amqpPublishesResent.inc({ exchange: kind, reason: outcome === 'lost' ? 'connection_lost' : 'nacked' });
      this.link.events.emit('resent', {
        exchange,
        routingKey,
        reason: outcome === 'lost' ? 'connection_lost' : 'nacked',
      });
      if (outcome === 'nacked') this.channels.replace(ch);
      // Never spin: wait a moment when the same channel would be used again.
      if (outcome === 'nacked' || this.channels.current === ch)
        await sleep(Math.min(100, Math.max(0, deadline - Date.now())));
    }
    observe('confirmed');
    this.link.events.emit('published', { exchange, routingKey });
  }

  /**
   * One send on `ch`: 'confirmed', 'nacked', or 'lost' when the channel closed first because its
   * connection died (a channel the broker closed with an error rejects instead: sending again
   * would meet the same error). Rejects at the deadline.
   */
  private sendOnce(
    ch: ConfirmChannel,
    exchange: string,
    routingKey: string,
    content: Buffer,
    opts: Options.Publish,
    deadline: number,
  ): Promise<SendOutcome> {
    return new Promise<SendOutcome>((resolve, reject) => {
      let settled = false;
      const finish = (outcome: SendOutcome | Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        ch.off('close', onClose);
        outcome instanceof Error ? reject(outcome) : resolve(outcome);
      };
      const lost = () =>
        this.channels.failed.has(ch)
          ? new Error('the broker closed the publish channel with an error before the publish was confirmed')
          : 'lost';
      const onClose = () => finish(lost());
      const timer = setTimeout(
        () => finish(new Error(`publish not confirmed within ${this.link.publishTimeoutMs} ms`)),
        Math.max(1, deadline - Date.now()),
      );
      ch.once('close', onClose);
      try {
        const ok = ch.publish(exchange, routingKey, content, opts, (err) => {
          if (!err) return finish('confirmed');
          // amqplib fails the confirms still outstanding with 'channel closed' when the channel goes.
          finish(/channel closed/i.test(String((err as Error).message ?? err)) ? lost() : 'nacked');
        });
        if (!ok) this.backPressure.hold(ch);
      } catch (err) {
        // The channel closed between our look at it and the send (amqplib throws 'Channel closed').
        finish(/clos(ed|ing)/i.test((err as Error).message) ? lost() : (err as Error));
      }
    });
  }
}

/** A bounded label for what a publish went to. */
function exchangeKind(p: string, exchange: string, routingKey: string): string {
  if (exchange === '') {
    if (routingKey === broker.auditQueue(p)) return 'audit';
    if (routingKey.startsWith(`${p}svc.webhook`)) return 'webhooks';
    return routingKey.startsWith(`${p}svc.pool.`) ? 'pool' : 'other';
  }
  if (exchange === broker.eventsExchange(p)) return 'events';
  if (exchange === broker.authExchange(p)) return 'auth';
  if (exchange === broker.jobChangesExchange(p)) return 'job_changes';
  return exchange.startsWith(`${p}svc.webhook`) ? 'webhooks' : 'other';
}
