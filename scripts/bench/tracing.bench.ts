/**
 * What tracing costs on the API's hot path: one API process (`api/main.ts`,
 * no workers: accepted jobs just queue) with tracing on, every request sampled
 * (OTEL_TRACES_SAMPLER=always_on) and exported by the SDK's batch processor with its default
 * settings to a local OTLP/HTTP receiver that counts the spans and drops them, against a twin
 * without tracing (no OTEL_* set: the SDK is never imported), started beside it in this run, each
 * on its own fresh database and queue prefix; autocannon loads one at a time, in turn (the
 * gateway bench's `compare`: BENCH_ROUNDS rounds of BENCH_SECONDS, alternating which goes
 * first), so load from elsewhere on a shared machine falls on both alike.
 *  (a) authenticated GET /jobs/{id} of an in-flight job (the job cache answers it)
 *  (b) POST /code-builds accepted (credit-lease path: one database command and a confirmed publish)
 * Each as req/s of "on" against "off" (the ratio is what tracing leaves), with both p99s, and as
 * the API process's CPU time per request (its own /metrics: process_cpu_seconds_total over
 * http_request_duration_seconds_count, the span export included), which a busy shared machine
 * disturbs less than throughput. Then the same with one trace in ten sampled
 * (parentbased_traceidratio 0.1), what a busy deployment would run, against a twin of its own.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../build-once';
import type { Config } from '../../platform/infra/config';
import { connectMongo } from '../../platform/infra/mongo';
import { otlpEnv, startOtlpReceiver, type OtlpReceiver } from '../harness/otlp-receiver';
import { dropEverything, freePort } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';
import { compare, detail, load, type Target } from './gateway.bench';
import { benchAccount } from './load';
import { benchConfig } from './processes';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Api {
  url: string;
  /** The process's CPU seconds so far and the API requests it answered (its /metrics). */
  usage(): Promise<{ cpu: number; requests: number }>;
  config: Config;
  stop(): Promise<void>;
}

/** One compiled API process (`node dist/api/main.js`, as the image runs it) on a fresh database and queue prefix; resolves once /healthz answers. */
async function startApi(env: Record<string, string>): Promise<Api> {
  await ensureBuilt();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = benchConfig({ ...env, PORT: String(port), PUBLIC_BASE_URL: base });
  const child = spawn(process.execPath, ['dist/api/main.js'], {
    cwd: root,
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      METRICS_PORT: '0',
      METRICS_ON_API_PORT: 'true',
      PUBLIC_BASE_URL: base,
      MONGODB_URL: config.MONGODB_URL,
      QUEUE_PREFIX: config.QUEUE_PREFIX,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    await dropEverything(config);
  };
  for (const deadline = Date.now() + 120_000; ; ) {
    const up = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error('the API process did not come up');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const usage = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    let cpu = 0;
    let requests = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('process_cpu_seconds_total ')) cpu = Number(line.split(' ')[1]);
      else if (line.startsWith('http_request_duration_seconds_count{') && !line.includes('route="/metrics"'))
        requests += Number(line.split(' ').pop());
    }
    return { cpu, requests };
  };
  return { url: `${base}/api/v1`, config, stop, usage };
}

/** `fn`'s CPU milliseconds per request answered, for each API (the /metrics reads themselves are left out). */
async function cpuPerRequest<T>(
  apis: Api[],
  fn: () => Promise<T>,
): Promise<{ result: T; ms: number[]; requestsBefore: number[] }> {
  const before = await Promise.all(apis.map((a) => a.usage()));
  const result = await fn();
  const after = await Promise.all(apis.map((a) => a.usage()));
  return {
    result,
    ms: after.map((u, i) => ((u.cpu - before[i]!.cpu) * 1000) / Math.max(1, u.requests - before[i]!.requests)),
    requestsBefore: before.map((u) => u.requests),
  };
}

const API_ENV = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' };
const BODY = JSON.stringify({ prompt: 'a counter' });
const JSON_BODY = { 'content-type': 'application/json' };

