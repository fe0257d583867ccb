/**
 * Issue 2 benchmarks, each a ratio against a baseline measured in the same run on this machine,
 * with autocannon and equal connection pools:
 *  (a) bare Express hello vs bare node:http (checks the harness)
 *  (b) our full middleware stack on GET /account (no database call in the handler; auth, rate
 *      limit and audit do theirs) vs bare Express hello
 *  (c) authenticated GET /jobs/{id} vs bare Express doing the same single findOne by id
 *  (d) POST /code-builds accepted per second vs bare Express doing the same insert plus one
 *      confirmed publish
 *  (e) dispatch-to-complete latency p50/p99 of a trivial code build at a steady 20 jobs/s, on
 *      quorum and on classic queues (server-side timestamps: createdAt → completedAt)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';
import { randomBytes } from 'node:crypto';
import { startStack } from '../../test/helpers/stack';
import { row, type Bench, type BenchRow } from './bench';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);

const listen = (handler: http.RequestListener) =>
  new Promise<{ url: string; close: () => Promise<void> }>((resolve) => {
    const server = http.createServer(handler);
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
      }),
    );
  });

async function load(opts: { url: string; method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string }) {
  const r = await autocannon({ url: opts.url, method: opts.method ?? 'GET', headers: opts.headers, body: opts.body, connections: CONNECTIONS, duration: DURATION });
  const ok = r['2xx'];
  return { rps: ok / r.duration, p50: r.latency.p50, p99: r.latency.p99, errors: r.non2xx + r.errors };
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
  name: 'gateway and jobs (issue 2)',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];

    // (a) harness check
    const bare = await listen((_req, res) => { res.setHeader('content-type', 'application/json'); res.end('{"hello":"world"}'); });
    const exApp = express();
    exApp.get('/hello', (_req, res) => void res.json({ hello: 'world' }));
    const ex = await listen(exApp);
    const a0 = await load({ url: `${bare.url}/hello` });
    const a1 = await load({ url: `${ex.url}/hello` });
    rows.push(row('(a) bare Express hello, req/s', a1.rps, 'req/s', a0.rps, 'baseline: bare node:http'));

    // The real stack (API only; jobs stay queued for c and d).
    const stack = await startStack({ workers: false, scheduler: false, env: { RATE_LIMIT_MAX: '100000000', LOG_LEVEL: 'silent', QUEUE_TYPE: 'quorum' } });
    try {
      const { key, accountId } = await stack.createAccount({ credits: 1e12 });
      const auth = { authorization: `Bearer ${key}` };

      // (b) full middleware stack, handler without a database call
      const b = await load({ url: `${stack.baseUrl}/account`, headers: auth });
      rows.push(row('(b) full middleware stack GET /account, req/s', b.rps, 'req/s', a1.rps, `baseline: bare Express hello; p99 ${b.p99} ms vs ${a1.p99} ms`));

      // (c) GET /jobs/{id} vs bare findOne
      const job = await stack.rt.jobs.create({ accountId, type: 'code', input: { prompt: 'x' }, credits: { operation: 'code_build', amount: 0 } });
      const findApp = express();
      findApp.get('/jobs/:id', async (req, res) => void res.json(await stack.rt.db.jobs.findOne({ _id: req.params.id })));
      const findSrv = await listen(findApp);
      const c0 = await load({ url: `${findSrv.url}/jobs/${job._id}` });
      const c1 = await load({ url: `${stack.baseUrl}/jobs/${job._id}`, headers: auth });
      rows.push(row('(c) authenticated GET /jobs/{id}, req/s', c1.rps, 'req/s', c0.rps, `baseline: bare Express findOne by id; p99 ${c1.p99} ms vs ${c0.p99} ms`));
      await findSrv.close();

      // (d) POST /code-builds vs insert + one confirmed publish
      const insApp = express();
      insApp.use(express.json());
      insApp.post('/code-builds', async (req, res) => {
        const id = `code_${randomBytes(10).toString('hex')}`;
        await stack.rt.db.jobs.insertOne({ _id: id, accountId, type: 'code', input: req.body } as never);
        await stack.rt.amqp.publishToPool('code', { jobId: id, accountId, type: 'code' });
        res.status(202).json({ jobId: id });
      });
      const insSrv = await listen(insApp);
      const body = JSON.stringify({ prompt: 'a counter' });
      const json = { 'content-type': 'application/json' };
      const d0 = await load({ url: `${insSrv.url}/code-builds`, method: 'POST', headers: json, body });
      const d1 = await load({ url: `${stack.baseUrl}/code-builds`, method: 'POST', headers: { ...auth, ...json }, body });
      rows.push(row('(d) POST /code-builds accepted/s', d1.rps, 'req/s', d0.rps, `baseline: bare Express insert + confirmed publish; p99 ${d1.p99} ms vs ${d0.p99} ms`));
      await insSrv.close();
    } finally {
      await stack.stop();
      await bare.close();
      await ex.close();
    }

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
