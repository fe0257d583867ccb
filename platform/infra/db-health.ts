import { EventEmitter } from 'node:events';
import {
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type MongoClient,
  type TopologyDescription,
} from 'mongodb';

/**
 * What a process knows of its database, and how database errors are told apart.
 *
 * Without this, a request made while the database is away waits for it: the driver looks for a
 * server for `serverSelectionTimeoutMS` (MONGODB_SERVER_SELECTION_TIMEOUT_MS, 5 s) on every operation, and a request makes several in
 * a row (the Idempotency-Key record, the job, the release of the key, the audit entry): measured
 * 6 to 9 s per request with FerretDB killed, then a 500 without Retry-After. So each process
 * watches its client: the driver's view of the topology (no writable server: down), and every
 * data command and connection checkout that fails because the server or FerretDB's PostgreSQL
 * cannot be reached (down). Down, the API answers 503 with Retry-After at once (api/middleware/
 * database.ts), the audit goes straight to the broker, readiness is false, workers hold their
 * messages, and a probe (one read by `_id` of a collection that exists) runs every
 * PROBE_EVERY_MS until it succeeds (up). A timeout of our own (CSOT `timeoutMS`) does not count
 * as down: under load it says "slow", not "away".
 */

/** How often a process that saw its database go away tries it again (a read by `_id`). */
export const PROBE_EVERY_MS = 500;

/** Seconds a client is told to wait (Retry-After) when the database is away. */
export const DATABASE_RETRY_AFTER_SECONDS = 1;

/**
 * Server error codes that say "not now, retry": the server or the replica set's primary is not
 * there (HostUnreachable, HostNotFound, NetworkTimeout, ShutdownInProgress, PrimarySteppedDown,
 * SocketException, NotWritablePrimary, InterruptedAtShutdown, InterruptedDueToReplStateChange,
 * NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary).
 */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436]);

/**
 * FerretDB answers InternalError (code 1) when its PostgreSQL is away: connection refused while
 * PostgreSQL is stopped, SQLSTATE 57P01 (admin_shutdown) for a query cut by a fast stop, 57P03
 * (cannot_connect_now) while it starts, 08xxx for broken connections.
 */
const BACKEND_UNAVAILABLE =
  /failed to connect to|SQLSTATE (08[0-9A-Z]{3}|57P0[1-3])|conn closed|connection reset by peer|unexpected EOF|broken pipe|database system is (starting up|shutting down|in recovery)/i;

/**
 * A network error the driver rewrapped as a bulk write error (MongoBulkWriteError keeps the
 * message and the labels, not the class).
 */
const NETWORK = /\b(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH)\b|connection \d+ to \S+ closed/;

/** The driver's pool timing out a checkout (not exported by the driver). */
const isWaitQueueTimeout = (e: unknown) => (e as { name?: unknown })?.name === 'WaitQueueTimeoutError';

/**
 * The server, or what it stores to, cannot be reached: the driver found no server, lost the
 * connection, or FerretDB lost its PostgreSQL. What marks the process's database as down.
 */
export function isDatabaseUnreachable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof MongoNetworkError || e instanceof MongoServerSelectionError) return true;
    if (e instanceof MongoServerError && e.code === 1 && BACKEND_UNAVAILABLE.test(e.message)) return true;
    if (e instanceof MongoServerError && e.code === undefined && NETWORK.test(e.message)) return true;
  }
  return false;
}