/** A bench account with a huge balance and one queued code build, through the running API. */
async function prepare(api: Api): Promise<{ get: Target; post: Target }> {
  const db = await connectMongo(api.config.MONGODB_URL);
  try {
    const { auth } = await benchAccount(db, { credits: 1e12 });
    const res = await fetch(`${api.url}/code-builds`, {
      method: 'POST',
      headers: { ...auth, ...JSON_BODY },
      body: BODY,
    });
    if (res.status !== 202) throw new Error(`POST /code-builds answered ${res.status}: ${await res.text()}`);
    const { jobId } = (await res.json()) as { jobId: string };
    return {
      get: { url: `${api.url}/jobs/${jobId}`, headers: auth },
      post: { url: `${api.url}/code-builds`, method: 'POST', headers: { ...auth, ...JSON_BODY }, body: BODY },
    };
  } finally {
    await db.close();
  }
}

/**
 * One traced setting against its own untraced twin: both started together on fresh databases,
 * warmed alike (BENCH_TRACING_WARMUP_SECONDS=5 s of each request), then measured in turn. A
 * twin per setting, because an API measured later against one that has served longer looked
 * slower by itself (up to 0.3 on the CPU ratio in trial runs).
 */
async function pair(tracing: Record<string, string>, otlp: OtlpReceiver) {
  const off = await startApi(API_ENV);
  let on: Api | undefined;
  try {
    on = await startApi({ ...API_ENV, ...otlpEnv(otlp, tracing) });
    const [a, b] = [await prepare(off), await prepare(on)];
    const warmup = Number(process.env.BENCH_TRACING_WARMUP_SECONDS ?? 5);
    for (const t of [a, b]) {
      await load(t.get, warmup);
      await load(t.post, warmup);
    }
    const spansBefore = otlp.received;
    const get = await cpuPerRequest([off, on], () => compare(a.get, b.get));
    const post = await cpuPerRequest([off, on], () => compare(a.post, b.post));
    // Let the last batch go out, then count what the traced API exported per request it answered.
    await new Promise((r) => setTimeout(r, Number(tracing.OTEL_BSP_SCHEDULE_DELAY ?? 5000) + 1000));
    const answered = (await on.usage()).requests;
    return {
      get,
      post,
      spans: otlp.received - spansBefore,
      perRequest: (otlp.received - spansBefore) / Math.max(1, answered - get.requestsBefore[1]!),
    };
  } finally {
    await Promise.allSettled([off.stop(), on?.stop()]);
  }
}

export const bench: Bench = {
  name: 'tracing cost',
  async run(): Promise<BenchRow[]> {
    const otlp = await startOtlpReceiver({ keep: false });
    try {
      // The SDK's defaults otherwise: batches of 512 spans, at least every 5 s, a queue of 2048.
      const all = await pair({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '5000' }, otlp);
      const tenth = await pair(
        {
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: '0.1',
          OTEL_BSP_SCHEDULE_DELAY: '5000',
        },
        otlp,
      );
      const off = 'same API, tracing off';
      const cpu = (name: string, ms: number[]) => ({
        ...row(name, ms[1]! * 1000, 'µs', ms[0]! * 1000),
        note: 'baseline: tracing off (process_cpu_seconds_total per request, span export included)',
      });
      return [
        row(
          '(a) GET /jobs/{id}, tracing on (100% sampled), req/s',
          all.get.result.value.rps,
          'req/s',
          all.get.result.base.rps,
          detail(all.get.result, off),
        ),
        row(
          '(b) POST /code-builds accepted, tracing on (100% sampled), req/s',
          all.post.result.value.rps,
          'req/s',
          all.post.result.base.rps,
          `${detail(all.post.result, off)}; ${all.spans} spans exported, ${all.perRequest.toFixed(1)} per request`,
        ),
        cpu('(c) GET /jobs/{id}, API CPU per request, tracing on (100%)', all.get.ms),
        cpu('(d) POST /code-builds, API CPU per request, tracing on (100%)', all.post.ms),
        row(
          '(e) GET /jobs/{id}, tracing on (10% sampled), req/s',
          tenth.get.result.value.rps,
          'req/s',
          tenth.get.result.base.rps,
          detail(tenth.get.result, off),
        ),
        row(
          '(f) POST /code-builds accepted, tracing on (10% sampled), req/s',
          tenth.post.result.value.rps,
          'req/s',
          tenth.post.result.base.rps,
          `${detail(tenth.post.result, off)}; ${tenth.spans} spans exported, ${tenth.perRequest.toFixed(2)} per request`,
        ),
        cpu('(g) GET /jobs/{id}, API CPU per request, tracing on (10%)', tenth.get.ms),
        cpu('(h) POST /code-builds, API CPU per request, tracing on (10%)', tenth.post.ms),
      ];
    } finally {
      await otlp.close();
    }
  },
};
