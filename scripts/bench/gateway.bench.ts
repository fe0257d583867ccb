/**
 * Gateway and jobs benchmarks, each a ratio against a baseline measured in the
 * same run on this machine. Every server under test runs in its own process(es); autocannon
 * (BENCH_CONNECTIONS=10 connections, no pipelining) runs in the bench process, for baselines and
 * API alike. Each figure and its baseline are measured in turn, BENCH_ROUNDS=3 rounds of
 * BENCH_SECONDS=3 s each (which side goes first alternates, after a BENCH_WARMUP_SECONDS=1 s
 * warm-up of both), so that load from elsewhere on a shared machine falls on both sides alike;
 * value and baseline are the means of the rounds, the note gives the spread of the per-round
 * ratios.
 *  (a) bare Express hello vs bare node:http hello (checks the harness)
 *  (b) full-stack GET /account vs bare node:http doing one findOne by _id (target 0.6)
 *  (c) authenticated GET /jobs/{id} vs the same findOne baseline (target 0.7), of a queued job
 *      (the in-flight tier of the job cache) and of a completed one (the finished tier)
 *  (d) POST /code-builds accepted vs bare node:http doing one insertOne (target 0.3)
 *  (b2, c2, d2) the same with API_PROCESSES=2 behind the supervisor, against the same
 *      single-process baselines (measured again, in turn with them): the API scales by processes.
 *  (c3, d3) the same on the whole service (`supervisor.ts` with no argument: one API process,
 *      every pool and the scheduler), the code pool completing the builds (d3) posts.
 *  (e) dispatch-to-complete latency p50/p99 of a trivial code build at a steady 20 jobs/s, on
 *      quorum and on classic queues (server-side timestamps: createdAt → completedAt)
 *
 * The API runs as `supervisor.ts api` (API processes only: no workers, no scheduler) on a fresh
 * database and queue prefix per API_PROCESSES setting, with a bench account of 10^12 credits and
 * RATE_LIMIT_MAX 10^9, so (d) measures the credit-lease path (CREDIT_LEASE_CREDITS, default): after
 * the first job of each API process, charged to the account, a job POST is charged from the
 * process's lease and makes one database command. The accepted code builds just queue (quorum queue, the default) and are
 * dropped with the database and the queues when the run ends. The baselines run beside each API
 * on their own database holding a copy of the API's job document and the same indexes, dropped
 * afterwards.
 */
import autocannon from 'autocannon';
import { connectMongo, ensureIndexes } from '../../platform/infra/mongo';
import { startStack } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount } from './load';
import { benchConfig, startBaseline, startSupervisedApi, type SupervisedApi } from './processes';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
/** Settings of the API processes under test. */
const API_ENV = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' };
const BODY = JSON.stringify({ prompt: 'a counter' });
const JSON_BODY = { 'content-type': 'application/json' };

export interface Target {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}
interface Load {
  rps: number;
  p99: number;
  errors: number;
}