/** Node's codes for a connection the other side closed or reset under a write. */
const BROKEN_SOCKET = new Set(['EPIPE', 'ECONNRESET', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

/**
 * A database error a client should retry later (answered 503 with Retry-After): unreachable
 * (above), a primary that stepped down or a server shutting down, or an operation that ran out
 * of its time (CSOT) or of pool connections.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (isDatabaseUnreachable(e)) return true;
    if (
      e instanceof MongoOperationTimeoutError ||
      e instanceof MongoTopologyClosedError ||
      e instanceof MongoNotConnectedError ||
      isWaitQueueTimeout(e)
    )
      return true;
    if (e instanceof MongoServerError && typeof e.code === 'number' && UNAVAILABLE_CODES.has(e.code)) return true;
    // The driver lets a bare socket error through when it writes a command to a connection the
    // server has just closed ("This socket has been ended by the other party", EPIPE: seen when
    // FerretDB was killed mid-burst). Nothing of the service's own raises these: a connection
    // broke, and a retry will find a live one.
    if (!(e instanceof MongoError) && BROKEN_SOCKET.has(String((e as { code?: unknown }).code))) return true;
    if (e instanceof MongoError && (e.hasErrorLabel('RetryableWriteError') || e.hasErrorLabel('SystemOverloadedError')))
      return true;
  }
  return false;
}

/** FerretDB's message without the Go frames it starts with ("[msg_find.go:344 handler.…] [values.go:74 f[...]] "). */
function withoutFrames(message: string): string {
  let t = message.trimStart();
  while (t.startsWith('[')) {
    let depth = 0;
    let i = 0;
    for (; i < t.length; i++) {
      if (t[i] === '[') depth++;
      else if (t[i] === ']' && --depth === 0) break;
    }
    t = t.slice(i + 1).trimStart();
  }
  return t || message;
}

/** Server types that take writes: a standalone (FerretDB), a replica set primary, a mongos. */
const WRITABLE = new Set(['Standalone', 'RSPrimary', 'Mongos', 'LoadBalancer']);
const writable = (t: TopologyDescription) => [...t.servers.values()].some((s) => WRITABLE.has(s.type));

export interface DatabaseHealthEvents {
  down: [{ reason: string }];
  up: [{ downMs: number }];
}

/**
 * The health of one client's database, fed by the driver's events: `up` is false from the first
 * sign that the database is unreachable until `probe` (a read of stored data) succeeds, which it
 * tries every PROBE_EVERY_MS while down (only then: no cost while up). When only the driver's
 * view said so (no writable server), that view coming back is enough.
 */
export class DatabaseHealth extends EventEmitter<DatabaseHealthEvents> {
  /** The driver sees no writable server. */
  private topologyDown = false;
  /** Data commands or connection checkouts fail as unreachable. */
  private opsDown = false;
  private since = 0;
  private why = '';
  private probing = false;
  private closed = false;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly probe: () => Promise<unknown>) {
    super();
    this.setMaxListeners(0);
  }

  get up(): boolean {
    return !this.topologyDown && !this.opsDown;
  }

  /** When it went down (ms since the epoch), or null while up. */
  get downSince(): number | null {
    return this.up ? null : this.since;
  }

  /** Why it is down (the first sign), or null while up. */
  get reason(): string | null {
    return this.up ? null : this.why;
  }

  /** Resolves once the database is up (at once when it is), or when `signal` aborts. */
  whenUp(signal?: AbortSignal): Promise<void> {
    if (this.up || this.closed || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Follow `client`'s events (once it is connected). */
  watch(client: MongoClient): void {
    client.on('topologyDescriptionChanged', (e) => {
      const w = writable(e.newDescription);
      if (!w)
        this.markDown('topology', `no writable server: ${e.newDescription.error?.message ?? e.newDescription.type}`);
      else this.clear(false);
    });
    client.on('connectionCheckOutFailed', (e) => {
      if (e.reason === 'connectionError') this.markDown('ops', `cannot open a connection to ${e.address}`);
    });
  }

  /** A command failed (from the client's command monitoring). */
  commandFailed(failure: unknown): void {
    if (isDatabaseUnreachable(failure))
      this.markDown(
        'ops',
        withoutFrames(String((failure as Error).message ?? failure))
          .replace(/\s*\n\s*/g, ' ')
          .slice(0, 240),
      );
  }

  /** Stop probing and release every `whenUp` waiter. */
  close(): void {
    this.closed = true;
    for (const w of [...this.waiters]) w();
  }

  private markDown(kind: 'topology' | 'ops', reason: string): void {
    const wasUp = this.up;
    if (kind === 'topology') this.topologyDown = true;
    else this.opsDown = true;
    if (!wasUp) return;
    this.since = Date.now();
    this.why = reason;
    this.emit('down', { reason });
    void this.probeUntilUp();
  }

  /** The driver sees a writable server again (`ops` false), or the probe read succeeded (`ops` true). */
  private clear(ops: boolean): void {
    const wasUp = this.up;
    this.topologyDown = false;
    if (ops) this.opsDown = false;
    if (wasUp || !this.up) return;
    this.emit('up', { downMs: Date.now() - this.since });
    for (const w of [...this.waiters]) w();
  }

  private async probeUntilUp(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      while (!this.up && !this.closed) {
        const started = Date.now();
        // Only the probe says "up": other commands may succeed without the stored data (FerretDB
        // answers a find on a collection it does not know without its PostgreSQL).
        const ok = await this.probe().then(
          () => true,
          () => false,
        );
        if (ok && !this.closed) this.clear(true);
        if (this.up || this.closed) break;
        await new Promise((r) => setTimeout(r, Math.max(0, PROBE_EVERY_MS - (Date.now() - started))).unref());
      }
    } finally {
      this.probing = false;
    }
  }
}
