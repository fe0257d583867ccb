import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { registry } from '../monitoring/metrics';
import type { Logger } from '../platform/infra/log';
import { HANDOFF_ENV, isMessage, type FromApi, type ToApi } from '../platform/infra/supervision';

/** How long GET /metrics waits for the supervisor to gather every API process's metrics. */
const GATHER_TIMEOUT_MS = 3000;

export interface Supervised {
  /** Start taking the connections the supervisor hands over. */
  ready(): void;
  /** Every API process's metrics, as Prometheus text. */
  metrics(): Promise<{ text: string; contentType: string }>;
  /**
   * Stopping: ask for no more connections, let the requests in flight finish (closing each
   * connection as it goes idle), and close what is left after `graceMs`.
   */
  drain(graceMs: number): Promise<void>;
}

/**
 * An API process run by the supervisor with connection handoff (platform/infra/supervision.ts):
 * it serves the sockets the supervisor accepted instead of listening itself. Undefined when this
 * process was started any other way (tests, a container): it then listens on PORT.
 */
export const joinsSupervisor = (): boolean => process.env[HANDOFF_ENV] === '1' && typeof process.send === 'function';

export function joinSupervisor(server: Server, log: Logger): Supervised | undefined {
  if (!joinsSupervisor()) return undefined;
  // The channel closes when the supervisor dies (the process then stops): never throw on it.
  const send = (m: FromApi) => {
    if (process.connected) process.send!(m, undefined, {}, () => {});
  };
  const waiting = new Map<
    number,
    { resolve: (r: { text: string; contentType: string }) => void; timer: NodeJS.Timeout }
  >();
  const own = () =>
    registry.metrics().then(
      (text) => ({ text, contentType: registry.contentType }),
      () => ({ text: '', contentType: registry.contentType }),
    );
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // Node's HTTP server tracks its connections (headers and request timeouts, idle connections)
  // from its 'listening' event on: this one never listens, so say it is.
  server.emit('listening');
  let seq = 0;
  process.on('message', (m: unknown, handle: unknown) => {
    if (!isMessage<ToApi>(m)) return;
    if (m.t === 'conn' && handle) {
      send({ t: 'took', seq: m.seq });
      server.emit('connection', handle as Socket);
    } else if (m.t === 'collect') {
      registry.getMetricsAsJSON().then(
        (metrics) => send({ t: 'collected', id: m.id, metrics: metrics as never }),
        (err) => log.warn('metrics not collected for the supervisor', { err: err as Error }),
      );
    } else if (m.t === 'metrics') {
      const w = waiting.get(m.id);
      if (!w) return;
      clearTimeout(w.timer);
      waiting.delete(m.id);
      w.resolve({ text: m.text, contentType: m.contentType });
    }
  });
  return {
    ready: () => send({ t: 'ready' }),
    async drain(graceMs) {
      send({ t: 'draining' });
      const deadline = Date.now() + graceMs;
      while (sockets.size > 0 && Date.now() < deadline) {
        server.closeIdleConnections();
        await new Promise((r) => setTimeout(r, 50));
      }
      server.closeAllConnections();
    },
    metrics: () =>
      new Promise((resolve) => {
        const id = ++seq;
        // The supervisor away or slow: this process's own metrics rather than nothing.
        const timer = setTimeout(() => {
          waiting.delete(id);
          log.warn("the supervisor did not gather the metrics in time; answering with this process's own");
          void own().then(resolve);
        }, GATHER_TIMEOUT_MS);
        waiting.set(id, { resolve, timer });
        send({ t: 'metrics?', id });
      }),
  };
}
