/**
 * Gateway and jobs benchmarks (issues 2 and 8), each a ratio against a baseline measured in the
 * same run on this machine. Every server under test runs in its own process(es); autocannon
 * (BENCH_CONNECTIONS=10 connections, no pipelining, BENCH_SECONDS=5 s after a
 * BENCH_WARMUP_SECONDS=1 s warm-up) runs in the bench process, for baselines and API alike.
 *  (a) bare Express hello vs bare node:http hello (checks the harness)
 *  (b) full-stack GET /account vs bare node:http doing one findOne by _id (target 0.6)
 *  (c) authenticated GET /jobs/{id} vs the same findOne baseline (target 0.7)
 *  (d) POST /code-builds accepted vs bare node:http doing one insertOne (target 0.3)
 *  (b2, c2, d2) the same with API_PROCESSES=2 behind the supervisor, against the same
 *      single-process baselines: the API scales by processes.
 *  (e) dispatch-to-complete latency p50/p99 of a trivial code build at a steady 20 jobs/s, on
 *      quorum and on classic queues (server-side timestamps: createdAt → completedAt)
 *
 * The API runs as `supervisor.ts api` (API processes only: no workers, no scheduler) on a fresh
 * database and queue prefix per API_PROCESSES setting, with a bench account of 10^12 credits and
 * RATE_LIMIT_MAX 10^9. The accepted code builds just queue (quorum queue, the default) and are
 * dropped with the database and the queues when the run ends. The baselines run on their own
 * database holding the same job document and the same indexes, dropped afterwards.
 */
import autocannon from 'autocannon';
import { SCOPES } from '../../contracts/registry';
import { createAccountsRepository } from '../../platform/accounts';
import { connectMongo, ensureIndexes, type JobDoc } from '../../platform/mongo';
import { startStack } from '../../test/helpers/stack';
import { row, type Bench, type BenchRow } from './bench';
import { benchConfig, startBaseline, startSupervisedApi, type SupervisedApi } from './processes';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
/** Settings of the API processes under test. */
const API_ENV = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' };
const BODY = JSON.stringify({ prompt: 'a counter' });

interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function load(opts: { url: string; method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string }): Promise<Load> {
  const base = { url: opts.url, method: opts.method ?? 'GET', headers: opts.headers, body: opts.body, connections: CONNECTIONS, pipelining: 1 } as const;
  if (WARMUP > 0) await autocannon({ ...base, duration: WARMUP });
  const r = await autocannon({ ...base, duration: DURATION });
  return { rps: r['2xx'] / r.duration, p50: r.latency.p50, p99: r.latency.p99, errors: r.non2xx + r.errors + r.timeouts };
}

/** p99 of both sides, and the failures when there were any (they do not count as throughput). */
const detail = (value: Load, baseline: Load, what: string) =>
  `baseline: ${what}; p99 ${value.p99} ms vs ${baseline.p99} ms` + (value.errors || baseline.errors ? `; not 2xx or failed: ${value.errors} vs ${baseline.errors}` : '');

/** The bench account (huge balance) and one queued code build, through the running API. */
async function prepare(api: SupervisedApi) {
  const db = await connectMongo(api.config.MONGODB_URL);
  try {
    const accounts = createAccountsRepository(db);
    const account = await accounts.createAccount({ name: 'bench', plan: 'pro', credits: 1e12 });
    const { key } = await accounts.createKey(account._id, { name: 'bench', scopes: [...SCOPES] });
    const auth = { authorization: `Bearer ${key}` };
    const res = await fetch(`${api.url}/code-builds`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: BODY });
    if (res.status !== 202) throw new Error(`POST /code-builds answered ${res.status}: ${await res.text()}`);
    const { jobId } = (await res.json()) as { jobId: string };
    const job = await db.jobs.findOne({ _id: jobId });
    return { accountId: account._id, auth, job: job! };
  } finally {
    await db.close();
  }
}

/** The three full-stack figures against one supervised API. */
async function measureApi(api: SupervisedApi, auth: Record<string, string>, jobId: string) {
  const account = await load({ url: `${api.url}/account`, headers: auth });
  const job = await load({ url: `${api.url}/jobs/${jobId}`, headers: auth });
  const post = await load({ url: `${api.url}/code-builds`, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: BODY });
  return { account, job, post };
}

