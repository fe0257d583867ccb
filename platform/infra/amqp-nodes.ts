import amqp, { type ChannelModel, type Options } from 'amqplib';
import { metrics } from '../../monitoring/metrics';
import { outsideWork } from './amqp-link';
import type { Logger } from './log';

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

/**
 * A connection to `url` asking for the AMQP heartbeat, its events routed: `lost` when it closes
 * (with the error that closed it, if any), `blocked` with the broker's reason while a memory or
 * disk alarm blocks publishing (undefined once it is lifted).
 */
export async function openConnection(
  url: string,
  heartbeatS: number,
  log: Logger,
  on: { lost(conn: ChannelModel, err?: Error): void; blocked(reason: string | undefined): void },
): Promise<ChannelModel> {
  const node = amqpEndpoint(url);
  // noDelay: confirms and small messages must not wait for Nagle's algorithm (40 ms per round trip).
  const conn = await amqp.connect(withHeartbeat(url, heartbeatS), { timeout: 5000, noDelay: true });
  // The error comes with the close that follows it: the failover line carries it (one warning).
  conn.on(
    'error',
    outsideWork.bind((err: Error) => log.debug('amqp connection error', { node, err })),
  );
  conn.on(
    'close',
    outsideWork.bind((err?: Error) => {
      // After a missed heartbeat amqplib only ends its side of the socket; the stalled peer
      // would keep it half-open indefinitely.
      if (err?.message === 'Heartbeat timeout')
        (conn.connection as unknown as { stream?: { destroy?(): void } }).stream?.destroy?.();
      on.lost(conn, err);
    }),
  );
  // A memory or disk alarm: publishes fail at once (callers fall back) instead of waiting.
  conn.on(
    'blocked',
    outsideWork.bind((reason: string) => {
      on.blocked(reason || 'resource alarm');
      log.warn('amqp connection blocked by the broker', { node, reason });
    }),
  );
  conn.on(
    'unblocked',
    outsideWork.bind(() => {
      on.blocked(undefined);
      log.info('amqp connection unblocked', { node });
    }),
  );
  return conn;
}

/**
 * AMQP_URL's nodes as a client goes round them: the node connected to, the node the next round
 * starts with (after a loss, the one after the node lost), when and where the last connection
 * was lost, and the amqp_connected_node gauge.
 */
export class BrokerNodes {
  readonly urls: string[];
  /** Index in `urls` of the node connected to (-1: none), and of the node a round starts with. */
  private current = -1;
  private next = 0;
  /** When the last connection was lost, and to which node (for the failover log line and metric). */
  lost?: { at: number; index: number };

  constructor(url: string) {
    this.urls = amqpUrls(url);
    if (this.urls.length === 0) throw new Error('AMQP_URL names no broker');
    this.show(-1);
  }

  /** `host:port` of the node connected to, or undefined. */
  get node(): string | undefined {
    return this.current >= 0 ? this.endpoint(this.current) : undefined;
  }

  /** `host:port` of node `index`. */
  endpoint(index: number): string {
    return amqpEndpoint(this.urls[index]!);
  }

  /** The index of the `i`th node of a round. */
  nth(i: number): number {
    return (this.next + i) % this.urls.length;
  }

  /** The node whose connection is in use (-1: none). */
  use(index: number) {
    this.current = index;
  }

  /** The connection to node `index` is set up: rounds start there now; the loss it ends is counted and logged. */
  connected(index: number, log: Logger) {
    this.next = index;
    this.show(index);
    const lost = this.lost;
    this.lost = undefined;
    const node = this.endpoint(index);
    if (lost) {
      metrics.amqpReconnects.inc({ outcome: lost.index === index ? 'same_node' : 'failover' });
      log.info('amqp connected', {
        node,
        lostNode: this.endpoint(lost.index),
        downMs: Date.now() - lost.at,
      });
    } else {
      log.info('amqp connected', { node });
    }
  }

  /** No connection in use any more: the index of the node it was to. */
  drop(): number {
    const index = this.current;
    this.current = -1;
    this.show(-1);
    return index;
  }

  /** The connection to node `index` was lost: the next round starts with the node after it (returned). */
  lose(index: number): number {
    this.lost = { at: Date.now(), index };
    this.next = (index + 1) % this.urls.length;
    return this.next;
  }

  /** amqp_connected_node: 1 for the node at `index` (-1: none), 0 for the others. */
  private show(index: number) {
    for (const [i, u] of this.urls.entries())
      metrics.amqpConnectedNode.set({ node: amqpEndpoint(u), index: String(i) }, i === index ? 1 : 0);
  }
}
