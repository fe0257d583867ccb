/**
 * Live job progress: how soon a client knows that its job finished, and what an open event
 * stream costs the API process that holds it. The whole service runs out of process as `npm
 * start` runs it (supervisor, one API process, every pool, the scheduler), on the real RabbitMQ
 * and FerretDB.
 *
 *  (a) Code builds on the local code engine, posted a few per second; each is watched three ways
 *      at once: GET /jobs/{id}/events, GET /jobs/{id} with Prefer: wait=30 and If-None-Match, and
 *      GET /jobs/{id} every second (the baseline: what a client without either does). The figure
 *      is the time from the job's completion (its `updatedAt`, written by the worker) to the moment
 *      the client holds the complete envelope, p50 and p99 (same machine, same clock).
 *  (b) API processes only (jobs stay queued): BENCH_JOB_STREAMS streams (default 2,000) opened on
 *      queued jobs; the API process's resident memory (process_resident_memory_bytes from its
 *      metrics) before and after, per stream. Baseline: a bare node:http server in its own process
 *      that reads the job (one findOne) and holds an event stream open with its first event.
 */
await serveBaselineWhen('BENCH_SSE_BASELINE', (_mode, mongo) => {
  const jobs = mongo.db().collection<{ _id: string }>('jobs');
  return (req, res) => {
    if (req.url === '/rss') return void res.end(String(process.memoryUsage().rss));
    const id = decodeURIComponent(req.url!.split('/')[2] ?? '');
    jobs.findOne({ _id: id }).then(
      (job) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(`retry: 2000\n\nevent: progress\ndata: ${JSON.stringify(job)}\n\n`);
      },
      (err) => void res.writeHead(500).end(String(err)),
    );
  };
});
import { randomUUID } from 'node:crypto';
import { openSse } from '../harness/sse';
import { eventually } from '../harness/http';
import { benchAccount, percentile } from './load';
import { forkBaseline, serveBaselineWhen, startSupervisedApi, type SupervisedApi } from './processes';
import { row, type Bench, type BenchRow } from './bench';

const JOBS = Number(process.env.BENCH_JOB_EVENT_JOBS ?? 40);
const STREAMS = Number(process.env.BENCH_JOB_STREAMS ?? 2000);
const env = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000', JOB_EVENT_STREAMS_MAX: String(STREAMS + 100) };

interface Envelope {
  jobId: string;
  status: string;
  updatedAt: string;
}
const finished = (e: Envelope) => e.status === 'complete' || e.status === 'failed';

/** Milliseconds from the job's completion to the client holding it, per way of watching. */
async function watchOne(api: SupervisedApi, auth: Record<string, string>, jobId: string) {
  const url = `${api.url}/jobs/${jobId}`;
  const knew = async (watch: () => Promise<Envelope>) => {
    const final = await watch();
    return Date.now() - Date.parse(final.updatedAt);
  };
  const sse = knew(async () => {
    const s = await openSse(`${url}/events`, auth);
    const e = await s.next((m) => m.event === 'complete' || m.event === 'failed', 120_000);
    s.close();
    return JSON.parse(e.data) as Envelope;
  });
  const wait = knew(async () => {
    let etag: string | undefined;
    for (;;) {
      const r = await fetch(url, {
        headers: { ...auth, prefer: 'wait=30', ...(etag ? { 'if-none-match': etag } : {}) },
      });
      if (r.status === 304) continue;
      const body = (await r.json()) as Envelope;
      if (finished(body)) return body;
      etag = r.headers.get('etag') ?? undefined;
    }
  });
  const poll = knew(async () => {
    // A poller's phase has nothing to do with when the job finishes.
    await new Promise((r) => setTimeout(r, Math.random() * 1000));
    for (;;) {
      const body = (await (await fetch(url, { headers: auth })).json()) as Envelope;
      if (finished(body)) return body;
      await new Promise((r) => setTimeout(r, 1000));
    }
  });
  const [s, w, p] = await Promise.all([sse, wait, poll]);
  return { sse: s, wait: w, poll: p };
}

