import type { EventEmitter } from 'node:events';
import type { ChannelModel } from 'amqplib';
import { metrics } from '../../monitoring/metrics';
import type { BroadcastSubscriptions } from './amqp-broadcasts';
import type { ConsumerRegistry } from './amqp-consumers';
import { type AmqpEvents, type AmqpLink, outsideWork } from './amqp-link';
import { BrokerNodes, openConnection } from './amqp-nodes';
import type { PublishChannels } from './amqp-publish-channels';
import { declareTopology, type TopologyOptions } from './amqp-topology';
import type { Logger } from './log';

/** What each connection sets up (after the topology), and what is dropped when it goes. */
export interface ConnectionParts {
  channels: PublishChannels;
  consumers: ConsumerRegistry;
  broadcasts: BroadcastSubscriptions;
}

/**
 * The connection of an AmqpClient and its failover over AMQP_URL's nodes (see AmqpClient): the
 * rounds over the nodes, the backoff between them, the loss of a connection, and what the parts
 * read of it (AmqpLink). `conn`, `closing` and `blocked` are written here only.
 */
export class AmqpConnection implements AmqpLink {
  conn?: ChannelModel;
  closing = false;
  blocked?: string;
  private parts!: ConnectionParts;
  private connecting?: Promise<void>;
  private reconnectTimer?: NodeJS.Timeout;
  private attempt = 0;
  private readonly nodes: BrokerNodes;

  constructor(
    url: string,
    readonly topology: TopologyOptions,
    readonly log: Logger,
    readonly events: EventEmitter<AmqpEvents>,
    readonly publishTimeoutMs: number,
    private readonly heartbeatS: number,
  ) {
    this.nodes = new BrokerNodes(url);
  }

  /** The parts set up on each connection (they are built with this connection, hence not in the constructor). */
  attach(parts: ConnectionParts) {
    this.parts = parts;
  }

  /** `host:port` of the node this client is connected to, or undefined. */
  get node(): string | undefined {
    return this.nodes.node;
  }

  connect(): Promise<void> {
    this.connecting ??= this.doConnect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** One round: each node once, from `next` on, until one takes the connection and the topology. */
  private async doConnect(): Promise<void> {
    const failures: string[] = [];
    let last: unknown;
    for (let i = 0; i < this.nodes.urls.length && !this.closing; i++) {
      const index = this.nodes.nth(i);
      try {
        await this.connectTo(index);
        return;
      } catch (err) {
        last = err;
        failures.push(`${this.nodes.endpoint(index)}: ${(err as Error).message}`);
      }
    }
    if (this.closing) throw new Error('amqp client is closed');
    if (this.nodes.lost) metrics.amqpReconnects.inc({ outcome: 'failed' });
    throw this.nodes.urls.length === 1
      ? last
      : new Error(`no RabbitMQ node answered (${failures.join('; ')})`, { cause: last });
  }

  private async connectTo(index: number): Promise<void> {
    const url = this.nodes.urls[index]!;
    const conn = await openConnection(url, this.heartbeatS, this.log, {
      lost: (c, err) => this.onLost(c, err),
      blocked: (reason) => {
        this.blocked = reason;
      },
    });
    try {
      const setup = await conn.createChannel();
      await declareTopology(setup, this.topology);
      await setup.close();
      const pub = await this.parts.channels.open(conn);
      this.conn = conn;
      this.parts.channels.current = pub;
      this.nodes.use(index);
      await this.parts.consumers.startAll(conn);
      await this.parts.broadcasts.startAll();
    } catch (err) {
      if (this.conn === conn) {
        this.conn = undefined;
        this.parts.channels.current = undefined;
        this.nodes.use(-1);
      }
      await conn.close().catch(() => {});
      throw err;
    }
    this.attempt = 0;
    this.nodes.connected(index, this.log);
    this.events.emit('connected');
    this.parts.channels.wake();
  }

  private onLost(conn: ChannelModel, err?: Error) {
    this.parts.channels.connectionClosed(conn, err);
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.blocked = undefined;
    this.parts.channels.detach();
    this.parts.consumers.detach();
    this.parts.broadcasts.detach();
    const index = this.nodes.drop();
    this.events.emit('disconnected', err);
    if (this.closing) return;
    // The next round starts with the node after the one that died.
    const next = this.nodes.lose(index);
    const several = this.nodes.urls.length > 1;
    this.log.warn(several ? 'amqp connection lost; failing over' : 'amqp connection lost; reconnecting', {
      node: this.nodes.endpoint(index),
      ...(several ? { nextNode: this.nodes.endpoint(next) } : {}),
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

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    this.parts.channels.stopRetry();
    this.parts.channels.wake();
    await this.connecting?.catch(() => {});
    const conn = this.conn;
    this.conn = undefined;
    this.parts.channels.current = undefined;
    this.nodes.drop();
    await conn?.close().catch(() => {});
  }
}
