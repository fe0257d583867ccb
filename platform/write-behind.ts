import type { Logger } from './log';

export interface WriteBehindOptions {
  /** Flush when this many items wait. */
  maxItems: number;
  /** Flush at most this long after the first waiting item. */
  delayMs: number;
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
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const run = async (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    while (running) await running;
    if (waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    running = flush(batch)
      .catch((err: unknown) => opts.log.warn('write-behind batch failed; the sweep repairs it', { batch: opts.name, items: batch.length, err: err as Error }))
      .finally(() => {
        running = undefined;
      });
    await running;
  };

  return {
    add(item: T): void {
      waiting.push(item);
      if (waiting.length >= opts.maxItems) void run();
      else timer ??= setTimeout(() => void run(), opts.delayMs);
    },
    flush: run,
    async close(): Promise<void> {
      await run();
    },
  };
}
