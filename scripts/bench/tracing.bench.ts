/**
 * What tracing costs on the API's hot path (issue 23 item 5): the same API (one `api/main.ts`
 * process, no workers: accepted jobs just queue) started in this run once without tracing (no
 * OTEL_* set: the SDK is never imported) and once with tracing on, every request sampled
 * (OTEL_TRACES_SAMPLER=always_on) and exported by the SDK's batch processor with its default
 * settings to a local OTLP/HTTP receiver that counts the spans and drops them. They run side by
 * side, each on its own fresh database and queue prefix; autocannon loads one at a time, in turn (the gateway
 * bench's `compare`: BENCH_ROUNDS rounds of BENCH_SECONDS, alternating which goes first), so
 * load from elsewhere on a shared machine falls on both alike.
 *  (a) authenticated GET /jobs/{id} of an in-flight job (the job cache answers it)
 *  (b) POST /code-builds accepted (credit-lease path: one database command and a confirmed publish)
 * Each as req/s of "on" against "off" (the ratio is what tracing leaves), with both p99s; then
 * the same with a third API sampling one trace in ten (parentbased_traceidratio 0.1), what a
 * busy deployment would run.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../platform/config';
import { connectMongo } from '../../platform/mongo';
import { otlpEnv, startOtlpReceiver } from '../../test/helpers/otlp-receiver';
import { dropEverything, freePort } from '../../test/helpers/stack';
import { row, type Bench, type BenchRow } from './bench';
import { compare, detail, type Target } from './gateway.bench';
import { benchAccount } from './load';
import { benchConfig } from './processes';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Api {
  url: string;
  config: Config;
  stop(): Promise<void>;
}

/** One API process (`api/main.ts`, as runMain starts it) on a fresh database and queue prefix; resolves once /healthz answers. */
async function startApi(env: Record<string, string>): Promise<Api> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = benchConfig({ ...env, PORT: String(port), PUBLIC_BASE_URL: base });
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), PUBLIC_BASE_URL: base, MONGODB_URL: config.MONGODB_URL, QUEUE_PREFIX: config.QUEUE_PREFIX },
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
    const up = await fetch(`${base}/healthz`).then((r) => r.ok, () => false);
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error('the API process did not come up');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url: `${base}/api/v1`, config, stop };
}

const API_ENV = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' };
const BODY = JSON.stringify({ prompt: 'a counter' });
const JSON_BODY = { 'content-type': 'application/json' };

/** A bench account with a huge balance and one queued code build, through the running API. */
async function prepare(api: Api): Promise<{ get: Target; post: Target }> {
  const db = await connectMongo(api.config.MONGODB_URL);
  try {
    const { auth } = await benchAccount(db, { credits: 1e12 });
    const res = await fetch(`${api.url}/code-builds`, { method: 'POST', headers: { ...auth, ...JSON_BODY }, body: BODY });
    if (res.status !== 202) throw new Error(`POST /code-builds answered ${res.status}: ${await res.text()}`);
    const { jobId } = (await res.json()) as { jobId: string };
    return { get: { url: `${api.url}/jobs/${jobId}`, headers: auth }, post: { url: `${api.url}/code-builds`, method: 'POST', headers: { ...auth, ...JSON_BODY }, body: BODY } };
  } finally {
    await db.close();
  }
}

export const bench: Bench = {
  name: 'tracing cost (issue 23)',
  async run(): Promise<BenchRow[]> {
    const otlp = await startOtlpReceiver({ keep: false });
    const off = await startApi(API_ENV);
    let on: Api | undefined;
    let tenth: Api | undefined;
    try {
      // The SDK's defaults otherwise: batches of 512 spans, at least every 5 s, a queue of 2048.
      on = await startApi({ ...API_ENV, ...otlpEnv(otlp, { OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '5000' }) });
      tenth = await startApi({ ...API_ENV, ...otlpEnv(otlp, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1', OTEL_BSP_SCHEDULE_DELAY: '5000' }) });
      const [a, b, c] = [await prepare(off), await prepare(on), await prepare(tenth)];
      const spansBefore = otlp.received;
      const get = await compare(a.get, b.get);
      const post = await compare(a.post, b.post);
      // Let the last batch go out, then see what the traced API exported per request.
      await new Promise((r) => setTimeout(r, 6000));
      const requests = (get.value.rps + post.value.rps) * Number(process.env.BENCH_SECONDS ?? 3) * Number(process.env.BENCH_ROUNDS ?? 3);
      const spans = otlp.received - spansBefore;
      const exported = `${spans} spans exported to the local receiver (${(spans / Math.max(1, requests)).toFixed(1)} per measured request, warm-ups included)`;
      const get10 = await compare(a.get, c.get);
      const post10 = await compare(a.post, c.post);
      return [
        row('(a) GET /jobs/{id}, tracing on (100% sampled), req/s', get.value.rps, 'req/s', get.base.rps, detail(get, 'same API, tracing off')),
        row('(b) POST /code-builds accepted, tracing on (100% sampled), req/s', post.value.rps, 'req/s', post.base.rps, `${detail(post, 'same API, tracing off')}; ${exported}`),
        row('(c) GET /jobs/{id}, tracing on (10% sampled), req/s', get10.value.rps, 'req/s', get10.base.rps, detail(get10, 'same API, tracing off')),
        row('(d) POST /code-builds accepted, tracing on (10% sampled), req/s', post10.value.rps, 'req/s', post10.base.rps, detail(post10, 'same API, tracing off')),
      ];
    } finally {
      await Promise.allSettled([off.stop(), on?.stop(), tenth?.stop()]);
      await otlp.close();
    }
  },
};
