import { AggregatorRegistry, Counter, type Registry } from 'prom-client';
import type { Logger } from '../../platform/infra/log';
import type { Metrics, ToApi } from '../../platform/infra/supervision';

/** How long the supervisor waits for each API process's metrics. */
const COLLECT_TIMEOUT_MS = 1500;

export interface Member {
  name: string;
  tell(message: ToApi): void;
}

/**
 * GET /metrics on METRICS_PORT (the supervisor's listener), or on the API port with
 * METRICS_ON_API_PORT whichever API process the connection reached: the supervisor asks every ready API process for its metrics (prom-client JSON over IPC) and merges them with
 * prom-client's AggregatorRegistry, as in node:cluster mode: counters and histograms add up,
 * gauges follow each metric's `aggregator` (sum unless the metric says otherwise). The
 * supervisor's own metrics are added. A process that does not answer in time is counted with
 * its last answer (so cluster-wide counters never step back because one process was slow) and in
 * supervisor_metrics_gather_missing_total.
 */
export function createGatherer(opts: { registry: Registry; log: Logger }) {
  let seq = 0;
  const pending = new Map<number, { replies: Map<string, Metrics>; expected: number; finish: () => void }>();
  const last = new Map<string, Metrics>();
  const missing = new Counter({
    name: 'supervisor_metrics_gather_missing_total',
    help: 'API processes whose metrics did not come in time for a GET /metrics answer (their previous answer was used).',
    registers: [opts.registry],
  });

  return {
    /** A member's answer to `collect`. */
    collected(id: number, member: string, metrics: Metrics) {
      last.set(member, metrics);
      const p = pending.get(id);
      if (!p) return;
      p.replies.set(member, metrics);
      if (p.replies.size === p.expected) p.finish();
    },
    /** Every member's metrics and the supervisor's, merged, as Prometheus text. */
    async gather(members: readonly Member[]): Promise<{ text: string; contentType: string }> {
      const id = ++seq;
      const replies = new Map<string, Metrics>();
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          pending.delete(id);
          resolve();
        };
        const timer = setTimeout(() => {
          const late = members.filter((m) => !replies.has(m.name));
          missing.inc(late.length);
          opts.log.warn('some API processes did not send their metrics in time; their previous figures are used', {
            late: late.map((m) => m.name),
          });
          for (const m of late) {
            const previous = last.get(m.name);
            if (previous) replies.set(m.name, previous);
          }
          done();
        }, COLLECT_TIMEOUT_MS);
        pending.set(id, { replies, expected: members.length, finish: done });
        if (!members.length) return done();
        for (const m of members) m.tell({ t: 'collect', id });
      });
      // Forget processes that are gone.
      for (const name of last.keys()) if (!members.some((m) => m.name === name)) last.delete(name);
      const own = (await opts.registry.getMetricsAsJSON()) as Metrics;
      const merged = AggregatorRegistry.aggregate([...replies.values(), own] as never);
      return { text: await merged.metrics(), contentType: merged.contentType };
    },
  };
}
