import { metrics } from '../../monitoring/metrics';
import type { Logger } from '../../platform/log';

/**
 * The work a request/reply or consumer pool is running, for a clean stop: `start()` registers a
 * handler (counted in `pool_jobs_in_flight`) and gives its abort controller and `end()`; `drain()`
 * stops taking messages, waits for the running handlers up to the grace period, then aborts those
 * left (their messages go back to the broker). Shared by Responder and ConsumerPool.
 */
export class InFlight {
  private readonly entries = new Set<{ abort: AbortController; done: Promise<void> }>();
  private draining?: Promise<void>;

  constructor(private readonly pool: string) {}

  start(): { abort: AbortController; end: () => void } {
    const abort = new AbortController();
    let release!: () => void;
    const entry = { abort, done: new Promise<void>((r) => (release = r)) };
    this.entries.add(entry);
    metrics.jobsInFlight.inc({ pool: this.pool });
    let ended = false;
    return {
      abort,
      end: () => {
        if (ended) return;
        ended = true;
        this.entries.delete(entry);
        metrics.jobsInFlight.dec({ pool: this.pool });
        release();
      },
    };
  }

  /** Cancel the subscription, wait up to `graceMs`, abort what is left. May be called twice. */
  drain(cancel: (() => Promise<void>) | undefined, graceMs: number, log: Logger, stopped: string): Promise<void> {
    this.draining ??= (async () => {
      await cancel?.().catch((err) => log.warn('consumer cancel failed', { err: err as Error }));
      const pending = [...this.entries];
      const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs).unref());
      const outcome = await Promise.race([Promise.all(pending.map((p) => p.done)).then(() => 'done' as const), timer]);
      if (outcome === 'timeout') for (const p of this.entries) p.abort.abort(new Error('worker stopping'));
      log.info(stopped);
    })();
    return this.draining;
  }
}
