/**
 * The load generator of the fixed-count benches (projects, sheets, drive, drive-search): a number
 * of requests over N concurrent keep-alive connections (fetch), the latency of each successful
 * one, and targets measured in turn over rounds, rotating which goes first, so that load from
 * elsewhere on a shared machine falls on every side alike. Also the bench account they share.
 * (The gateway bench runs autocannon for fixed durations instead.)
 */
import { SCOPES, type Scope } from '../../contracts/registry';
import { createAccountsRepository } from '../../platform/accounts/accounts.repository';
import { connectMongo, storeOf, type Database } from '../../platform/infra/mongo';

/** One request to make. */
export interface LoadRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}
/** The `i`th request of a run (0, 1, 2, … in the order they are issued). */
export type Target = (i: number) => LoadRequest;

/** How an answer counts: a success and what to keep of it, or a failure and (to print) why. */
export type Verdict<T> = { ok: true; value?: T } | { ok: false; why?: string };
/** Reads an answer (inside its timed window) and says how it counts. */
export type Reader<T> = (r: Response, q: LoadRequest) => Promise<Verdict<T>>;

/** The default reader: the body read as bytes, 200 is a success. */
export const status200: Reader<never> = async (r) => {
  await r.arrayBuffer();
  return { ok: r.status === 200 };
};

export interface LoadOptions<T> {
  requests: number;
  connections: number;
  read?: Reader<T>;
  /** Print the run's first failure (its `why`, or the fetch error) on stderr. */
  warn?: boolean;
}

export interface Load<T = never> {
  /** Successful requests over the run's wall time. */
  rps: number;
  latencies: number[];
  errors: number;
  /** The `value` of each success that had one. */
  values: T[];
}

/** `requests` requests over `connections` concurrent connections, each issued when one answered. */
export async function loadRun<T = never>(
  target: Target,
  { requests, connections, read = status200, warn = false }: LoadOptions<T>,
): Promise<Load<T>> {
  const latencies: number[] = [];
  const values: T[] = [];
  let errors = 0;
  let issued = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (issued < requests) {
        const q = target(issued++);
        const start = performance.now();
        try {
          const r = await fetch(q.url, { method: q.method ?? 'GET', headers: q.headers, body: q.body });
          const v = await read(r, q);
          if (!v.ok) {
            errors++;
            if (warn && errors === 1 && v.why) console.warn(`  ${v.why}`);
            continue;
          }
          latencies.push(performance.now() - start);
          if (v.value !== undefined) values.push(v.value);
        } catch (err) {
          errors++;
          if (warn && errors === 1) console.warn(`  request failed: ${String(err)}`);
        }
      }
    }),
  );
  return { rps: latencies.length / ((performance.now() - t0) / 1000), latencies, errors, values };
}

/** The smallest value with at least p% of the values at or below it (NaN when there are none). */
export const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

/** Several runs of one target: req/s is the mean of the runs', the percentiles over every request. */
export interface Figures<T = never> {
  rps: number;
  p50: number;
  p99: number;
  n: number;
  errors: number;
  values: T[];
}

export function figures<T>(runs: Load<T>[]): Figures<T> {
  const lat = runs.flatMap((l) => l.latencies);
  return {
    rps: runs.reduce((a, l) => a + l.rps, 0) / runs.length,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    n: lat.length,
    errors: runs.reduce((a, l) => a + l.errors, 0),
    values: runs.flatMap((l) => l.values),
  };
}

export interface CompareOptions<T> {
  rounds: number;
  connections: number;
  /** Requests per round, one count for every target or one each. */
  requests: number | readonly number[];
  /** Requests of each target before the rounds, in order (over `connections` unless given). */
  warmup?: { requests: number; connections?: number };
  read?: Reader<T>;
  warn?: boolean;
}

/** Each target in turn, `rounds` rounds, rotating which goes first; the figures of each, in order. */
export async function compareRounds<T = never>(targets: Target[], o: CompareOptions<T>): Promise<Figures<T>[]> {
  const run = (j: number, requests: number, connections = o.connections) =>
    loadRun(targets[j]!, { requests, connections, read: o.read, warn: o.warn });
  if (o.warmup && o.warmup.requests > 0)
    for (let j = 0; j < targets.length; j++) await run(j, o.warmup.requests, o.warmup.connections);
  const results: Load<T>[][] = targets.map(() => []);
  for (let i = 0; i < o.rounds; i++) {
    for (let k = 0; k < targets.length; k++) {
      const j = (k + i) % targets.length;
      results[j]!.push(await run(j, typeof o.requests === 'number' ? o.requests : o.requests[j]!));
    }
  }
  return results.map(figures);
}

/**
 * The bench account (plan pro, `credits`, default 0) and a key of `scopes` (default every scope),
 * straight into the API's database: an open one, or a URL to connect to for this alone.
 */
export async function benchAccount(
  db: Database | string,
  { scopes = SCOPES, credits = 0 }: { scopes?: readonly Scope[]; credits?: number } = {},
) {
  const m = typeof db === 'string' ? await connectMongo(db) : db;
  try {
    const accounts = createAccountsRepository(storeOf(m));
    const account = await accounts.createAccount({ name: 'bench', plan: 'pro', credits });
    const { key } = await accounts.forAccount(account._id).createKey({ name: 'bench', scopes: [...scopes] });
    return { accountId: account._id, key, auth: { authorization: `Bearer ${key}` } };
  } finally {
    if (typeof db === 'string') await m.close();
  }
}
