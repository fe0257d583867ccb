import { EventEmitter } from 'node:events';
import type { Options } from 'amqplib';
import { broker, type PoolType } from '../../contracts/registry';
import { BroadcastSubscriptions } from './amqp-broadcasts';
import { AmqpConnection } from './amqp-connection';
import { ConsumerRegistry } from './amqp-consumers';
import type { AmqpEvents, Delivery } from './amqp-link';
import { PublishChannels } from './amqp-publish-channels';
import { ConfirmPublisher } from './amqp-publisher';
import { type RespondMeta, RpcCaller, type RpcReply, RpcResponder } from './amqp-rpc';
import { readyMessages, type TopologyOptions } from './amqp-topology';
import type { Logger } from './log';

// The client's parts live in amqp-*.ts; what the rest of the code imports is re-exported here.
export { amqpEndpoint, amqpUrls, connectAny } from './amqp-nodes';
export type { Delivery } from './amqp-link';
export { RPC_CHUNK_TYPE, type RpcReply, RpcTimeoutError } from './amqp-rpc';
export { declaredNames, poolQueueArgs, type TopologyOptions } from './amqp-topology';

/** Options of an AmqpClient besides its URL, topology and log. */
export interface AmqpClientOptions {
  /** AMQP heartbeat asked for on every connection, in seconds (config AMQP_HEARTBEAT_S; default 5). */
  heartbeatS?: number;
}

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
 *
 * The parts: the connection and its failover (AmqpConnection), the publish channel
 * (PublishChannels) and the confirms (ConfirmPublisher), the consumers and their recovery
 * (ConsumerRegistry), the broadcasts (BroadcastSubscriptions), and request/reply (RpcCaller,
 * RpcResponder). They share the connection's state through AmqpLink (amqp-link.ts).
 */
export class AmqpClient extends EventEmitter<AmqpEvents> {
  private readonly connection: AmqpConnection;
  private readonly publishChannels: PublishChannels;
  private readonly publisher: ConfirmPublisher;
  private readonly consumers: ConsumerRegistry;
  private readonly broadcasts: BroadcastSubscriptions;
  private readonly caller: RpcCaller;
  private readonly responder: RpcResponder;

  constructor(
    url: string,
    private readonly topology: TopologyOptions,
    log: Logger,
    publishTimeoutMs = 3000,
    opts: AmqpClientOptions = {},
  ) {
    super();
    this.setMaxListeners(0);
    const link = new AmqpConnection(url, topology, log, this, publishTimeoutMs, opts.heartbeatS ?? 5);
    this.connection = link;
    this.publishChannels = new PublishChannels(link);
    this.publisher = new ConfirmPublisher(link, this.publishChannels);
    this.consumers = new ConsumerRegistry(link);
    this.broadcasts = new BroadcastSubscriptions(link, this.publishChannels, this.publisher);
    this.caller = new RpcCaller(link, this.publishChannels);
    this.responder = new RpcResponder(link, this.consumers, this.publisher);
    link.attach({ channels: this.publishChannels, consumers: this.consumers, broadcasts: this.broadcasts });
  }

  get connected(): boolean {
    return !!this.publishChannels.current;
  }

  /** `host:port` of the node this client is connected to, or undefined. */
  get node(): string | undefined {
    return this.connection.node;
  }

  /** Connect once (one round over AMQP_URL's nodes); later losses reconnect by themselves. */
  async start(): Promise<void> {
    await this.connection.connect();
  }

  /** Publish a persistent message and wait for the broker's confirm. */
  publish(exchange: string, routingKey: string, body: unknown, opts: Options.Publish = {}): Promise<void> {
    return this.publisher.publish(exchange, routingKey, body, opts);
  }

  /** Publish to a pool queue through the default exchange. */
  publishToPool(pool: PoolType, body: unknown, opts: Options.Publish = {}) {
    return this.publish('', broker.poolQueue(this.topology.prefix, pool), body, opts);
  }

  /** Consume a queue with `prefetch` unacked messages at most; survives reconnects. */
  consume(queue: string, prefetch: number, handler: (d: Delivery) => Promise<void>): Promise<() => Promise<void>> {
    return this.consumers.consume(queue, prefetch, handler);
  }

  /**
   * Broadcast subscription: a fanout exchange and a private, auto-deleted queue of this process
   * bound to it (no acks). `onReady` runs each time the subscription is (re)established, and
   * `onLost` when the connection drops: messages sent meanwhile never reach this process, so a
   * subscriber that caches must drop its cache there.
   */
  subscribe(
    exchange: string,
    handler: (body: unknown) => void,
    hooks: { onReady?: () => void; onLost?: () => void } = {},
  ): Promise<() => Promise<void>> {
    return this.broadcasts.subscribe(exchange, handler, hooks);
  }

  /** Publish to a fanout exchange (declared here, idempotently) with a confirm. */
  broadcast(exchange: string, body: unknown): Promise<void> {
    return this.broadcasts.broadcast(exchange, body);
  }

  /** Close a consumer's channel: its unacked messages go back to the queue. */
  closeConsumerChannels(): Promise<void> {
    return this.consumers.closeChannels();
  }

  /**
   * Send `payload` to a pool queue and wait for the worker's answer, at most `timeoutMs`
   * (then RpcTimeoutError). The request is transient and carries its deadline in `x-deadline`;
   * a responder acks a request past its deadline without running it. (No per-message TTL: the
   * pool queues dead-letter expired messages, and a stale request is not a poison message.)
   */
  rpc<T = unknown>(pool: PoolType, payload: unknown, timeoutMs: number): Promise<RpcReply<T>> {
    return this.caller.request<T>(pool, payload, timeoutMs);
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
    return this.caller.request<T>(pool, payload, timeoutMs, { onChunk, signal: opts.signal });
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
    return this.responder.respond(queue, prefetch, handler);
  }

  /** Messages ready in a queue, or null when the broker is away. */
  queueDepth(queue: string): Promise<number | null> {
    return readyMessages(this.connection.conn, queue);
  }

  /** Cheap liveness probe for /readyz. */
  isReady(): boolean {
    return this.connected;
  }

  close(): Promise<void> {
    return this.connection.close();
  }
}
