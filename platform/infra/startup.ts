/**
 * Where a process's start went, for its ready log line and `npm run bench startup`:
 * `imports` is the time from the process's start (performance.timeOrigin) to the entry point's
 * first line (Node loading and evaluating the modules); every other step is its own duration in
 * milliseconds. Steps that run side by side (MongoDB and RabbitMQ) each report their own, so
 * the steps can add up to more than `total`, the time from the process's start to the report.
 */
const steps: Record<string, number> = {};

/** The entry point's code runs: everything before was loading modules. */
export function markImportsDone(): void {
  steps.imports ??= Math.round(performance.now());
}

/** Run one step of the start and record how long it took. */
export async function startupStep<T>(step: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work();
  } finally {
    steps[step] = Math.round(performance.now() - started);
  }
}

export function startupReport(): Record<string, number> {
  return { ...steps, total: Math.round(performance.now()) };
}
