/**
 * Issue 4 benchmarks (images), against the real RabbitMQ and FerretDB on this machine:
 *  (a) baseline: moonlight renders per second in this process, no queue, no HTTP (the painter and
 *      the PNG encoder alone, 1024x1024, 8 steps).
 *  (b) moonlight renders per second through the whole path (HTTP → API → RabbitMQ request/reply →
 *      one image worker process → reply → HTTP), one real `tsx workers/main.ts` process with
 *      WORKER_POOLS=image and concurrency 1, driven by C concurrent HTTP clients.
 *  (c) the same with two worker processes: how the image pool scales from 1 to 2 processes.
 *  (d) POST /images (render + GridFS store + signed URL) with two worker processes.
 * The API runs in this process; the workers are separate processes on the same bench database
 * and queue prefix. Every render is a real 1-megapixel PNG.
 */
import type { ChildProcess } from 'node:child_process';
import { client } from '../../test/helpers/http';
import { startStack } from '../../test/helpers/stack';
import { renderMoonlight } from '../../workers/engines/image/moonlight.engine';
import { row, type Bench, type BenchRow } from './bench';
import { spawnResponderWorker } from './processes';

const N = Number(process.env.BENCH_IMAGE_RENDERS ?? 40);
const CONCURRENCY = Number(process.env.BENCH_IMAGE_CONCURRENCY ?? 4);


const stopWorker = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });

/** N requests from `concurrency` clients; renders per second and mean latency. */
async function drive(send: (i: number) => Promise<number>, n: number, concurrency: number) {
  let next = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    [...Array(concurrency).keys()].map(async () => {
      while (next < n) {
        const i = next++;
        const s = performance.now();
        const status = await send(i);
        if (status !== 200) throw new Error(`render ${i} answered ${status}`);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { perSecond: n / seconds, meanMs: latencies.reduce((a, b) => a + b, 0) / latencies.length };
}

export const bench: Bench = {
  name: 'images (moonlight renders, image pool scaling 1 → 2 worker processes)',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    // (a) baseline in-process.
    const signal = new AbortController().signal;
    await renderMoonlight({ prompt: 'warm-up', aspectRatio: '1:1', seed: 1, steps: 8, cfg: 1 }, signal);
    const b0 = performance.now();
    const baseN = Math.max(5, Math.floor(N / 4));
    for (let i = 0; i < baseN; i++) await renderMoonlight({ prompt: 'a lighthouse on a cliff at night', aspectRatio: '1:1', seed: i, steps: 8, cfg: 1 }, signal);
    const baseline = baseN / ((performance.now() - b0) / 1000);
    rows.push(row('moonlight renders/s in-process (no queue, no HTTP)', baseline, 'renders/s', undefined, '1024x1024, 8 steps, PNG encoded'));

    const stack = await startStack({ workers: false, scheduler: false, env: { IMAGE_RPC_TIMEOUT_MS: '120000', RATE_LIMIT_MAX: '100000' } });
    const workers: ChildProcess[] = [];
    try {
      const { key } = await stack.createAccount({ credits: 1_000_000 });
      const api = client(stack.baseUrl, key);
      const moonlight = (i: number) => api.post('/images/moonlight', { prompt: 'a lighthouse on a cliff at night', seed: i }).then((r) => r.status);

      workers.push(await spawnResponderWorker(stack.config, 'image', 1));
      await drive(moonlight, CONCURRENCY, CONCURRENCY); // warm-up
      const one = await drive(moonlight, N, CONCURRENCY);
      rows.push(row('moonlight renders/s over HTTP, 1 image worker process', one.perSecond, 'renders/s', baseline, `mean latency ${Math.round(one.meanMs)} ms at ${CONCURRENCY} concurrent clients`));

      workers.push(await spawnResponderWorker(stack.config, 'image', 1));
      await drive(moonlight, CONCURRENCY, CONCURRENCY);
      const two = await drive(moonlight, N, CONCURRENCY);
      rows.push(row('moonlight renders/s over HTTP, 2 image worker processes', two.perSecond, 'renders/s', one.perSecond, `baseline = 1 process; mean latency ${Math.round(two.meanMs)} ms`));
      rows.push(row('moonlight renders/s per image worker process (2 processes)', two.perSecond / 2, 'renders/s', baseline, 'baseline = in-process'));

      const images = (i: number) => api.post('/images', { prompt: `a fox in the snow ${i}`, engine: 'svc-ultra' }).then((r) => r.status);
      const stored = await drive(images, N, CONCURRENCY);
      rows.push(row('POST /images renders/s (stored, signed URL), 2 image worker processes', stored.perSecond, 'renders/s', two.perSecond, `baseline = moonlight, 2 processes; mean latency ${Math.round(stored.meanMs)} ms`));
    } finally {
      await Promise.all(workers.map(stopWorker));
      await stack.stop();
    }
    return rows;
  },
};