export async function load(t: Target, seconds: number): Promise<Load> {
  const r = await autocannon({
    url: t.url,
    method: t.method ?? 'GET',
    headers: t.headers,
    body: t.body,
    connections: CONNECTIONS,
    pipelining: 1,
    duration: seconds,
  });
  return { rps: r['2xx'] / r.duration, p99: r.latency.p99, errors: r.non2xx + r.errors + r.timeouts };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const meanLoad = (ls: Load[]): Load => ({
  rps: mean(ls.map((l) => l.rps)),
  p99: Math.round(mean(ls.map((l) => l.p99))),
  errors: ls.reduce((a, l) => a + l.errors, 0),
});

/** A figure and its baseline measured in turn, ROUNDS rounds, alternating which goes first (the tracing bench uses it too). */
export async function compare(baseline: Target, subject: Target) {
  if (WARMUP > 0) {
    await load(baseline, WARMUP);
    await load(subject, WARMUP);
  }
  const b: Load[] = [];
  const v: Load[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    if (i % 2 === 0) {
      b.push(await load(baseline, SECONDS));
      v.push(await load(subject, SECONDS));
    } else {
      v.push(await load(subject, SECONDS));
      b.push(await load(baseline, SECONDS));
    }
  }
  const ratios = v.map((x, i) => x.rps / b[i]!.rps);
  return {
    base: meanLoad(b),
    value: meanLoad(v),
    spread: `round ratios ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`,
  };
}
export type Compared = Awaited<ReturnType<typeof compare>>;

/** p99 of both sides, the spread, and the failures when there were any (they do not count as throughput). */
export const detail = (c: Compared, what: string) =>
  `baseline: ${what}; p99 ${c.value.p99} ms vs ${c.base.p99} ms; ${c.spread}${c.value.errors || c.base.errors ? `; not 2xx or failed: ${c.value.errors} vs ${c.base.errors}` : ''}`;

/** The bench account (huge balance) and one queued code build, through the running API. */
async function prepare(api: SupervisedApi) {
  const db = await connectMongo(api.config.MONGODB_URL);
  try {
    const { accountId, auth } = await benchAccount(db, { credits: 1e12 });
    const res = await fetch(`${api.url}/code-builds`, {
      method: 'POST',
      headers: { ...auth, ...JSON_BODY },
      body: BODY,
    });
    if (res.status !== 202) throw new Error(`POST /code-builds answered ${res.status}: ${await res.text()}`);
    const { jobId } = (await res.json()) as { jobId: string };
    const job = await db.jobs.findOne({ _id: jobId });
    // A second build, completed as a worker would leave it (no GET saw it before: no cache entry).
    const res2 = await fetch(`${api.url}/code-builds`, {
      method: 'POST',
      headers: { ...auth, ...JSON_BODY },
      body: BODY,
    });
    if (res2.status !== 202) throw new Error(`POST /code-builds answered ${res2.status}: ${await res2.text()}`);
    const doneId = ((await res2.json()) as { jobId: string }).jobId;
    const now = new Date();
    const result = {
      appUrl: `https://example.test/apps/${doneId}`,
      files: [{ path: 'index.html', bytes: 2048 }],
      summary: 'A small app.',
    };
    await db.jobs.updateOne(
      { _id: doneId },
      {
        $set: {
          status: 'complete',
          rawStatus: 'complete',
          progressMessage: 'Done',
          result,
          completedAt: now,
          updatedAt: now,
        },
      },
    );
    const done = await db.jobs.findOne({ _id: doneId });
    return { accountId, auth, job: job!, done: done! };
  } finally {
    await db.close();
  }
}

/**
 * The three full-stack figures of one supervised API, each in turn with its baseline: bare
 * servers on their own database holding a copy of the API's job document.
 */
async function measureApi(api: SupervisedApi) {
  const { auth, job, done, accountId } = await prepare(api);
  const url = benchConfig().MONGODB_URL;
  const db = await connectMongo(url);
  try {
    await ensureIndexes(db);
    await db.jobs.insertMany([job, done]);
    const env = { MONGODB_URL: url, BASELINE_ACCOUNT_ID: accountId };
    const [find, insert] = await Promise.all([startBaseline('find', env), startBaseline('insert', env)]);
    try {
      const findOne = { url: `${find.url}/jobs/${job._id}` };
      return {
        account: await compare(findOne, { url: `${api.url}/account`, headers: auth }),
        job: await compare(findOne, { url: `${api.url}/jobs/${job._id}`, headers: auth }),
        finished: await compare(
          { url: `${find.url}/jobs/${done._id}` },
          { url: `${api.url}/jobs/${done._id}`, headers: auth },
        ),
        post: await compare(
          { url: `${insert.url}/code-builds`, method: 'POST', headers: JSON_BODY, body: BODY },
          { url: `${api.url}/code-builds`, method: 'POST', headers: { ...auth, ...JSON_BODY }, body: BODY },
        ),
      };
    } finally {
      await Promise.all([find.stop(), insert.stop()]);
    }
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
  const stack = await startStack({
    env: { QUEUE_TYPE: queueType, RATE_LIMIT_MAX: '1000000', LOG_LEVEL: 'silent', POOL_CONCURRENCY: 'code=4' },
  });
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
      posts.push(
        fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: `counter ${i}` }),
        }),
      );
    }
    await Promise.all(posts);
    const deadline = Date.now() + 60_000;
    while (
      (await stack.db.jobs.countDocuments({ accountId, status: { $in: ['queued', 'processing'] } })) > 0 &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const jobs = await stack.db.jobs.find({ accountId, status: 'complete' }).toArray();
    const lat = jobs.map((j) => j.completedAt!.getTime() - j.createdAt.getTime());
    return { p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length };
  } finally {
    await stack.stop();
  }
}

