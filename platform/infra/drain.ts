import type { Logger } from './log';

/** One piece of work a Drain tracks: its abort controller, and `end()` once it is over (twice is fine). */
export interface DrainWork {
  readonly abort: AbortController;
  end(): void;
}

export interface DrainOptions {
  /** Called as work starts and ends: a gauge of the work in flight (pool_jobs_in_flight, say). */
  gauge?: { inc(): void; dec(): void };
}

export interface DrainCloseOptions {
  /** How long to wait for the work in flight, in ms. */
  graceMs: number;
  /** Stop the intake first (cancel the consumers); each runs even if another fails; a failure is a warning. */
  stop?: readonly ((() => Promise<void>) | undefined)[];
  log: Logger;
  /** The info line once stopped; it carries `abandoned`. */
  stoppedMessage: string;
  /**
   * After the grace period, abort what is left and wait for it to end (its handlers hand the work
   * back): true; return at once and leave it to redelivery: false (default).
   */
  awaitAborted?: boolean;
}

/** What close() reports: how many pieces of work were still running at the deadline. */
export interface DrainReport {
  abandoned: number;
}

/**
 * The drain-on-close of a consumer of work (job pool, consumer and request/reply pools, webhook
 * pool): tracks the work in flight; `close()` stops the intake, waits for that work up to the
 * grace period, then aborts what is left (with "worker stopping") and reports how many were
 * abandoned. Work begun once the drain is over starts aborted. `close()` may be called twice
 * (the same promise).
 */
export class Drain {
  private readonly entries = new Map<DrainWork, string | undefined>();
  private readonly idle = new Set<() => void>();
  private closing?: Promise<DrainReport>;
  private closed = false;

  constructor(private readonly opts: DrainOptions = {}) {}

  /** Work in flight now. */
  get size(): number {
    return this.entries.size;
  }

  /** False once close() was called. */
  get accepting(): boolean {
    return this.closing === undefined;
  }

  /** Whether work under `key` (a job id, say) is in flight. */
  has(key: string): boolean {
    for (const k of this.entries.values()) if (k === key) return true;
    return false;
  }

  /** Register work; call `end()` when it is over. */
  begin(key?: string): DrainWork {
    const abort = new AbortController();
    if (this.closed) abort.abort(new Error('worker stopping'));
    let ended = false;
    const work: DrainWork = {
      abort,
      end: () => {
        if (ended) return;
        ended = true;
        this.entries.delete(work);
        this.opts.gauge?.dec();
        if (this.entries.size === 0) for (const wake of [...this.idle]) wake();
      },
    };
    this.entries.set(work, key);
    this.opts.gauge?.inc();
    return work;
  }

  /** Track a promise as work in flight until it settles; returns it. */
  track<T>(p: Promise<T>, key?: string): Promise<T> {
    const work = this.begin(key);
    return p.finally(() => work.end());
  }

  close(o: DrainCloseOptions): Promise<DrainReport> {
    this.closing ??= (async () => {
      const results = await Promise.allSettled((o.stop ?? []).map((stop) => stop?.()));
      for (const r of results)
        if (r.status === 'rejected') o.log.warn('consumer cancel failed', { err: r.reason as Error });
      const drained = await this.whenIdle(o.graceMs);
      const left = [...this.entries.keys()];
      this.closed = true;
      if (!drained) {
        for (const w of left) w.abort.abort(new Error('worker stopping'));
        if (o.awaitAborted) await this.whenIdle();
      }
      const report = { abandoned: drained ? 0 : left.length };
      o.log.info(o.stoppedMessage, { abandoned: report.abandoned });
      return report;
    })();
    return this.closing;
  }

  /** True once nothing is in flight; false when `ms` passed first. */
  private whenIdle(ms?: number): Promise<boolean> {
    if (this.entries.size === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = () => {
        clearTimeout(timer);
        this.idle.delete(wake);
        resolve(this.entries.size === 0);
      };
      this.idle.add(wake);
      if (ms !== undefined) timer = setTimeout(wake, ms).unref();
    });
  }
}