/** The findOne and insertOne baselines, on their own database holding a copy of `job`. */
async function measureBaselines(job: JobDoc, accountId: string) {
  const url = benchConfig().MONGODB_URL;
  const db = await connectMongo(url);
  try {
    await ensureIndexes(db);
    await db.jobs.insertOne(job);
    const env = { MONGODB_URL: url, BASELINE_ACCOUNT_ID: accountId };
    const find = await startBaseline('find', env);
    const findOne = await load({ url: `${find.url}/jobs/${job._id}` }).finally(() => find.stop());
    const ins = await startBaseline('insert', env);
    const insertOne = await load({ url: `${ins.url}/code-builds`, method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY }).finally(() => ins.stop());
    return { findOne, insertOne };
  } finally {
    await db.db.dropDatabase().catch(() => undefined);
    await db.close();
  }
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function latencyAtSteadyRate(queueType: 'quorum' | 'classic'): Promise<{ p50: number; p99: number; n: number }> {
  const stack = await startStack({ env: { QUEUE_TYPE: queueType, RATE_LIMIT_MAX: '1000000', LOG_LEVEL: 'silent', POOL_CONCURRENCY: 'code=4' } });
  try {
    const { key, accountId } = await stack.createAccount({ credits: 1e9 });
    const url = `${stack.baseUrl}/code-builds`;
    const rate = 20;
    const seconds = Number(process.env.BENCH_STEADY_SECONDS ?? 10);
    const posts: Promise<Response>[] = [];
    const t0 = Date.now();
    for (let i = 0; i < rate * seconds; i++) {
      const due = t0 + (i * 1000) / rate;
      await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
      posts.push(fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ prompt: `counter ${i}` }) }));
    }
    await Promise.all(posts);
    const deadline = Date.now() + 60_000;
    while ((await stack.rt.db.jobs.countDocuments({ accountId, status: { $in: ['queued', 'processing'] } })) > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const jobs = await stack.rt.db.jobs.find({ accountId, status: 'complete' }).toArray();
    const lat = jobs.map((j) => j.completedAt!.getTime() - j.createdAt.getTime());
    return { p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length };
  } finally {
    await stack.stop();
  }
}

export const bench: Bench = {
  name: 'gateway and jobs (issues 2 and 8)',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];

    // (a) harness check, each server in its own process
    const bare = await startBaseline('hello-http');
    const a0 = await load({ url: `${bare.url}/hello` }).finally(() => bare.stop());
    const ex = await startBaseline('hello-express');
    const a1 = await load({ url: `${ex.url}/hello` }).finally(() => ex.stop());
    rows.push(row('(a) bare Express hello, req/s', a1.rps, 'req/s', a0.rps, 'baseline: bare node:http hello'));

    // One API process behind the supervisor; the baselines (single process) meanwhile on their own database.
    let api = await startSupervisedApi(1, API_ENV);
    let base: Awaited<ReturnType<typeof measureBaselines>>;
    let one: Awaited<ReturnType<typeof measureApi>>;
    try {
      const { auth, job, accountId } = await prepare(api);
      base = await measureBaselines(job, accountId);
      one = await measureApi(api, auth, job._id);
    } finally {
      await api.stop();
    }
    const { findOne, insertOne } = base;
    rows.push(row('(b) GET /account, 1 API process, req/s', one.account.rps, 'req/s', findOne.rps, detail(one.account, findOne, 'node:http + findOne by _id'), 0.6));
    rows.push(row('(c) GET /jobs/{id}, 1 API process, req/s', one.job.rps, 'req/s', findOne.rps, detail(one.job, findOne, 'node:http + findOne by _id'), 0.7));
    rows.push(row('(d) POST /code-builds accepted, 1 API process, req/s', one.post.rps, 'req/s', insertOne.rps, detail(one.post, insertOne, 'node:http + insertOne'), 0.3));

    // Two API processes on one port (API_PROCESSES=2), fresh database; same single-process baselines.
    api = await startSupervisedApi(2, API_ENV);
    let two: Awaited<ReturnType<typeof measureApi>>;
    try {
      const { auth, job } = await prepare(api);
      two = await measureApi(api, auth, job._id);
    } finally {
      await api.stop();
    }
    const scale = (a: Load, b: Load) => `; x${(a.rps / b.rps).toFixed(2)} of 1 process`;
    rows.push(row('(b2) GET /account, 2 API processes, req/s', two.account.rps, 'req/s', findOne.rps, detail(two.account, findOne, 'node:http + findOne by _id, 1 process') + scale(two.account, one.account), 0.6));
    rows.push(row('(c2) GET /jobs/{id}, 2 API processes, req/s', two.job.rps, 'req/s', findOne.rps, detail(two.job, findOne, 'node:http + findOne by _id, 1 process') + scale(two.job, one.job), 0.7));
    rows.push(row('(d2) POST /code-builds accepted, 2 API processes, req/s', two.post.rps, 'req/s', insertOne.rps, detail(two.post, insertOne, 'node:http + insertOne, 1 process') + scale(two.post, one.post), 0.3));

    // (e) steady-rate latency, quorum vs classic
    const classic = await latencyAtSteadyRate('classic');
    const quorum = await latencyAtSteadyRate('quorum');
    rows.push(row('(e) dispatch→complete p50 at 20 jobs/s, classic', classic.p50, 'ms', undefined, `${classic.n} jobs`));
    rows.push(row('(e) dispatch→complete p99 at 20 jobs/s, classic', classic.p99, 'ms'));
    rows.push(row('(e) dispatch→complete p50 at 20 jobs/s, quorum', quorum.p50, 'ms', classic.p50, `${quorum.n} jobs; baseline: classic`));
    rows.push(row('(e) dispatch→complete p99 at 20 jobs/s, quorum', quorum.p99, 'ms', classic.p99, 'baseline: classic'));
    return rows;
  },
};
