/**
 * Jobs per second end to end: code builds posted at a steady rate to the whole service as `npm
 * start` runs it (supervisor, one API process, one worker process with every pool, the
 * scheduler), finished when their `code_build.completed` event reaches a queue this bench binds
 * to the events exchange. The rate rises (×1.6 a step) until the completion rate stops rising;
 * the best completion rate is the saturation throughput. Then a run at 50% and one at 90% of it
 * give the latency from the POST to the completion event, p50 and p99.
 *
 * Twice: with CODE_ENGINE=bench-no-work (a job completes as soon as it is claimed: the pipeline's
 * own cost) and with the local code engine (what users get). Against a bare pipeline on the same
 * servers, run first and last (the mean of the two is the baseline), forked from this module: a
 * node:http process (insertOne, then a confirmed publish) and one consumer process (the
 * conditional queued → processing update, the completion write, a confirmed completion event, the
 * ack), at the same prefetch as the code pool.
 *
 * Then, with the no-work engine, split as production runs it: one supervisor of API processes and
 * the scheduler, another of worker processes (`npm start -- api scheduler` / `npm start --
 * workers`), with one API process and with two.
 *
 * BENCH_PIPELINE_STEP_S (default 5) seconds per rate; BENCH_PIPELINE_CONCURRENCY (default 8) code
 * jobs in flight per worker process, both sides; BENCH_PIPELINE_LAYOUTS which service runs (default
 * no-work,local,split-1,split-2).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import amqplib from 'amqplib';
import { broker } from '../../contracts/registry';
import { cpuMeter, perJob } from './cpu';
import { benchAccount, percentile } from './load';
import {
  forkBaseline,
  serveBaselineWhen,
  startSupervisedApi,
  startSupervisedWorkers,
  type BaselineServer,
} from './processes';
import { row, type Bench, type BenchRow } from './bench';

const STEP_S = Number(process.env.BENCH_PIPELINE_STEP_S ?? 5);
const CONCURRENCY = Number(process.env.BENCH_PIPELINE_CONCURRENCY ?? 8);
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** The bare pipeline's exchange and queues, under their own prefix (given by the parent). */
const bareNames = (prefix: string) => ({ work: `${prefix}work`, events: `${prefix}events` });

await serveBaselineWhen(
  'BENCH_PIPELINE_BASELINE',
  async (mode, mongo) => {
    const names = bareNames(process.env.BENCH_PIPELINE_PREFIX!);
    const jobs = mongo.db().collection<Record<string, unknown> & { _id: string }>('jobs');
    const conn = await amqplib.connect(AMQP_URL);
    const ch = await conn.createConfirmChannel();
    await ch.assertQueue(names.work, { durable: true });
    await ch.assertExchange(names.events, 'fanout', { durable: true });
    const publish = (exchange: string, key: string, body: unknown) =>
      new Promise<void>((resolve, reject) =>
        ch.publish(exchange, key, Buffer.from(JSON.stringify(body)), { persistent: true }, (err) =>
          err ? reject(err) : resolve(),
        ),
      );
    if (mode === 'consumer') {
      await ch.prefetch(CONCURRENCY);
      await ch.consume(names.work, (m) => {
        if (!m) return;
        const { jobId } = JSON.parse(m.content.toString()) as { jobId: string };
        void (async () => {
          const claimed = await jobs.updateOne(
            { _id: jobId, status: 'queued' },
            { $set: { status: 'processing', updatedAt: new Date() } },
          );
          if (claimed.matchedCount === 1) {
            await jobs.updateOne(
              { _id: jobId, status: 'processing' },
              { $set: { status: 'complete', result: { ok: true }, updatedAt: new Date() } },
            );
            await publish(names.events, '', { jobId, status: 'complete' });
          }
          ch.ack(m);
        })().catch(() => ch.nack(m));
      });
      return (_req, res) => void res.end('consumer');
    }
    return (req, res) => {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (d) => (text += d));
      req.on('end', () => {
        const jobId = `code_${randomBytes(12).toString('base64url')}`;
        const now = new Date();
        jobs
          .insertOne({
            _id: jobId,
            type: 'code',
            status: 'queued',
            input: JSON.parse(text),
            createdAt: now,
            updatedAt: now,
          })
          .then(() => publish('', names.work, { jobId }))
          .then(
            () => {
              res.writeHead(202, { 'content-type': 'application/json' });
              res.end(JSON.stringify({ jobId, status: 'queued' }));
            },
            (err) => void res.writeHead(500).end(String(err)),
          );
      });
    };
  },
  { maxPoolSize: 20 },
);

