/**
 * Where a process's start went, for its "ready" log line and `npm run bench startup`: the time
 * from the process's start (performance.timeOrigin) to each step, in milliseconds. The first
 * mark, `imports`, is taken when the entry point's code first runs, after Node loaded the modules.
 */
const marks: [string, number][] = [];

export function markStartup(step: string): void {
  marks.push([step, Math.round(performance.now())]);
}

/** Each step's own duration (ms since the previous mark), in order, and the total. */
export function startupReport(): Record<string, number> {
  const out: Record<string, number> = {};
  let last = 0;
  for (const [step, at] of marks) {
    out[step] = (out[step] ?? 0) + at - last;
    last = at;
  }
  out.total = last;
  return out;
}
