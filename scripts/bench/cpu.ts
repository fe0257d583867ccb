/**
 * CPU time of processes on this machine, from /proc (Linux): what each process of a run spent,
 * grouped by what it is, to say where the time of a benchmark went.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_S = 100; // USER_HZ on Linux

/** utime + stime of `pid` in seconds; 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
  } catch {
    return 0;
  }
}

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};

/** Every process whose command line matches `test`, by pid. */
function processes(test: (cmd: string) => boolean): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => test(cmdline(pid)));
}

/** `pid` and its children (one level: the supervisor's API, worker and scheduler processes). */
function family(pid: number): number[] {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    return [pid, ...children.map(Number)];
  } catch {
    return [pid];
  }
}

/** What a process of the service is, from its command line. */
const kindOf = (cmd: string) =>
  /api\/main/.test(cmd)
    ? 'api'
    : /workers\/main/.test(cmd)
      ? 'workers'
      : /scheduler\/main/.test(cmd)
        ? 'scheduler'
        : /supervisor/.test(cmd)
          ? 'supervisor'
          : 'other';

/** The groups a run's CPU is reported in: the service's processes (of each supervisor given) and the servers. */
function groups(supervisors: number[], bare?: RegExp): Record<string, number[]> {
  const out: Record<string, number[]> = {
    ferretdb: processes((c) => /ferretdb/.test(c) && !/go build/.test(c)),
    postgres: processes((c) => /^postgres/.test(c)),
    rabbitmq: processes((c) => /beam\.smp/.test(c)),
  };
  for (const pid of supervisors.flatMap(family)) {
    const kind = kindOf(cmdline(pid));
    out[kind] = [...(out[kind] ?? []), pid];
  }
  if (bare) out.bare = processes((c) => bare.test(c));
  return out;
}

/**
 * Starts counting the servers, the service run by `supervisor` and the processes whose command line
 * matches `bare`; `stop()` gives the CPU seconds each group spent since, per group. */
export function cpuMeter(of: { supervisor?: number | number[]; bare?: RegExp }) {
  const before = new Map<number, number>();
  const g = groups(of.supervisor === undefined ? [] : [of.supervisor].flat(), of.bare);
  for (const pid of Object.values(g).flat()) before.set(pid, cpuSeconds(pid));
  return {
    stop(): Record<string, number> {
      const out: Record<string, number> = {};
      for (const [name, pids] of Object.entries(g))
        out[name] = pids.reduce((sum, pid) => sum + cpuSeconds(pid) - (before.get(pid) ?? 0), 0);
      return out;
    },
  };
}

/** `{api: 0.0012, …}` as "api 1.2 ms, …" per job. */
export const perJob = (cpu: Record<string, number>, jobs: number) =>
  Object.entries(cpu)
    .filter(([, s]) => s > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, s]) => `${name} ${((s / jobs) * 1000).toFixed(2)}`)
    .join(', ');