async function latency(): Promise<BenchRow[]> {
  const api = await startSupervisedApi(1, env, 'all');
  try {
    const { auth } = await benchAccount(api.config.MONGODB_URL, { credits: 1e6 });
    const results: Awaited<ReturnType<typeof watchOne>>[] = [];
    const watching: Promise<void>[] = [];
    for (let i = 0; i < JOBS; i++) {
      const r = await fetch(`${api.url}/code-builds`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify({ prompt: `a counter app number ${i}` }),
      });
      const { jobId } = (await r.json()) as { jobId: string };
      watching.push(watchOne(api, auth, jobId).then((x) => void results.push(x)));
      await new Promise((r) => setTimeout(r, 250)); // a few per second: the pool keeps up
    }
    await Promise.all(watching);
    const p = (k: 'sse' | 'wait' | 'poll', q: number) =>
      percentile(
        results.map((x) => x[k]),
        q,
      );
    const note = `${JOBS} code builds, each watched three ways at once; baseline = GET /jobs/{id} every second`;
    return [
      row('job completion → client knows, event stream, p50', p('sse', 50), 'ms', p('poll', 50), note),
      row('job completion → client knows, event stream, p99', p('sse', 99), 'ms', p('poll', 99)),
      row('job completion → client knows, Prefer: wait, p50', p('wait', 50), 'ms', p('poll', 50)),
      row('job completion → client knows, Prefer: wait, p99', p('wait', 99), 'ms', p('poll', 99)),
      row('job completion → client knows, polling every 1 s, p50', p('poll', 50), 'ms'),
    ].map((x) => ({ ...x, better: 'lower' as const }));
  } finally {
    await api.stop();
  }
}

/** A gauge or counter of the API processes, summed over its labels matching `labels`. */
async function metric(api: SupervisedApi, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(api.metricsUrl)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .filter((l) => l.includes(labels))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

async function capacity(): Promise<BenchRow[]> {
  const api = await startSupervisedApi(1, env, 'api');
  const streams: Awaited<ReturnType<typeof openSse>>[] = [];
  try {
    const { auth } = await benchAccount(api.config.MONGODB_URL, { credits: 1e6 });
    const jobIds: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${api.url}/code-builds`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: `queued ${i}` }),
      });
      jobIds.push(((await r.json()) as { jobId: string }).jobId);
    }
    // Warm: one stream per job, then closed, so the figure is the streams' own cost.
    for (const id of jobIds) (await openSse(`${api.url}/jobs/${id}/events`, auth)).close();
    await new Promise((r) => setTimeout(r, 2000));
    const before = await metric(api, 'process_resident_memory_bytes');
    for (let i = 0; i < STREAMS; i += 100) {
      const batch = await Promise.all(
        jobIds.flatMap((id) => Array.from({ length: 5 }, () => openSse(`${api.url}/jobs/${id}/events`, auth))),
      );
      streams.push(...batch);
    }
    await eventually(
      async () => (await metric(api, 'job_watchers', 'kind="stream"')) >= streams.length,
      60_000,
      'every stream held',
    );
    await new Promise((r) => setTimeout(r, 2000));
    const after = await metric(api, 'process_resident_memory_bytes');
    const held = streams.length;
    const perStreamKiB = (after - before) / held / 1024;
    for (const s of streams.splice(0)) s.close();

    // The same streams on the bare server, on the same jobs.
    const bare = await forkBaseline(import.meta.url, 'BENCH_SSE_BASELINE', 'sse', {
      MONGODB_URL: api.config.MONGODB_URL,
    });
    let bareKiB: number;
    try {
      const rss = async () => Number(await (await fetch(`${bare.url}/rss`)).text());
      for (const id of jobIds) (await openSse(`${bare.url}/jobs/${id}/events`)).close();
      await new Promise((r) => setTimeout(r, 2000));
      const b0 = await rss();
      for (let i = 0; i < STREAMS; i += 100) {
        const batch = await Promise.all(
          jobIds.flatMap((id) => Array.from({ length: 5 }, () => openSse(`${bare.url}/jobs/${id}/events`))),
        );
        for (const s of batch) await s.next();
        streams.push(...batch);
      }
      await new Promise((r) => setTimeout(r, 2000));
      bareKiB = ((await rss()) - b0) / streams.length / 1024;
    } finally {
      for (const s of streams.splice(0)) s.close();
      await bare.stop();
    }
    return [
      row(
        'open job event streams held by one API process',
        held,
        'streams',
        undefined,
        `resident memory ${(before / 2 ** 20).toFixed(0)} → ${(after / 2 ** 20).toFixed(0)} MiB`,
      ),
      {
        ...row(
          'resident memory per open job event stream',
          perStreamKiB,
          'KiB',
          bareKiB,
          'baseline = bare node:http holding the same streams after one findOne',
        ),
        better: 'lower',
      },
    ];
  } finally {
    for (const s of streams) s.close();
    await api.stop();
  }
}

export const bench: Bench = {
  name: 'job events (live progress)',
  async run() {
    return [...(await latency()), ...(await capacity())];
  },
};
