import { AggregatorRegistry, Counter, type Registry } from 'prom-client';
import type { Logger } from '../../platform/log';
import type { Metrics, ToApi } from '../../platform/supervision';

/** How long the supervisor waits for each API process's metrics. */
const COLLECT_TIMEOUT_MS = 1500;

export interface Member {
  name: string;
  send(message: ToApi): void;
}

/**
 * GET /metrics on the API port, whichever API process the connection reached: the supervisor
 * asks every ready API process for its metrics (prom-client JSON over IPC) and merges them with
 * prom-client's AggregatorRegistry, as in node:cluster mode: counters and histograms add up,
 * gauges follow each metric's `aggregator` (sum unless the metric says otherwise). The
 * supervisor's own metrics are added. A process that does not answer in time is left out and
 * counted in supervisor_metrics_gather_missing_total.
 */
export function createGatherer(opts: { registry: Registry; log: Logger }) {
  let seq = 0;
  const pending = new Map<number, { replies: Metrics[]; expected: number; finish: () => void }>();
  const missing = new Counter({ name: 'supervisor_metrics_gather_missing_total', help: 'API processes left out of a GET /metrics answer because they did not send their metrics in time.', registers: [opts.registry] });

  return {
    /** A member's answer to `collect`. */
    collected(id: number, metrics: Metrics) {
      const p = pending.get(id);
      if (!p) return;
      p.replies.push(metrics);
      if (p.replies.length === p.expected) p.finish();
    },
    /** Every member's metrics and the supervisor's, merged, as Prometheus text. */
    async gather(members: readonly Member[]): Promise<{ text: string; contentType: string }> {
      const id = ++seq;
      const replies: Metrics[] = [];
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          missing.inc(members.length - replies.length);
          if (replies.length < members.length) opts.log.warn('some API processes did not send their metrics in time', { expected: members.length, got: replies.length });
          done();
        }, COLLECT_TIMEOUT_MS);
        const done = () => {
          clearTimeout(timer);
          pending.delete(id);
          resolve();
        };
        pending.set(id, { replies, expected: members.length, finish: done });
        if (!members.length) return done();
        for (const m of members) m.send({ t: 'collect', id });
      });
      const own = (await opts.registry.getMetricsAsJSON()) as Metrics;
      const merged = AggregatorRegistry.aggregate([...replies, own] as never);
      return { text: await merged.metrics(), contentType: merged.contentType };
    },
  };
}
