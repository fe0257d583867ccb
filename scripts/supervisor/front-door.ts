import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Logger } from '../../platform/infra/log';
import type { ToApi } from '../../platform/infra/supervision';

/** An API process that takes connections, over its IPC channel. */
export interface Backend {
  name: string;
  /** Send one connection; `done` says whether the message left (not whether it was taken). */
  send(message: Extract<ToApi, { t: 'conn' }>, socket: net.Socket, done: (err: Error | null) => void): void;
  /** Any other message (metrics gathering). */
  tell(message: ToApi): void;
}

export interface FrontDoorOptions {
  /** How long a connection may wait for a ready API process before it is answered 503. */
  holdMs: number;
  /** Most connections held at once; past it a new one is answered 503 at once. */
  maxHeld: number;
  /** How long an API process may take to acknowledge a connection before it gets no more. */
  ackMs?: number;
  log: Logger;
  registry: Registry;
}

interface InTransit {
  socket: net.Socket;
  backend: Backend;
  outcome: 'handed' | 'held_then_handed';
  timer: NodeJS.Timeout;
}

interface Held {
  socket: net.Socket;
  since: bigint;
  timer: NodeJS.Timeout;
}

/**
 * The port clients connect to. It accepts every connection without reading from it
 * (`pauseOnConnect`) and hands it to the next ready API process in turn, which serves it as if
 * it had accepted it itself; this is what node:cluster's round robin does, except that while no
 * API process is ready (all crashed and being replaced, or still starting) connections are held
 * here instead of refused, up to `holdMs` and `maxHeld`, then answered 503 with Retry-After.
 *
 * Node's IPC keeps a handle it sent until the receiver acknowledges it, and a receiver that died
 * never does: the client would wait forever. So the door keeps its copy of each connection
 * (`keepOpen`) until the process says it took it (`took`, sent in the same tick it receives the
 * socket, before reading a byte of it), and gives it to another process if the first one's IPC
 * channel closes first (`remove(…, { dead: true })`). A process that does not acknowledge within
 * `ackMs` (wedged) gets no new connections until it acknowledges again; what it holds stays with
 * it, since it may be reading it.
 */
export class FrontDoor {
  private readonly server = net.createServer({ pauseOnConnect: true, noDelay: true }, (s) => this.accept(s));
  private ready: Backend[] = [];
  /** Ready processes that stopped acknowledging: skipped until they do. */
  private suspended = new Set<Backend>();
  private turn = 0;
  private held: Held[] = [];
  private inTransit = new Map<number, InTransit>();
  private seq = 0;
  private closed = false;
  private readonly connections: Counter<'outcome'>;
  private readonly holdSeconds: Histogram;

  constructor(private readonly opts: FrontDoorOptions) {
    const metrics = doorMetrics(
      opts.registry,
      () => this.held.length,
      () => this.serving().length,
    );
    this.connections = metrics.connections;
    this.holdSeconds = metrics.holdSeconds;
  }