/** Somewhere jobs are posted to, and where their completions are heard. */
interface Target {
  /** Whose CPU to count: the supervisor of the service, or the bare processes. */
  cpu: { supervisor?: number | number[]; bare?: RegExp };
  post(): Promise<string | undefined>;
  /** Resolves with the completion time of `jobId` (ms, performance clock of this process). */
  done: Map<string, number>;
}

/** A queue bound to `exchange` (routing `key`), recording when each job's completion arrived. */
async function listen(exchange: string, key: string, done: Map<string, number>) {
  const conn = await amqplib.connect(AMQP_URL);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  await ch.bindQueue(queue, exchange, key);
  await ch.consume(
    queue,
    (m) => {
      if (!m) return;
      const body = JSON.parse(m.content.toString()) as { jobId?: string; data?: { jobId?: string } };
      const jobId = body.data?.jobId ?? body.jobId;
      if (jobId) done.set(jobId, performance.now());
    },
    { noAck: true },
  );
  return () => conn.close();
}

interface StepResult {
  offered: number;
  posted: number;
  failed: number;
  completed: number;
  /** Completions per second from the first POST to the last completion. */
  throughput: number;
  latencies: number[];
}

/** POSTs at `rate` per second for STEP_S seconds; waits (at most 60 s) for their completions. */
async function step(target: Target, rate: number): Promise<StepResult> {
  const n = Math.max(1, Math.round(rate * STEP_S));
  const t0 = performance.now();
  const posts: Promise<{ jobId?: string; at: number }>[] = [];
  for (let i = 0; i < n; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const at = performance.now();
    posts.push(
      target.post().then(
        (jobId) => ({ jobId, at }),
        () => ({ at }),
      ),
    );
  }
  const sent = await Promise.all(posts);
  const ids = sent.filter((s) => s.jobId);
  const deadline = performance.now() + 60_000;
  while (ids.some((s) => !target.done.has(s.jobId!)) && performance.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  const finished = ids.filter((s) => target.done.has(s.jobId!));
  const last = Math.max(...finished.map((s) => target.done.get(s.jobId!)!));
  return {
    offered: rate,
    posted: ids.length,
    failed: n - ids.length,
    completed: finished.length,
    throughput: finished.length / ((last - t0) / 1000),
    latencies: finished.map((s) => target.done.get(s.jobId!)! - s.at),
  };
}

/** Rates rising ×1.6 from 10/s until the completion rate stops rising; then 50% and 90% of the best. */
async function saturate(name: string, target: Target) {
  let best = 0;
  let rate = 10;
  for (;;) {
    const r = await step(target, rate);
    console.log(
      `    ${name}: offered ${rate.toFixed(0)}/s → ${r.throughput.toFixed(1)} completed/s (${r.completed}/${r.posted + r.failed}, ${r.failed} refused), p50 ${percentile(r.latencies, 50).toFixed(0)} ms`,
    );
    if (r.throughput < best * 1.1 || r.throughput < rate * 0.8) {
      best = Math.max(best, r.throughput);
      break;
    }
    best = r.throughput;
    rate *= 1.6;
  }
  const half = await step(target, best * 0.5);
  const meter = cpuMeter(target.cpu);
  const ninety = await step(target, best * 0.9);
  const cpu = perJob(meter.stop(), ninety.completed);
  console.log(`    ${name}: CPU ms per job at 90% of saturation: ${cpu}`);
  return { best, half, ninety, cpu };
}

const figures = (name: string, s: Awaited<ReturnType<typeof saturate>>, bare?: number, target?: number) => [
  row(`${name}: saturation`, s.best, 'jobs/s', bare, undefined, target),
  {
    ...row(
      `${name}: POST → complete at 50% / 90% of saturation, p50`,
      percentile(s.half.latencies, 50),
      'ms',
      undefined,
      `90%: p50 ${percentile(s.ninety.latencies, 50).toFixed(0)} ms, p99 ${percentile(s.ninety.latencies, 99).toFixed(0)} ms; 50%: p99 ${percentile(s.half.latencies, 99).toFixed(0)} ms; CPU ms per job at 90%: ${s.cpu}`,
    ),
    better: 'lower' as const,
  },
];

/**
 * How the service runs: `one` as `npm start` does (one supervisor: API, every pool, scheduler);
 * `split` as production does (a supervisor of API processes and the scheduler, another of
 * workers, as they would run on machines of their own), with `apiProcesses` API processes.
 */
interface Layout {
  engine: 'bench-no-work' | 'local';
  split: boolean;
  apiProcesses: number;
}

const layoutName = (l: Layout) =>
  `${l.split ? `split (${l.apiProcesses} API process${l.apiProcesses > 1 ? 'es' : ''} | workers)` : 'whole service'}, ${l.engine === 'local' ? 'local code engine' : 'no-work engine'}`;

async function service(layout: Layout) {
  const env = {
    LOG_LEVEL: 'warn',
    RATE_LIMIT_MAX: '1000000000',
    CODE_ENGINE: layout.engine,
    POOL_CONCURRENCY: `code=${CONCURRENCY}`,
  };
  const api = await startSupervisedApi(layout.apiProcesses, env, layout.split ? ['api', 'scheduler'] : 'all');
  const workers = layout.split
    ? await startSupervisedWorkers(api, env).catch(async (err) => {
        await api.stop();
        throw err;
      })
    : undefined;
  const done = new Map<string, number>();
  const stopListening = await listen(broker.eventsExchange(api.config.QUEUE_PREFIX), 'code_build.*', done);
  try {
    const { auth } = await benchAccount(api.config.MONGODB_URL, { credits: 1e9 });
    const headers = { ...auth, 'content-type': 'application/json' };
    return await saturate(layoutName(layout), {
      cpu: { supervisor: workers ? [api.pid, workers.pid] : api.pid },
      done,
      async post() {
        const r = await fetch(`${api.url}/code-builds`, {
          method: 'POST',
          headers: { ...headers, 'idempotency-key': randomUUID() },
          body: JSON.stringify({ prompt: 'a counter app' }),
        });
        return r.status === 202 ? ((await r.json()) as { jobId: string }).jobId : undefined;
      },
    });
  } finally {
    await stopListening();
    await workers?.stop();
    await api.stop();
  }
}

async function bare() {
  const prefix = `benchpipe${randomBytes(3).toString('hex')}.`;
  const mongo = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
  const env = { MONGODB_URL: `${mongo}/${prefix.replace('.', '')}`, BENCH_PIPELINE_PREFIX: prefix };
  const names = bareNames(prefix);
  const servers: BaselineServer[] = [];
  const done = new Map<string, number>();
  let stopListening: (() => Promise<void>) | undefined;
  try {
    servers.push(await forkBaseline(import.meta.url, 'BENCH_PIPELINE_BASELINE', 'http', env));
    servers.push(await forkBaseline(import.meta.url, 'BENCH_PIPELINE_BASELINE', 'consumer', env));
    stopListening = await listen(names.events, '', done);
    return await saturate('bare pipeline', {
      cpu: { bare: /pipeline\.bench/ },
      done,
      async post() {
        const r = await fetch(`${servers[0]!.url}/code-builds`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'a counter app' }),
        });
        return r.status === 202 ? ((await r.json()) as { jobId: string }).jobId : undefined;
      },
    });
  } finally {
    await stopListening?.();
    for (const s of servers) await s.stop();
    const conn = await amqplib.connect(AMQP_URL);
    const ch = await conn.createChannel();
    await ch.deleteQueue(names.work);
    await ch.deleteExchange(names.events);
    await conn.close();
    const { MongoClient } = await import('mongodb');
    const m = await new MongoClient(env.MONGODB_URL).connect();
    await m.db().dropDatabase();
    await m.close();
  }
}

