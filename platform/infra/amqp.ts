import { AsyncResource } from 'node:async_hooks';
import { EventEmitter } from 'node:events';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type ConsumeMessage, type Options } from 'amqplib';
import { broker, type PoolType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { currentContext, REQUEST_ID_HEADER, startContext } from './context';
import type { Logger } from './log';
import { deadLetter } from './message';
import { ATTR, endSpan, extractContext, injectTraceHeaders, runInSpan, startSpan, tracingOn } from './tracing';
import type { Span } from '@opentelemetry/api';
import { declareWebhookTopology } from './webhook-topology';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The async context of no request and no job (this module's load): connection events and
 * reconnects run in it, so a failover's log lines, and every later line of the new connection,
 * do not name whichever job's publish happened to meet the dead socket.
 */
const outsideWork = new AsyncResource('amqp-connection');

export interface TopologyOptions {
  prefix: string;
  queueType: 'quorum' | 'classic';
  deliveryLimit: number;
  pools: readonly PoolType[];
  /** Webhook retry delays (config WEBHOOK_RETRY_DELAYS_MS); default the SPEC's 1 s and 3 s. */
  webhookDelaysMs?: readonly number[];
}

export interface Delivery {
  msg: ConsumeMessage;
  ack(): void;
  /** Back onto the queue (counts as a delivery for the quorum delivery limit). */
  requeue(): void;
  /** Off to the dead-letter queue, with no further delivery. */
  deadLetter(): void;
}

export interface AmqpEvents {
  connected: [];
  disconnected: [Error | undefined];
  published: [{ exchange: string; routingKey: string }];
  /** A publish sent again: its connection died before the confirm (failover), or the broker nacked it. */
  resent: [{ exchange: string; routingKey: string; reason: 'connection_lost' | 'nacked' }];
  /** A consumer the broker stopped while the connection stayed up is subscribed again. */
  consumerRestarted: [{ queue: string; reason: ConsumerRestartReason }];
  ack: [{ queue: string }];
  requeue: [{ queue: string }];
  deadLetter: [{ queue: string }];
}

interface Broadcast {
  exchange: string;
  handler: (body: unknown) => void;
  hooks: { onReady?: () => void; onLost?: () => void };
  channel?: Channel;
}

interface Consumer {
  queue: string;
  prefetch: number;
  handler: (d: Delivery) => Promise<void>;
  channel?: Channel;
  tag?: string;
  /** When the broker last stopped it (see restartConsumer), and the wait before that restart. */
  restartedAt?: number;
  restartDelayMs?: number;
}

/** Why a consumer was subscribed again (the `reason` label of amqp_consumer_restarts_total). */
export type ConsumerRestartReason = 'cancelled' | 'precondition_failed' | 'not_found' | 'channel_error';

const restartReason = (err: unknown): ConsumerRestartReason => {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === 406 ? 'precondition_failed' : code === 404 ? 'not_found' : 'channel_error';
};

/** Options of an AmqpClient besides its URL, topology and log. */
export interface AmqpClientOptions {
  /** AMQP heartbeat asked for on every connection, in seconds (config AMQP_HEARTBEAT_S; default 5). */
  heartbeatS?: number;
}

/**
 * `headers` plus what the work context carries across processes: the request the work belongs
 * to (`x-request-id`), so the consumer's log lines name it, and when tracing is on the W3C
 * `traceparent` / `tracestate` of `span` (the publish's producer span; default the active span),
 * so the consumer's spans join the trace. A header already set is kept.
 */
export function contextHeaders(headers: Record<string, unknown> = {}, span?: Span): Record<string, unknown> {
  const { requestId } = currentContext();
  const out =
    requestId && headers[REQUEST_ID_HEADER] === undefined ? { ...headers, [REQUEST_ID_HEADER]: requestId } : headers;
  return tracingOn ? injectTraceHeaders(out, span) : out;
}

/** RabbitMQ's direct reply-to queues have a random name per caller: one name for spans. */
const spanDestination = (exchange: string, routingKey: string) =>
  exchange || (routingKey.startsWith(RPC_REPLY_TO) ? RPC_REPLY_TO : routingKey);

/** The producer span of one publish (semantic conventions for RabbitMQ): `publish <exchange, or queue>`. */
function producerSpan(exchange: string, routingKey: string, opts: Options.Publish, bytes: number): Span | undefined {
  const destination = spanDestination(exchange, routingKey);
  return startSpan(`publish ${destination}`, 'producer', {
    [ATTR.messagingSystem]: 'rabbitmq',
    [ATTR.messagingDestinationName]: destination,
    [ATTR.messagingOperationType]: 'send',
    [ATTR.messagingOperationName]: 'publish',
    [ATTR.messagingBodySize]: bytes,
    ...(exchange && routingKey ? { [ATTR.rabbitmqRoutingKey]: routingKey } : {}),
    ...(typeof opts.messageId === 'string' ? { [ATTR.messagingMessageId]: opts.messageId } : {}),
  });
}

/**
 * The consumer span of one delivery, `process <queue>`, child of the publisher's span (the
 * message's `traceparent`), or the root of a trace when the message carries none. Everything
 * the handler does (the job's claim, the engine call, the completion event) runs inside it.
 */
function consumerSpan(queue: string, msg: ConsumeMessage): Span | undefined {
  const { messageId } = msg.properties;
  return startSpan(
    `process ${queue}`,
    'consumer',
    {
      [ATTR.messagingSystem]: 'rabbitmq',
      [ATTR.messagingDestinationName]: queue,
      [ATTR.messagingOperationType]: 'process',
      [ATTR.messagingOperationName]: 'process',
      [ATTR.messagingBodySize]: msg.content.length,
      ...(msg.fields.routingKey && msg.fields.routingKey !== queue
        ? { [ATTR.rabbitmqRoutingKey]: msg.fields.routingKey }
        : {}),
      ...(typeof messageId === 'string' ? { [ATTR.messagingMessageId]: messageId } : {}),
      ...(msg.fields.redelivered ? { 'svc.amqp.redelivered': true } : {}),
    },
    { parent: extractContext(msg.properties.headers) },
  );
}

/** A string header of a message, or undefined (absent, or not a short string). */
export const headerString = (msg: ConsumeMessage, name: string): string | undefined => {
  const v = msg.properties.headers?.[name];
  const s = Buffer.isBuffer(v) ? v.toString('utf8') : v;
  return typeof s === 'string' && s.length > 0 && s.length <= 256 ? s : undefined;
};

/** Arguments of a pool queue. WARNING: RabbitMQ refuses to redeclare a queue with other arguments. */
export function poolQueueArgs(t: TopologyOptions): Record<string, unknown> {
  const args: Record<string, unknown> = {
    'x-queue-type': t.queueType,
    'x-dead-letter-exchange': broker.deadLetterExchange(t.prefix),
  };
  if (t.queueType === 'quorum') args['x-delivery-limit'] = t.deliveryLimit;
  return args;
}

/**
 * The brokers named by AMQP_URL: one URL, or the nodes of a cluster as a comma-separated list
 * (`amqp://u:p@node1:5672,amqp://u:p@node2:5672`), in the order they are tried.
 */
export function amqpUrls(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** `host:port` of a broker URL: how logs, errors and metrics name a node (never with its credentials). */
export function amqpEndpoint(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol === 'amqps:' ? '5671' : '5672')}`;
  } catch {
    return '(unparseable AMQP URL)';
  }
}

/**
 * `url` with the AMQP heartbeat (seconds) in its query, where amqplib reads it; a heartbeat the
 * URL already names is replaced.
 */
export function withHeartbeat(url: string, seconds: number): string {
  const u = new URL(url);
  u.searchParams.set('heartbeat', String(seconds));
  return u.toString();
}

/** A connection to the first node of an AMQP_URL list that answers (tests and scripts; AmqpClient has its own failover). */
export async function connectAny(
  value: string,
  opts: Options.Connect & { timeout?: number } = {},
): Promise<ChannelModel> {
  const failures: string[] = [];
  for (const url of amqpUrls(value)) {
    try {
      return await amqp.connect(url, { timeout: 5000, ...opts });
    } catch (err) {
      failures.push(`${amqpEndpoint(url)}: ${(err as Error).message}`);
    }
  }
  throw new Error(`no RabbitMQ node answered (${failures.join('; ') || 'AMQP_URL names none'})`);
}

/** What became of one send of a publish. */
type SendOutcome = 'confirmed' | 'lost' | 'nacked';

/**
 * One RabbitMQ connection with a confirm channel for publishing and one channel per consumer.
 *
 * Failover: AMQP_URL may name several nodes of a cluster. The client connects to the first that
 * answers; when its connection dies it tries the nodes in turn, starting with the one after the
 * node it lost (a round), and backs off between rounds (100 ms doubling to 5 s). On every
 * connection it declares the topology again and restarts its consumers and broadcast
 * subscriptions. A publish whose confirm was outstanding when the connection died is sent again
 * on the next connection, within the same `publishTimeoutMs`: every message this service
 * publishes is absorbed when it arrives twice (job ids, event and delivery ids, audit entry ids,
 * invalidations, RPC correlation ids and chunk numbers). RPC requests are the exception (see
 * `request`). (amqplib 2.x's own `recovery` option is not used: it reconnects to one URL, leaves
 * channels, consumers and topology to a setup callback, and sends nothing again.)
 *
 * Publishing resolves on the broker's confirm, waits for 'drain' rather than buffering without
 * bound, and fails after `publishTimeoutMs` while no broker takes it.
 *
 * Every connection asks for an AMQP heartbeat (`heartbeatS`): a node that stops sending frames
 * while its TCP connection stays open (a stalled VM, a network path dropping packets) is given
 * up once two heartbeat intervals pass without a frame, and the failover above runs.
 *
 * Within a connection: a consumer the broker stops (it closes the consumer's channel with an
 * error, or cancels the consumer: queue deleted, quorum leader moved) is subscribed again on a
 * new channel after declaring the topology again; a publish channel that cannot be reopened is
 * tried again with backoff, and after 5 failures the connection is replaced.
 */
export class AmqpClient extends EventEmitter<AmqpEvents> {
  private conn?: ChannelModel;
  private pub?: ConfirmChannel;
  private consumers: Consumer[] = [];
  private broadcasts: Broadcast[] = [];
  private declaredFanouts = new Set<string>();
  private blocked?: string;
  private closing = false;
  private connecting?: Promise<void>;
  private reconnectTimer?: NodeJS.Timeout;
  private attempt = 0;
  private draining?: Promise<void>;
  private readonly urls: string[];
  /** Index in `urls` of the node connected to (-1: none), and of the node a round starts with. */
  private current = -1;
  private next = 0;
  /** When the last connection was lost, and to which node (for the failover log line and metric). */
  private lost?: { at: number; index: number };
  /** Publishes waiting for a publish channel (a new connection, or a channel reopened after an error). */
  private pubWaiters = new Set<() => void>();
  /** The next try at reopening the publish channel, after a failed one. */
  private pubRetry?: NodeJS.Timeout;
  private readonly heartbeatS: number;
  /** Publish channels the broker closed with an error (a publish there is not retried). */
  private failedChannels = new WeakSet<Channel>();
  /** Publish channels of connections the broker closed with 541 INTERNAL_ERROR. */
  private crashed = new WeakSet<Channel>();
  /** The publish channels opened on each connection. */
  private publishChannels = new WeakMap<ChannelModel, Set<ConfirmChannel>>();
  /** Reply-to channels of callers whose node is down (see callerGone). */
  private goneCallers = new Set<string>();

  constructor(
    url: string,
    private readonly topology: TopologyOptions,
    private readonly log: Logger,
    private readonly publishTimeoutMs = 3000,
    opts: AmqpClientOptions = {},
  ) {
    super();
    this.setMaxListeners(0);
    this.heartbeatS = opts.heartbeatS ?? 5;
    this.urls = amqpUrls(url);
    if (this.urls.length === 0) throw new Error('AMQP_URL names no broker');
    for (const [i, u] of this.urls.entries())
      metrics.amqpConnectedNode.set({ node: amqpEndpoint(u), index: String(i) }, 0);
  }

  get connected(): boolean {
    return !!this.pub;
  }

  /** `host:port` of the node this client is connected to, or undefined. */
  get node(): string | undefined {
    return this.current >= 0 ? amqpEndpoint(this.urls[this.current]!) : undefined;
  }

  /** Connect once (one round over AMQP_URL's nodes); later losses reconnect by themselves. */
  async start(): Promise<void> {
    await this.connect();
  }

  private connect(): Promise<void> {
    this.connecting ??= this.doConnect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** One round: each node once, from `next` on, until one takes the connection and the topology. */
  private async doConnect(): Promise<void> {
    const failures: string[] = [];
    let last: unknown;
    for (let i = 0; i < this.urls.length && !this.closing; i++) {
      const index = (this.next + i) % this.urls.length;
      try {
        await this.connectTo(index);
        return;
      } catch (err) {
        last = err;
        failures.push(`${amqpEndpoint(this.urls[index]!)}: ${(err as Error).message}`);
      }
    }
    if (this.closing) throw new Error('amqp client is closed');
    if (this.lost) metrics.amqpReconnects.inc({ outcome: 'failed' });
    throw this.urls.length === 1
      ? last
      : new Error(`no RabbitMQ node answered (${failures.join('; ')})`, { cause: last });
  }

  private async connectTo(index: number): Promise<void> {
    const url = this.urls[index]!;
    const node = amqpEndpoint(url);
    // noDelay: confirms and small messages must not wait for Nagle's algorithm (40 ms per round trip).
    const conn = await amqp.connect(withHeartbeat(url, this.heartbeatS), { timeout: 5000, noDelay: true });
    // The error comes with the close that follows it: the failover line carries it (one warning).
    conn.on(
      'error',
      outsideWork.bind((err: Error) => this.log.debug('amqp connection error', { node, err })),
    );
    conn.on(
      'close',
      outsideWork.bind((err?: Error) => {
        // After a missed heartbeat amqplib only ends its side of the socket; the stalled peer
        // would keep it half-open indefinitely.
        if (err?.message === 'Heartbeat timeout')
          (conn.connection as unknown as { stream?: { destroy?(): void } }).stream?.destroy?.();
        this.onLost(conn, err);
      }),
    );
    // A memory or disk alarm: publishes fail at once (callers fall back) instead of waiting.
    conn.on(
      'blocked',
      outsideWork.bind((reason: string) => {
        this.blocked = reason || 'resource alarm';
        this.log.warn('amqp connection blocked by the broker', { node, reason });
      }),
    );
    conn.on(
      'unblocked',
      outsideWork.bind(() => {
        this.blocked = undefined;
        this.log.info('amqp connection unblocked', { node });
      }),
    );
    try {
      const setup = await conn.createChannel();
      await declareTopology(setup, this.topology);
      await setup.close();
      const pub = await this.openPublisher(conn);
      this.conn = conn;
      this.pub = pub;
      this.current = index;
      for (const c of this.consumers) await this.startConsumer(c);
      for (const b of this.broadcasts) await this.startBroadcast(b);
    } catch (err) {
      if (this.conn === conn) {
        this.conn = undefined;
        this.pub = undefined;
        this.current = -1;
      }
      await conn.close().catch(() => {});
      throw err;
    }
    this.attempt = 0;
    this.next = index;
    for (const [i, u] of this.urls.entries())
      metrics.amqpConnectedNode.set({ node: amqpEndpoint(u), index: String(i) }, i === index ? 1 : 0);
    const lost = this.lost;
    this.lost = undefined;
    if (lost) {
      metrics.amqpReconnects.inc({ outcome: lost.index === index ? 'same_node' : 'failover' });
      this.log.info('amqp connected', {
        node,
        lostNode: amqpEndpoint(this.urls[lost.index]!),
        downMs: Date.now() - lost.at,
      });
    } else {
      this.log.info('amqp connected', { node });
    }
    this.emit('connected');
    this.wakePublishers();
  }

  /**
   * The confirm channel publishes go through. When the broker closes it alone (a channel error)
   * while the connection lives on, another one is opened on the same connection.
   */
  private async openPublisher(conn: ChannelModel): Promise<ConfirmChannel> {
    const pub = await conn.createConfirmChannel();
    const mine = this.publishChannels.get(conn) ?? new Set<ConfirmChannel>();
    this.publishChannels.set(conn, mine.add(pub));
    pub.once('close', () => setImmediate(() => mine.delete(pub)));
    pub.setMaxListeners(0); // one 'close' listener per publish awaiting its confirm
    pub.on('error', (err) => {
      this.failedChannels.add(pub);
      this.log.warn('amqp publish channel error', { err });
    });
    pub.on('close', () => {
      if (this.pub !== pub) return;
      this.pub = undefined;
      // A lost connection closes its channels first, then itself: look again once it has.
      setImmediate(() => this.reopenPublisher(conn));
    });
    return pub;
  }

  /**
   * A new publish channel on `conn`, unless the connection is gone or another one is open. A
   * failed open is tried again with backoff (100 ms doubling, publishes wait meanwhile); after 5
   * failures in a row the connection is closed, and the reconnect makes a new one.
   */
  private reopenPublisher(conn: ChannelModel, failures = 0) {
    if (this.conn !== conn || this.closing || this.pub) return;
    clearTimeout(this.pubRetry);
    this.pubRetry = undefined;
    this.openPublisher(conn).then(
      (next) => {
        if (this.conn !== conn || this.pub) {
          void next.close().catch(() => {});
          return;
        }
        this.pub = next;
        if (failures > 0) this.log.info('amqp publish channel reopened', { node: this.node, failures });
        this.wakePublishers();
      },
      (err) => {
        if (this.conn !== conn || this.closing || this.pub || this.pubRetry) return;
        if (failures + 1 >= 5) {
          this.log.warn('amqp publish channel not reopened after 5 tries; replacing the connection', {
            node: this.node,
            err: err as Error,
          });
          void conn.close().catch(() => {});
          return;
        }
        const delay = Math.min(5000, 100 * 2 ** failures) * (0.8 + Math.random() * 0.4);
        this.log.warn('amqp publish channel not reopened; trying again', {
          node: this.node,
          delayMs: Math.round(delay),
          err: err as Error,
        });
        this.pubRetry = outsideWork.runInAsyncScope(() =>
          setTimeout(() => {
            this.pubRetry = undefined;
            this.reopenPublisher(conn, failures + 1);
          }, delay),
        );
        this.pubRetry.unref?.();
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
  private replacePublisher(ch: ConfirmChannel) {
    if (this.pub !== ch || !this.conn) return;
    this.log.info('amqp publish channel replaced after a nack', { node: this.node });
    this.pub = undefined;
    ch.close().catch(() => {});
    this.reopenPublisher(this.conn);
  }

  private wakePublishers() {
    for (const wake of [...this.pubWaiters]) wake();
  }

  private onLost(conn: ChannelModel, err?: Error) {
    if ((err as { code?: unknown } | undefined)?.code === INTERNAL_ERROR)
      for (const ch of this.publishChannels.get(conn) ?? []) this.crashed.add(ch);
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.pub = undefined;
    this.blocked = undefined;
    clearTimeout(this.pubRetry);
    this.pubRetry = undefined;
    for (const c of this.consumers) c.channel = undefined;
    this.declaredFanouts.clear();
    for (const b of this.broadcasts) {
      if (!b.channel) continue;
      b.channel = undefined;
      b.hooks.onLost?.();
    }
    const index = this.current;
    this.current = -1;
    for (const [i, u] of this.urls.entries())
      metrics.amqpConnectedNode.set({ node: amqpEndpoint(u), index: String(i) }, 0);
    this.emit('disconnected', err);
    if (this.closing) return;
    // The next round starts with the node after the one that died.
    this.lost = { at: Date.now(), index };
    this.next = (index + 1) % this.urls.length;
    this.log.warn(this.urls.length > 1 ? 'amqp connection lost; failing over' : 'amqp connection lost; reconnecting', {
      node: amqpEndpoint(this.urls[index]!),
      ...(this.urls.length > 1 ? { nextNode: amqpEndpoint(this.urls[this.next]!) } : {}),
      err,
    });
    this.scheduleReconnect();
  }

  private scheduleReconnect() {
    if (this.closing || this.reconnectTimer) return;
    const delay = Math.min(5000, 100 * 2 ** this.attempt++) * (0.8 + Math.random() * 0.4);
    this.reconnectTimer = outsideWork.runInAsyncScope(() =>
      setTimeout(() => {
        this.reconnectTimer = undefined;
        this.connect().catch((err) => {
          this.log.warn('amqp reconnect failed', { err: err as Error });
          this.scheduleReconnect();
        });
      }, delay),
    );
    this.reconnectTimer.unref?.();
  }

  /** The publish channel, once there is one, or a rejection after `ms`. */
  private async ready(ms: number): Promise<ConfirmChannel> {
    if (this.pub) return this.pub;
    if (this.closing) throw new Error('amqp client is closed');
    if (ms <= 0) throw new Error(`amqp not connected after ${this.publishTimeoutMs} ms`);
    return new Promise((resolve, reject) => {
      const wake = () => {
        if (!this.pub && !this.closing) return;
        clearTimeout(t);
        this.pubWaiters.delete(wake);
        this.pub ? resolve(this.pub) : reject(new Error('amqp client is closed'));
      };
      const t = setTimeout(() => {
        this.pubWaiters.delete(wake);
        reject(new Error(`amqp not connected after ${ms} ms`));
      }, ms);
      this.pubWaiters.add(wake);
    });
  }

  /** Publish a persistent message and wait for the broker's confirm. */
  publish(exchange: string, routingKey: string, body: unknown, opts: Options.Publish = {}): Promise<void> {
    return this.publishContent(exchange, routingKey, Buffer.from(JSON.stringify(body)), {
      contentType: 'application/json',
      ...opts,
    });
  }

  /** `publish` of bytes as they are (a streamed reply's audio chunk), with the same confirm and back-pressure. */
  private async publishContent(
    exchange: string,
    routingKey: string,
    content: Buffer,
    opts: Options.Publish,
  ): Promise<void> {
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
   * twice (see the class comment).
   */
  private async publishConfirmed(
    exchange: string,
    routingKey: string,
    content: Buffer,
    opts: Options.Publish,
    span?: Span,
  ): Promise<void> {
    const deadline = Date.now() + this.publishTimeoutMs;
    const kind = this.exchangeKind(exchange, routingKey);
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
        ch = await this.ready(deadline - Date.now());
        if (this.blocked) throw new Error(`the broker blocked publishing (${this.blocked})`);
        await this.drained(deadline);
        outcome = await this.sendOnce(ch, exchange, routingKey, content, opts, deadline);
      } catch (err) {
        observe('failed');
        throw err;
      }
      if (outcome === 'confirmed') break;
      if (outcome === 'lost' && this.crashed.has(ch)) {
        // The broker closed the connection with an internal error: the publish itself may be
        // what it choked on (see markCallerGone), so it is not sent again.
        observe('failed');
        throw Object.assign(
          new Error('the broker closed the connection with an internal error (541) before the publish was confirmed'),
          { code: INTERNAL_ERROR },
        );
      }
      if (Date.now() >= deadline || this.closing) {
        observe('failed');
        throw new Error(
          outcome === 'lost'
            ? 'channel closed before the publish was confirmed'
            : 'the broker refused the publish (nack)',
        );
      }
      metrics.amqpPublishesResent.inc({ exchange: kind, reason: outcome === 'lost' ? 'connection_lost' : 'nacked' });
      this.emit('resent', { exchange, routingKey, reason: outcome === 'lost' ? 'connection_lost' : 'nacked' });
      if (outcome === 'nacked') this.replacePublisher(ch);
      // Never spin: wait a moment when the same channel would be used again.
      if (outcome === 'nacked' || this.pub === ch) await sleep(Math.min(100, Math.max(0, deadline - Date.now())));
    }
    observe('confirmed');
    this.emit('published', { exchange, routingKey });
  }

  /** Back-pressure: while the socket buffer is full, wait for 'drain', never past the deadline. */
  private async drained(deadline: number): Promise<void> {
    while (this.draining !== undefined) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `publish not confirmed within ${this.publishTimeoutMs} ms: the broker is not reading (flow control)`,
        );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.draining, new Promise<void>((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
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
        this.failedChannels.has(ch)
          ? new Error('the broker closed the publish channel with an error before the publish was confirmed')
          : 'lost';
      const onClose = () => finish(lost());
      const timer = setTimeout(
        () => finish(new Error(`publish not confirmed within ${this.publishTimeoutMs} ms`)),
        Math.max(1, deadline - Date.now()),
      );
      ch.once('close', onClose);
      try {
        const ok = ch.publish(exchange, routingKey, content, opts, (err) => {
          if (!err) return finish('confirmed');
          // amqplib fails the confirms still outstanding with 'channel closed' when the channel goes.
          finish(/channel closed/i.test(String((err as Error).message ?? err)) ? lost() : 'nacked');
        });
        if (!ok && !this.draining) {
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
      } catch (err) {
        // The channel closed between our look at it and the send (amqplib throws 'Channel closed').
        finish(/clos(ed|ing)/i.test((err as Error).message) ? lost() : (err as Error));
      }
    });
  }

  /** A bounded label for what a publish went to. */
  private exchangeKind(exchange: string, routingKey: string): string {
    const p = this.topology.prefix;
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

  /** Publish to a pool queue through the default exchange. */
  publishToPool(pool: PoolType, body: unknown, opts: Options.Publish = {}) {
    return this.publish('', broker.poolQueue(this.topology.prefix, pool), body, opts);
  }

  /** Consume a queue with `prefetch` unacked messages at most; survives reconnects. */
  async consume(
    queue: string,
    prefetch: number,
    handler: (d: Delivery) => Promise<void>,
  ): Promise<() => Promise<void>> {
    const c: Consumer = { queue, prefetch, handler };
    this.consumers.push(c);
    if (this.conn) await this.startConsumer(c);
    return async () => {
      this.consumers = this.consumers.filter((x) => x !== c);
      // The channel stays open so messages in flight can still be acked after the cancel;
      // closing the connection returns whatever was never settled.
      const ch = c.channel;
      if (ch && c.tag) await ch.cancel(c.tag).catch(() => {});
    };
  }

  /**
   * Broadcast subscription: a fanout exchange and a private, auto-deleted queue of this process
   * bound to it (no acks). `onReady` runs each time the subscription is (re)established, and
   * `onLost` when the connection drops: messages sent meanwhile never reach this process, so a
   * subscriber that caches must drop its cache there.
   */
  async subscribe(
    exchange: string,
    handler: (body: unknown) => void,
    hooks: { onReady?: () => void; onLost?: () => void } = {},
  ): Promise<() => Promise<void>> {
    const sub: Broadcast = { exchange, handler, hooks };
    this.broadcasts.push(sub);
    if (this.conn) await this.startBroadcast(sub);
    return async () => {
      this.broadcasts = this.broadcasts.filter((x) => x !== sub);
      const ch = sub.channel;
      sub.channel = undefined;
      await ch?.close().catch(() => {});
    };
  }

  /** Publish to a fanout exchange (declared here, idempotently) with a confirm. */
  async broadcast(exchange: string, body: unknown): Promise<void> {
    if (!this.declaredFanouts.has(exchange)) {
      const ch = await this.ready(this.publishTimeoutMs);
      await recording(ch, this.topology.prefix).assertExchange(exchange, 'fanout', { durable: true });
      this.declaredFanouts.add(exchange);
    }
    await this.publish(exchange, '', body, { persistent: false });
  }

  private async startBroadcast(sub: Broadcast) {
    if (!this.conn) return;
    const ch = await this.conn.createChannel();
    ch.on('error', (err) => this.log.warn('amqp broadcast channel error', { exchange: sub.exchange, err }));
    const rec = recording(ch, this.topology.prefix);
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
          if (this.broadcasts.includes(sub))
            this.startBroadcast(sub).catch((err) =>
              this.log.warn('broadcast resubscribe failed', { exchange: sub.exchange, err: err as Error }),
            );
          return;
        }
        let body: unknown;
        try {
          body = JSON.parse(msg.content.toString('utf8'));
        } catch {
          return this.log.warn('broadcast message is not JSON; ignored', { exchange: sub.exchange });
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

  /** Close a consumer's channel: its unacked messages go back to the queue. */
  async closeConsumerChannels(): Promise<void> {
    await Promise.all(this.consumers.map((c) => c.channel?.close().catch(() => {})));
  }

  /**
   * Subscribe consumer `c` on a new channel of `conn`. When the broker stops the consumer while
   * the connection stays up (it closes the channel with an error: 406 after an ack of an unknown
   * delivery tag, 404; or it cancels the consumer: queue deleted, quorum leader moved), it is
   * subscribed again (restartConsumer). After a cancel the old channel stays open until the
   * deliveries in flight on it are settled, then closes.
   */
  private async startConsumer(c: Consumer, conn = this.conn) {
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
      this.log.debug('amqp consumer channel error', { queue: c.queue, err });
    });
    ch.on('close', () => {
      open = false;
      // A lost connection closes its channels first, then itself: look once it has.
      setImmediate(() => {
        if (c.channel !== ch) return;
        c.channel = undefined;
        c.tag = undefined;
        if (failure && this.conn === conn) this.restartConsumer(c, conn, restartReason(failure), failure);
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
            this.emit(event, { queue: c.queue });
          } catch (err) {
            this.log.warn('amqp settle failed', { queue: c.queue, err: err as Error });
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
          this.restartConsumer(c, conn, 'cancelled');
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
          this.log.error('consumer handler crashed; requeueing after a backoff', {
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

  /**
   * The broker stopped consumer `c` while `conn` stays up: counted
   * (amqp_consumer_restarts_total{queue,reason}) and logged (one warning), then the topology is
   * declared again (the queue may have been deleted) and the consumer subscribed on a new channel.
   * A failed try is repeated with backoff while the connection lives (a lost connection restarts
   * every consumer anyway). Restarts in quick succession (a handler that keeps causing channel
   * errors) wait first, 100 ms doubling to 5 s, so they cannot spin.
   */
  private restartConsumer(c: Consumer, conn: ChannelModel, reason: ConsumerRestartReason, err?: Error) {
    if (this.closing || this.conn !== conn || !this.consumers.includes(c)) return;
    const now = Date.now();
    const quick = c.restartedAt !== undefined && now - c.restartedAt < 30_000;
    const delayMs = quick ? Math.min(5000, Math.max(100, (c.restartDelayMs ?? 0) * 2)) : 0;
    c.restartedAt = now;
    c.restartDelayMs = delayMs;
    metrics.amqpConsumerRestarts.inc({ queue: c.queue, reason });
    this.log.warn('amqp consumer stopped by the broker; subscribing again', {
      queue: c.queue,
      reason,
      node: this.node,
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
    const gone = () => this.closing || this.conn !== conn || !this.consumers.includes(c) || !!c.channel;
    for (let failures = 0; ; failures++) {
      if (delayMs > 0) await sleep(delayMs * (0.8 + Math.random() * 0.4));
      if (gone()) return;
      try {
        const setup = await conn.createChannel();
        setup.on('error', () => {}); // a declaration refused: thrown by it
        try {
          await declareTopology(setup, this.topology);
        } finally {
          await setup.close().catch(() => {});
        }
        if (gone()) return;
        await this.startConsumer(c, conn);
        this.emit('consumerRestarted', { queue: c.queue, reason });
        return;
      } catch (err) {
        delayMs = Math.min(5000, Math.max(100, delayMs * 2));
        const log = failures % 10 === 9 ? this.log.warn.bind(this.log) : this.log.debug.bind(this.log);
        log('amqp consumer not subscribed again yet; trying again', {
          queue: c.queue,
          failures: failures + 1,
          err: err as Error,
        });
      }
    }
  }

  // --- Request/reply (RPC) over RabbitMQ direct reply-to --------------------------------
  private rpcChannel?: Channel;
  private rpcOpening?: Promise<Channel>;
  private rpcPending = new Map<string, PendingRpc>();
  private rpcSeq = 0;

  /** The channel that publishes requests and consumes `amq.rabbitmq.reply-to` (both must be one channel). */
  private async replyChannel(): Promise<Channel> {
    if (this.rpcChannel) return this.rpcChannel;
    this.rpcOpening ??= (async () => {
      await this.ready(this.publishTimeoutMs);
      if (!this.conn) throw new Error('amqp not connected');
      const ch = await this.conn.createChannel();
      ch.on('error', (err) => this.log.warn('amqp reply channel error', { err }));
      ch.on('close', () => {
        if (this.rpcChannel === ch) this.rpcChannel = undefined;
        // Replies are bound to the channel: requests sent on it can no longer be answered.
        for (const [id, p] of this.rpcPending) {
          if (p.channel !== ch) continue;
          clearTimeout(p.timer);
          p.unlink?.();
          this.rpcPending.delete(id);
          p.reject(new Error('the reply channel closed before the answer came'));
        }
      });
      await ch.consume(
        RPC_REPLY_TO,
        (msg) => {
          if (!msg) return;
          const id = msg.properties.correlationId as string;
          const p = this.rpcPending.get(id);
          if (!p) return; // late answer to a request that already timed out
          const finish = (outcome: { reply: RpcReply } | { err: Error }) => {
            clearTimeout(p.timer);
            p.unlink?.();
            this.rpcPending.delete(id);
            'reply' in outcome ? p.resolve(outcome.reply) : p.reject(outcome.err);
          };
          if (msg.properties.type === RPC_CHUNK_TYPE) {
            if (!p.stream) return; // a single-answer caller never asked for chunks
            // One publisher, one channel, one consumer: chunks arrive in order or not at all,
            // but a chunk the responder sent again after a failover may arrive twice.
            const seq = Number(msg.properties.headers?.['x-seq']);
            if (seq < p.stream.received) return;
            if (seq !== p.stream.received)
              return finish({
                err: new Error(`streamed reply chunk ${seq} arrived when ${p.stream.received} was due`),
              });
            p.stream.received++;
            try {
              p.stream.onChunk(msg.content, seq);
            } catch (err) {
              finish({ err: err as Error });
            }
            return;
          }
          let reply: RpcReply;
          try {
            reply = JSON.parse(msg.content.toString('utf8')) as RpcReply;
          } catch (err) {
            return finish({ err: new Error(`malformed reply: ${(err as Error).message}`) });
          }
          const sent = Number(msg.properties.headers?.['x-chunks'] ?? 0);
          if (p.stream && sent !== p.stream.received)
            return finish({ err: new Error(`streamed reply ended after ${p.stream.received} of ${sent} chunks`) });
          finish({ reply });
        },
        { noAck: true },
      );
      this.rpcChannel = ch;
      return ch;
    })().finally(() => {
      this.rpcOpening = undefined;
    });
    return this.rpcOpening;
  }

  /**
   * Send `payload` to a pool queue and wait for the worker's answer, at most `timeoutMs`
   * (then RpcTimeoutError). The request is transient and carries its deadline in `x-deadline`;
   * a responder acks a request past its deadline without running it. (No per-message TTL: the
   * pool queues dead-letter expired messages, and a stale request is not a poison message.)
   */
  rpc<T = unknown>(pool: PoolType, payload: unknown, timeoutMs: number): Promise<RpcReply<T>> {
    return this.request<T>(pool, payload, timeoutMs);
  }

  /**
   * `rpc` whose answer comes in parts: the responder sends chunks of bytes (`meta.send`), each
   * handed to `onChunk` in order as it arrives, then its final reply, which this resolves with.
   * `timeoutMs` bounds the whole exchange, first chunk to final reply (RpcTimeoutError; the
   * caller counts the chunks it got to tell "nothing came" from "cut short"). A chunk out of
   * order, a final reply that counts more chunks than arrived, or `onChunk` throwing rejects at
   * once; `signal` gives up (rejects with its reason). Chunks are not acknowledged one by one:
   * a caller that cannot keep up buffers them (a responder's stream must be bounded).
   */
  rpcStream<T = unknown>(
    pool: PoolType,
    payload: unknown,
    timeoutMs: number,
    onChunk: (data: Buffer, seq: number) => void,
    opts: { signal?: AbortSignal } = {},
  ): Promise<RpcReply<T>> {
    return this.request<T>(pool, payload, timeoutMs, { onChunk, signal: opts.signal });
  }

  /**
   * Unlike a publish, a request is never sent again after a failover. Its answer is addressed to
   * the reply channel of the connection that died, so only a new request (new correlation id)
   * could be answered; but the first may already be running on a worker (it only expires at its
   * deadline), so sending again could run the work twice for a caller that is about to time out.
   * The call fails at once instead ('the reply channel closed before the answer came': the API
   * answers 503 and the client retries), as it does while the broker is away.
   */
  private async request<T>(
    pool: PoolType,
    payload: unknown,
    timeoutMs: number,
    stream?: { onChunk: (data: Buffer, seq: number) => void; signal?: AbortSignal },
  ): Promise<RpcReply<T>> {
    stream?.signal?.throwIfAborted();
    const ch = await this.replyChannel();
    // The abort listener is added below; an abort while the channel opened would be lost.
    stream?.signal?.throwIfAborted();
    const correlationId = `${process.pid}.${Date.now().toString(36)}.${(this.rpcSeq++).toString(36)}`;
    const deadline = Date.now() + timeoutMs;
    const answer = new Promise<RpcReply<T>>((resolve, reject) => {
      // Give up only once the wall clock is past the deadline the responder checks (timers can
      // fire a little early), so a request the caller abandoned is always stale to a worker.
      const expire = () => {
        const left = deadline - Date.now();
        const p = this.rpcPending.get(correlationId);
        if (left >= 0) {
          if (p) p.timer = setTimeout(expire, left + 1);
          return;
        }
        p?.unlink?.();
        this.rpcPending.delete(correlationId);
        reject(
          new RpcTimeoutError(`no ${stream ? 'complete ' : ''}answer from the ${pool} pool within ${timeoutMs} ms`),
        );
      };
      const timer = setTimeout(expire, timeoutMs);
      const pending: PendingRpc = { resolve: resolve as (r: RpcReply) => void, reject, timer, channel: ch };
      if (stream) {
        pending.stream = { onChunk: stream.onChunk, received: 0 };
        const signal = stream.signal;
        if (signal) {
          const onAbort = () => {
            const p = this.rpcPending.get(correlationId);
            if (!p) return;
            clearTimeout(p.timer);
            this.rpcPending.delete(correlationId);
            reject(signal.reason instanceof Error ? signal.reason : new Error('the caller gave up'));
          };
          signal.addEventListener('abort', onAbort, { once: true });
          pending.unlink = () => signal.removeEventListener('abort', onAbort);
        }
      }
      this.rpcPending.set(correlationId, pending);
    });
    const content = Buffer.from(JSON.stringify(payload));
    // A request is not confirmed: its producer span ends once it is written.
    const span = tracingOn
      ? producerSpan('', broker.poolQueue(this.topology.prefix, pool), {}, content.length)
      : undefined;
    try {
      ch.publish('', broker.poolQueue(this.topology.prefix, pool), content, {
        correlationId,
        replyTo: RPC_REPLY_TO,
        persistent: false,
        contentType: 'application/json',
        headers: contextHeaders({ 'x-deadline': deadline }, span),
      });
      endSpan(span);
    } catch (err) {
      endSpan(span, err);
      const p = this.rpcPending.get(correlationId);
      if (p) {
        clearTimeout(p.timer);
        p.unlink?.();
        this.rpcPending.delete(correlationId);
      }
      throw err;
    }
    this.emit('published', { exchange: '', routingKey: broker.poolQueue(this.topology.prefix, pool) });
    return answer;
  }

  /**
   * The worker side of `rpc` and `rpcStream`: consume a pool queue, hand each request to
   * `handler`, publish its answer to the request's reply-to with the same correlation id, then
   * ack. `meta.send` streams a chunk of bytes ahead of the answer (confirmed before it resolves,
   * so chunks keep their order); the answer then says how many were sent. A request past its
   * deadline is acked unanswered (the caller already gave up); one without reply-to is dead-lettered.
   */
  respond(
    queue: string,
    prefetch: number,
    handler: (payload: unknown, meta: RespondMeta) => Promise<RpcReply>,
  ): Promise<() => Promise<void>> {
    return this.consume(queue, prefetch, async (d) => {
      const { replyTo, correlationId, headers } = d.msg.properties;
      // Nobody could read its answer: dead-lettered, and said (a publisher that is not an rpc caller).
      if (!replyTo || !correlationId) return deadLetter(d, 'no_reply_to', { queue, log: this.log });
      const deadline = Number(headers?.['x-deadline']) || null;
      if (deadline !== null && Date.now() > deadline) return d.ack();
      if (this.callerGone(replyTo as string)) return d.ack();
      let payload: unknown;
      try {
        payload = JSON.parse(d.msg.content.toString('utf8'));
      } catch {
        payload = undefined;
      }
      let chunks = 0;
      const send = async (data: Buffer) => {
        const seq = chunks++;
        await this.publishContent('', replyTo as string, data, {
          correlationId: correlationId as string,
          persistent: false,
          type: RPC_CHUNK_TYPE,
          contentType: 'application/octet-stream',
          headers: { 'x-seq': seq },
        }).catch((err: unknown) => {
          this.markCallerGone(replyTo as string, err);
          throw err;
        });
      };
      const reply: RpcReply =
        payload === undefined
          ? { ok: false, error: { code: 'validation_error', message: 'request is not JSON' } }
          : await handler(payload, { deadline, redelivered: d.msg.fields.redelivered, send });
      // Settled before the answer goes: an answer that cannot be delivered (or that takes the
      // connection down with it, below) must not make the request run again.
      d.ack();
      try {
        await this.publish('', replyTo as string, reply, {
          correlationId: correlationId as string,
          persistent: false,
          headers: { 'x-chunks': chunks },
        });
      } catch (err) {
        // The caller is gone or the broker is away: the caller times out on its own.
        this.markCallerGone(replyTo as string, err);
        this.log.warn('rpc reply not delivered', { queue, err: err as Error });
      }
    });
  }

  /**
   * The reply-to of a request whose caller is known to be unreachable. Measured on RabbitMQ 3.10:
   * publishing to the direct reply-to of a channel whose node is down makes the broker close the
   * publisher's connection (541 INTERNAL_ERROR), so every answer to a caller of a dead node would
   * cost the worker its connection (and redeliver whatever else it holds). After the first such
   * loss, requests with that reply-to (one per caller channel) are acked unanswered: their caller
   * is gone with its node, and a restarted node's channels have new reply-to names.
   */
  private callerGone(replyTo: string): boolean {
    return this.goneCallers.has(replyChannelOf(replyTo));
  }

  private markCallerGone(replyTo: string, err: unknown) {
    if ((err as { code?: unknown })?.code !== INTERNAL_ERROR) return;
    const key = replyChannelOf(replyTo);
    if (!key || this.goneCallers.has(key)) return;
    this.goneCallers.add(key);
    if (this.goneCallers.size > 1000) this.goneCallers.delete(this.goneCallers.values().next().value!);
    this.log.warn('rpc caller unreachable (its node is down): its requests are dropped unanswered');
  }

  /** Messages ready in a queue, or null when the broker is away. */
  async queueDepth(queue: string): Promise<number | null> {
    if (!this.conn) return null;
    let ch: Channel | undefined;
    try {
      ch = await this.conn.createChannel();
      ch.on('error', () => {});
      const q = await ch.checkQueue(queue);
      return q.messageCount;
    } catch {
      return null;
    } finally {
      await ch?.close().catch(() => {});
    }
  }

  /** Cheap liveness probe for /readyz. */
  isReady(): boolean {
    return this.connected;
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.pubRetry);
    this.wakePublishers();
    await this.connecting?.catch(() => {});
    const conn = this.conn;
    this.conn = undefined;
    this.pub = undefined;
    this.current = -1;
    for (const [i, u] of this.urls.entries())
      metrics.amqpConnectedNode.set({ node: amqpEndpoint(u), index: String(i) }, 0);
    await conn?.close().catch(() => {});
  }
}

/** Every queue and exchange declared in this process, by prefix (tests delete them afterwards). */
export const declaredNames = new Map<string, { queues: Set<string>; exchanges: Set<string> }>();

const recording = (ch: Channel, prefix: string): Channel => {
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

/** RabbitMQ's direct reply-to pseudo-queue. */
export const RPC_REPLY_TO = 'amq.rabbitmq.reply-to';

/** AMQP 0-9-1 connection exception 541: the broker failed internally and closed the connection. */
const INTERNAL_ERROR = 541;

/** The caller channel a direct reply-to address names (`amq.rabbitmq.reply-to.<channel>.<key>`), or ''. */
const replyChannelOf = (replyTo: string) =>
  replyTo.startsWith(`${RPC_REPLY_TO}.`) ? (replyTo.slice(RPC_REPLY_TO.length + 1).split('.')[0] ?? '') : '';

/** The AMQP `type` of a streamed reply's chunk (bytes, header `x-seq` from 0); the final reply has none. */
export const RPC_CHUNK_TYPE = 'rpc.chunk';

export interface RespondMeta {
  deadline: number | null;
  redelivered: boolean;
  /** Stream a chunk of bytes to the caller ahead of the answer (`rpcStream`); resolves on the broker's confirm. */
  send(data: Buffer): Promise<void>;
}

interface PendingRpc {
  resolve(r: RpcReply): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
  channel: Channel;
  /** Set for `rpcStream`: where chunks go and how many came. */
  stream?: { onChunk: (data: Buffer, seq: number) => void; received: number };
  /** Removes the abort listener. */
  unlink?: () => void;
}

/** What a responder answers: a result, or an error with a stable AppError code. */
export type RpcReply<T = unknown> = { ok: true; result: T } | { ok: false; error: { code: string; message: string } };

/** No answer within the deadline. */
export class RpcTimeoutError extends Error {
  override name = 'RpcTimeoutError';
}