  listen(port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  /** The ready API processes (for the metrics gathering). */
  backends(): readonly Backend[] {
    return this.ready;
  }

  /** `backend` is ready: it takes its share of new connections and every held one. */
  add(backend: Backend): void {
    if (!this.ready.includes(backend)) this.ready.push(backend);
    this.suspended.delete(backend);
    const waiting = this.held;
    this.held = [];
    for (const h of waiting) {
      clearTimeout(h.timer);
      this.holdSeconds.observe(Number(process.hrtime.bigint() - h.since) / 1e9);
      this.handOver(h.socket, 'held_then_handed');
    }
  }

  /**
   * `backend` stops taking connections (it is draining). `dead`: its IPC channel is gone, so the
   * connections it never acknowledged go to another process: it never read them.
   */
  remove(backend: Backend, opts: { dead?: boolean } = {}): void {
    this.ready = this.ready.filter((b) => b !== backend);
    this.suspended.delete(backend);
    if (!opts.dead) return;
    for (const [seq, t] of this.inTransit) {
      if (t.backend !== backend) continue;
      this.inTransit.delete(seq);
      clearTimeout(t.timer);
      this.handOver(t.socket, t.outcome);
    }
  }

  /** The API process has connection `seq`: close our copy (its own descriptor stays open). */
  took(seq: number, from: Backend): void {
    // It answers again: back in turn if it had been skipped.
    if (this.suspended.delete(from))
      this.opts.log.info('api process acknowledges connections again', { backend: from.name });
    const t = this.inTransit.get(seq);
    if (!t) return;
    this.inTransit.delete(seq);
    clearTimeout(t.timer);
    this.connections.inc({ outcome: t.outcome });
    t.socket.destroy();
  }

  /** Stop accepting; held connections are answered 503. */
  close(): Promise<void> {
    this.closed = true;
    for (const t of this.inTransit.values()) {
      clearTimeout(t.timer);
      t.socket.destroy();
    }
    this.inTransit.clear();
    for (const h of this.held.splice(0)) {
      clearTimeout(h.timer);
      this.refuse(h.socket, 'closed', 'the service is stopping');
    }
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private serving(): Backend[] {
    return this.ready.filter((b) => !this.suspended.has(b));
  }

  private accept(socket: net.Socket) {
    // A client that resets while its connection is held or in transit: nothing to do.
    socket.on('error', () => {});
    if (this.closed) return this.refuse(socket, 'closed', 'the service is stopping');
    this.handOver(socket, 'handed');
  }

  private hold(socket: net.Socket) {
    if (this.held.length >= this.opts.maxHeld)
      return this.refuse(socket, 'refused_full', 'no API process is ready and too many connections are waiting');
    const h: Held = {
      socket,
      since: process.hrtime.bigint(),
      timer: setTimeout(() => {
        this.held = this.held.filter((x) => x !== h);
        this.refuse(socket, 'refused_timeout', `no API process was ready within ${this.opts.holdMs} ms`);
      }, this.opts.holdMs),
    };
    this.held.push(h);
  }

  private handOver(socket: net.Socket, outcome: 'handed' | 'held_then_handed') {
    const serving = this.serving();
    if (!serving.length) return this.hold(socket);
    const backend = serving[this.turn++ % serving.length]!;
    const seq = ++this.seq;
    const timer = setTimeout(() => {
      if (!this.inTransit.has(seq) || this.suspended.has(backend) || !this.ready.includes(backend)) return;
      this.suspended.add(backend);
      this.opts.log.warn('api process did not acknowledge a connection in time; it gets no new ones until it does', {
        backend: backend.name,
        ackMs: this.opts.ackMs ?? 5000,
      });
    }, this.opts.ackMs ?? 5000);
    this.inTransit.set(seq, { socket, backend, outcome, timer });
    backend.send({ t: 'conn', seq }, socket, (err) => {
      if (!err || !this.inTransit.delete(seq)) return;
      clearTimeout(timer);
      this.opts.log.warn('connection handoff failed; trying the next API process', { backend: backend.name, err });
      this.remove(backend);
      this.handOver(socket, outcome);
    });
  }

  /** Count the refusal, answer 503 and close. */
  private refuse(socket: net.Socket, outcome: string, message: string) {
    this.connections.inc({ outcome });
    answer503(socket, message);
  }
}

/** The door's metrics: connections by outcome, how long held ones waited, and the held and ready counts (read at scrape). */
function doorMetrics(registry: FrontDoorOptions['registry'], held: () => number, ready: () => number) {
  const registers = [registry];
  const connections = new Counter({
    name: 'supervisor_connections_total',
    help: 'Connections the supervisor accepted on the API port, by outcome: handed (to a ready API process at once), held_then_handed (held while no API process was ready), refused_timeout / refused_full (held too long, or too many held: answered 503), closed (the supervisor stopped).',
    labelNames: ['outcome'],
    registers,
  });
  const holdSeconds = new Histogram({
    name: 'supervisor_connection_hold_seconds',
    help: 'How long connections waited in the supervisor for a ready API process (held connections only).',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  new Gauge({
    name: 'supervisor_connections_held',
    help: 'Connections waiting in the supervisor for a ready API process.',
    registers,
    collect() {
      this.set(held());
    },
  });
  new Gauge({
    name: 'supervisor_api_processes_ready',
    help: 'API processes taking connections.',
    registers,
    collect() {
      this.set(ready());
    },
  });
  return { connections, holdSeconds };
}

/** Answer 503 in the Error shape, without having read the request, and close. */
function answer503(socket: net.Socket, message: string) {
  const body = JSON.stringify({
    error: { code: 'service_unavailable', message, requestId: `req_${randomUUID().replaceAll('-', '')}` },
  });
  // Read (and drop) what the client sent: closing a socket with unread data resets it, and the
  // client would see a reset instead of the answer.
  socket.resume();
  socket.end(
    `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nRetry-After: 5\r\nConnection: close\r\n\r\n${body}`,
  );
}