export const bench: Bench = {
  name: 'gateway and jobs',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];

    // (a) harness check, each server in its own process
    const [bare, ex] = await Promise.all([startBaseline('hello-http'), startBaseline('hello-express')]);
    try {
      const a = await compare({ url: `${bare.url}/hello` }, { url: `${ex.url}/hello` });
      rows.push(
        row(
          '(a) bare Express hello, req/s',
          a.value.rps,
          'req/s',
          a.base.rps,
          `baseline: bare node:http hello; ${a.spread}`,
        ),
      );
    } finally {
      await Promise.all([bare.stop(), ex.stop()]);
    }

    // Per API_PROCESSES setting: the supervised API (API processes only) on a fresh database.
    const runs: { processes: number; figures: Awaited<ReturnType<typeof measureApi>> }[] = [];
    for (const processes of [1, 2]) {
      const api = await startSupervisedApi(processes, API_ENV);
      try {
        runs.push({ processes, figures: await measureApi(api) });
      } finally {
        await api.stop();
      }
    }
    // The whole service as `npm start` runs it: every pool and the scheduler share the cores, and
    // the code pool completes the builds (d) posts while it is measured.
    const whole = await startSupervisedApi(1, API_ENV, 'all');
    let service: Awaited<ReturnType<typeof measureApi>>;
    try {
      service = await measureApi(whole);
    } finally {
      await whole.stop();
    }
    const one = runs[0]!.figures;
    for (const { processes, figures } of runs) {
      const [tag, label] = processes === 1 ? ['', '1 API process'] : [String(processes), `${processes} API processes`];
      // Scaling as the ratio of the two ratios: each against the baseline measured beside it, so
      // load from elsewhere that differs between the two runs cancels out.
      const ratio = (c: Compared) => c.value.rps / c.base.rps;
      const scale = (k: 'account' | 'job' | 'finished' | 'post') =>
        processes === 1 ? '' : `; x${(ratio(figures[k]) / ratio(one[k])).toFixed(2)} the ratio of 1 process`;
      const find = 'node:http + findOne by _id, 1 process';
      const { account, job, finished, post } = figures;
      rows.push(
        row(
          `(b${tag}) GET /account, ${label}, req/s`,
          account.value.rps,
          'req/s',
          account.base.rps,
          detail(account, find) + scale('account'),
          0.6,
        ),
      );
      rows.push(
        row(
          `(c${tag}) GET /jobs/{id}, ${label}, req/s`,
          job.value.rps,
          'req/s',
          job.base.rps,
          detail(job, find) + scale('job'),
          0.7,
        ),
      );
      rows.push(
        row(
          `(c${tag}) GET /jobs/{id} of a completed job, ${label}, req/s`,
          finished.value.rps,
          'req/s',
          finished.base.rps,
          detail(finished, find) + scale('finished'),
          0.7,
        ),
      );
      rows.push(
        row(
          `(d${tag}) POST /code-builds accepted, ${label}, req/s`,
          post.value.rps,
          'req/s',
          post.base.rps,
          detail(post, 'node:http + insertOne, 1 process') + scale('post'),
          0.3,
        ),
      );
    }

    {
      const find = 'node:http + findOne by _id, 1 process';
      const { job, finished, post } = service;
      rows.push(
        row('(c3) GET /jobs/{id}, whole service, req/s', job.value.rps, 'req/s', job.base.rps, detail(job, find), 0.7),
      );
      rows.push(
        row(
          '(c3) GET /jobs/{id} of a completed job, whole service, req/s',
          finished.value.rps,
          'req/s',
          finished.base.rps,
          detail(finished, find),
          0.7,
        ),
      );
      rows.push(
        row(
          '(d3) POST /code-builds accepted, whole service (code pool completing them), req/s',
          post.value.rps,
          'req/s',
          post.base.rps,
          detail(post, 'node:http + insertOne, 1 process'),
          0.3,
        ),
      );
    }

    // (e) steady-rate latency, quorum vs classic
    const classic = await latencyAtSteadyRate('classic');
    const quorum = await latencyAtSteadyRate('quorum');
    rows.push(
      row('(e) dispatch→complete p50 at 20 jobs/s, classic', classic.p50, 'ms', undefined, `${classic.n} jobs`),
    );
    rows.push(row('(e) dispatch→complete p99 at 20 jobs/s, classic', classic.p99, 'ms'));
    rows.push(
      row(
        '(e) dispatch→complete p50 at 20 jobs/s, quorum',
        quorum.p50,
        'ms',
        classic.p50,
        `${quorum.n} jobs; baseline: classic`,
      ),
    );
    rows.push(
      row('(e) dispatch→complete p99 at 20 jobs/s, quorum', quorum.p99, 'ms', classic.p99, 'baseline: classic'),
    );
    return rows;
  },
};
