import type { Logger } from './log';
import { batchSpan, currentSpanContext, tracingOn } from './tracing';
import type { SpanContext } from '@opentelemetry/api';

export interface WriteBehindOptions {
  /** Flush when this many items wait. */
  maxItems: number;
  /** Flush at most this long after the first waiting item (when the last batch held one item). */
  delayMs: number;
  /**
   * Under load the window widens, up to this: after a batch of n items the next waits
   * min(maxDelayMs, n × delayMs), so a steady stream pays for fewer, larger batches. A write that
   * comes after a quiet spell longer than the window (no stream) waits `delayMs` only. Defaults
   * to `delayMs` (a fixed window).
   */
  maxDelayMs?: number;
  log: Logger;
  name: string;
}

/**
 * Collects writes that may lag behind the answer and writes them in one batch: only for writes
 * that something else repairs when a crash loses them (the jobs sweep settles what the batch
 * would have marked). One flush runs at a time; items added meanwhile wait for the next one.
 * `close()` flushes what is left and may be called twice.
 */
export function createWriteBehind<T>(flush: (items: T[]) => Promise<void>, opts: WriteBehindOptions) {
  let waiting: T[] = [];
  /** The spans of the work that queued each waiting item (tracing on): the batch's trace links them. */
  let links: (SpanContext | undefined)[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const maxDelayMs = Math.max(opts.delayMs, opts.maxDelayMs ?? opts.delayMs);
  let window = opts.delayMs;
  /** When the last batch left (the window it set lasts while writes keep coming). */
  let lastRunAt = 0;

  const run = async (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    while (running !== undefined) await running;
    if (waiting.length === 0) return;
    const batch = waiting;
    const from = links;
    waiting = [];
    links = [];
    window = Math.min(maxDelayMs, opts.delayMs * batch.length);
    lastRunAt = Date.now();
    running = batchSpan(`batch ${opts.name}`, from, () => flush(batch))
      .catch((err: unknown) =>
        opts.log.warn('write-behind batch failed; the sweep repairs it', {
          batch: opts.name,
          items: batch.length,
          err: err as Error,
        }),
      )
      .finally(() => {
        running = undefined;
      });
    await running;
  };

  return {
    add(item: T): void {
      waiting.push(item);
      if (tracingOn) links.push(currentSpanContext());
      if (waiting.length >= opts.maxItems) void run();
      else if (!timer) {
        // Quiet for longer than the window: this is not a stream, go back to the short wait.
        if (Date.now() - lastRunAt > window) window = opts.delayMs;
        timer = setTimeout(() => void run(), window);
      }
    },
    flush: run,
    /** How long the next batch waits after its first item. */
    get windowMs(): number {
      return window;
    },
    async close(): Promise<void> {
      await run();
    },
  };
}
