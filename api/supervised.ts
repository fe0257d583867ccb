import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { registry } from '../monitoring/metrics';
import type { Logger } from '../platform/log';
import { HANDOFF_ENV, isMessage, type FromApi, type ToApi } from '../platform/supervision';

/** How long GET /metrics waits for the supervisor to gather every API process's metrics. */
const GATHER_TIMEOUT_MS = 3000;

export interface Supervised {
  /** Start taking the connections the supervisor hands over. */
  ready(): void;
  /** Every API process's metrics, as Prometheus text. */
  metrics(): Promise<{ text: string; contentType: string }>;
  /** Ask for no more connections (stopping). */
  drain(): void;
}

/**
 * An API process run by the supervisor with connection handoff (platform/supervision.ts):
 * it serves the sockets the supervisor accepted instead of listening itself. Undefined when this
 * process was started any other way (tests, a container): it then listens on PORT.
 */
export const joinsSupervisor = (): boolean => process.env[HANDOFF_ENV] === '1' && typeof process.send === 'function';

export function joinSupervisor(server: Server, log: Logger): Supervised | undefined {
  if (!joinsSupervisor()) return undefined;
  const send = (m: FromApi) => process.send?.(m);
  const waiting = new Map<number, { resolve: (r: { text: string; contentType: string }) => void; timer: NodeJS.Timeout }>();
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
    drain: () => send({ t: 'draining' }),
    metrics: () =>
      new Promise((resolve) => {
        const id = ++seq;
        // The supervisor away or slow: this process's own metrics rather than nothing.
        const timer = setTimeout(() => {
          waiting.delete(id);
          log.warn('the supervisor did not gather the metrics in time; answering with this process\'s own');
          void registry.metrics().then((text) => resolve({ text, contentType: registry.contentType }));
        }, GATHER_TIMEOUT_MS);
        waiting.set(id, { resolve, timer });
        send({ t: 'metrics?', id });
      }),
  };
}