/** Which service layouts run after the baseline: BENCH_PIPELINE_LAYOUTS, comma-separated (default all). */
const LAYOUTS: Record<string, Layout> = {
  'no-work': { engine: 'bench-no-work', split: false, apiProcesses: 1 },
  local: { engine: 'local', split: false, apiProcesses: 1 },
  'split-1': { engine: 'bench-no-work', split: true, apiProcesses: 1 },
  'split-2': { engine: 'bench-no-work', split: true, apiProcesses: 2 },
};

export const bench: Bench = {
  name: 'jobs end to end (whole service)',
  async run(): Promise<BenchRow[]> {
    const chosen = (process.env.BENCH_PIPELINE_LAYOUTS ?? Object.keys(LAYOUTS).join(',')).split(',');
    const unknown = chosen.filter((c) => !(c in LAYOUTS));
    if (unknown.length)
      throw new Error(`BENCH_PIPELINE_LAYOUTS: unknown ${unknown.join(', ')} (${Object.keys(LAYOUTS).join(', ')})`);
    // The baseline runs first and last: load that grows or fades during the run falls on both sides.
    const before = await bare();
    const results: [Layout, Awaited<ReturnType<typeof saturate>>][] = [];
    for (const name of chosen) results.push([LAYOUTS[name]!, await service(LAYOUTS[name]!)]);
    const after = await bare();
    const baseline = (before.best + after.best) / 2;
    console.log(`    bare pipeline: ${before.best.toFixed(1)} jobs/s first, ${after.best.toFixed(1)} last`);
    const rows = [
      ...figures('bare pipeline (node:http insertOne → confirmed publish → consumer), first run', before),
      ...figures('bare pipeline, last run', after),
    ];
    for (const [layout, s] of results)
      rows.push(...figures(layoutName(layout), s, baseline, layout.engine === 'bench-no-work' ? 0.3 : undefined));
    return rows;
  },
};
