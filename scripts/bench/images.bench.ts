/**
 * Images benchmarks, against the real RabbitMQ and FerretDB on this machine:
 *  (a) in this process, no queue, no HTTP, 1024x1024 PNGs: the old procedural renderers
 *      (scripts/bench/baselines/image-*.ts, copied from git, baseline only) against the new scene
 *      composer, same prompts, same run: moonlight, the composer in each style, and the /images
 *      local engine per engine name. The target asks the new renderers to keep at least 0.5 of the
 *      old ones' renders per second.
 *  (s) the output scorer on the new renders: skin-tone share of BENCH_IMAGE_SAFETY_RENDERS benign
 *      prompts x seeds (max seen, how many reach MOONLIGHT_ADULT_THRESHOLD) against the documented
 *      all-skin-tone prompt (safety.ts).
 *  (b) moonlight renders per second through the whole path (HTTP → API → RabbitMQ request/reply →
 *      one image worker process → reply → HTTP), one real `tsx workers/main.ts` process with
 *      WORKER_POOLS=image and concurrency 1, driven by C concurrent HTTP clients.
 *  (c) the same with two worker processes: how the image pool scales from 1 to 2 processes.
 *  (d) POST /images (render + GridFS store + signed URL) with two worker processes.
 * The API runs in this process; the workers are separate processes on the same bench database
 * and queue prefix. Every render is a real 1-megapixel PNG.
 */
import type { ChildProcess } from 'node:child_process';
import { client } from '../harness/http';
import { startStack } from '../harness/stack';
import { loadConfig } from '../../platform/infra/config';
import { seedBytes } from '../../workers/engines/images/procedural';
import { localMoonlight } from '../../workers/engines/images/moonlight.engine';
import { renderScene } from '../../workers/engines/images/render';
import type { Style } from '../../workers/engines/images/scene';
import { createLocalImageEngine } from '../../workers/engines/images/local.engine';
import { createLocalImageEngineBaseline } from './baselines/image-local';
import { renderMoonlightBaseline } from './baselines/image-moonlight';
import { row, type Bench, type BenchRow } from './bench';
import { spawnResponderWorker } from './processes';

const N = Number(process.env.BENCH_IMAGE_RENDERS ?? 40);
const CONCURRENCY = Number(process.env.BENCH_IMAGE_CONCURRENCY ?? 4);
const SAFETY_RENDERS = Number(process.env.BENCH_IMAGE_SAFETY_RENDERS ?? 200);
const PROMPTS = [
  'a lighthouse on a cliff at night',
  'a lighthouse on a cliff at sunset, oil painting',
  'a cabin in a snowy forest, watercolour',
  'a city skyline at dusk',
];

/** Benign prompts for the scorer: warm, sandy and skin-adjacent scenes on purpose (its hard cases). */
const SAFETY_SUBJECTS = [
  'a lighthouse on a cliff',
  'a desert with pyramids',
  'a fox in a field',
  'a cabin by a lake',
  'a beach with palm trees',
  'a city skyline',
  'a horse on a meadow',
  'a dog on a road',
  'a campfire by a tent',
  'a castle on a hill',
  'a person on a bench',
  'orange sunset',
  'golden wheat field',
  'a deer in the forest',
  'a boat on the sea',
  'a volcano',
  'sand dunes',
  'a cat by a house',
  'brown horse in a field',
  'a teal lagoon',
  'an abstract composition',
  'a warm golden portrait of a woman',
  'tan sand dunes at dawn',
  'a bronze statue',
  'caramel coloured clouds',
];
const SAFETY_SETTINGS = [
  'at sunset',
  'at dawn',
  'by day',
  'at night',
  'in the fog',
  'at dusk, oil painting',
  'at sunset, watercolour',
  'in autumn, flat vector',
];

/** Renders per second of `render` over the PROMPTS, after one warm-up. */
async function perSecond(n: number, render: (prompt: string, i: number) => Promise<unknown>) {
  await render('warm-up', 0);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await render(PROMPTS[i % PROMPTS.length]!, i);
  return n / ((performance.now() - t0) / 1000);
}

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
  name: 'images (old vs new renderer, output scorer, moonlight pool scaling 1 → 2 worker processes)',
  // Length: one bench: its sections (old against new renderer, the output scorer, pool scaling) fill one list
  // of rows in order.
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    // (a) old against new, in process.
    const signal = new AbortController().signal;
    const baseN = Math.max(8, Math.floor(N / 4));
    const old = await perSecond(baseN, (prompt, seed) =>
      renderMoonlightBaseline({ prompt, aspectRatio: '1:1', seed, steps: 8, cfg: 1 }, signal),
    );
    rows.push(
      row(
        'old moonlight-procedural-v1 renders/s in-process (baseline)',
        old,
        'renders/s',
        undefined,
        '1024x1024, 8 noise octaves, hand-written PNG encoder; copied from git',
      ),
    );
    const baseline = await perSecond(baseN, (prompt, seed) =>
      localMoonlight.render({ prompt, aspectRatio: '1:1', seed, steps: 8, cfg: 1 }, signal),
    );
    rows.push(
      row(
        'new moonlight-scene-v2 renders/s in-process',
        baseline,
        'renders/s',
        old,
        '1024x1024, scene SVG → sharp → style texture → sharp PNG; same prompts',
        0.5,
      ),
    );
    for (const style of ['oil', 'watercolour', 'flat', 'photo'] as Style[]) {
      // The style field names the style, so it wins over any style word in the prompt.
      const rate = await perSecond(baseN, (prompt, i) =>
        renderScene(
          {
            width: 1024,
            height: 1024,
            seed: seedBytes('bench', prompt, i),
            prompt,
            styleText: style,
            defaultStyle: style,
            text: {},
          },
          signal,
        ),
      );
      rows.push(
        row(
          `new scene renders/s in-process, ${style} texture forced`,
          rate,
          'renders/s',
          old,
          'baseline = old renderer',
          0.5,
        ),
      );
    }

    // The /images local engine, old against new, per public engine name (its default style).
    const oldLocal = createLocalImageEngineBaseline();
    const newLocal = createLocalImageEngine();
    for (const engine of ['svc-ultra', 'svc-creative', 'svc-imagine', 'svc-rapid'] as const) {
      const input = (prompt: string, seed: number) => ({
        prompt,
        engine,
        aspectRatio: '1:1' as const,
        width: 1024,
        height: 1024,
        style: null,
        referenceColours: [],
        seed,
      });
      const before = await perSecond(baseN, (prompt, i) => oldLocal.render(input(prompt, i), { signal }));
      const after = await perSecond(baseN, (prompt, i) => newLocal.render(input(prompt, i), { signal }));
      rows.push(
        row(
          `POST /images local engine renders/s in-process, ${engine}: new local-scene-v2`,
          after,
          'renders/s',
          before,
          'baseline = old local-procedural-v1 in the same run',
          0.5,
        ),
      );
    }

    // (s) the output scorer on benign renders.
    const threshold = loadConfig({}).MOONLIGHT_ADULT_THRESHOLD;
    const scores: number[] = [];
    outer: for (const subject of SAFETY_SUBJECTS) {
      for (const setting of SAFETY_SETTINGS) {
        if (scores.length >= SAFETY_RENDERS) break outer;
        scores.push(
          (
            await localMoonlight.render(
              { prompt: `${subject} ${setting}`, aspectRatio: '1:1', seed: scores.length * 7919, steps: 8, cfg: 1 },
              signal,
            )
          ).adultScore,
        );
      }
    }
    const refused = scores.filter((s) => s >= threshold).length;
    const proxy = (
      await localMoonlight.render(
        { prompt: 'macro study of peach and tan silk folds', aspectRatio: '1:1', seed: 11, steps: 8, cfg: 1 },
        signal,
      )
    ).adultScore;
    rows.push(
      row(
        'output scorer: max skin-tone share on benign renders',
        Math.max(...scores),
        'share',
        undefined,
        `${scores.length} prompts x seeds; ${refused} reach the threshold ${threshold}; "macro study of peach and tan silk folds" scores ${proxy.toFixed(3)}`,
      ),
    );
    rows.push(
      row(
        'output scorer: benign renders refused at the default threshold',
        refused,
        'renders',
        undefined,
        `of ${scores.length}; median share ${[...scores].sort((a, b) => a - b)[Math.floor(scores.length / 2)]!.toFixed(3)}`,
      ),
    );

    const stack = await startStack({
      workers: false,
      scheduler: false,
      env: { IMAGE_RPC_TIMEOUT_MS: '120000', RATE_LIMIT_MAX: '100000' },
    });
    const workers: ChildProcess[] = [];
    try {
      const { key } = await stack.createAccount({ credits: 1_000_000 });
      const api = client(stack.baseUrl, key);
      const moonlight = (i: number) =>
        api.post('/images/moonlight', { prompt: 'a lighthouse on a cliff at night', seed: i }).then((r) => r.status);

      workers.push(await spawnResponderWorker(stack.config, 'image', 1));
      await drive(moonlight, CONCURRENCY, CONCURRENCY); // warm-up
      const one = await drive(moonlight, N, CONCURRENCY);
      rows.push(
        row(
          'moonlight renders/s over HTTP, 1 image worker process',
          one.perSecond,
          'renders/s',
          baseline,
          `mean latency ${Math.round(one.meanMs)} ms at ${CONCURRENCY} concurrent clients`,
        ),
      );

      workers.push(await spawnResponderWorker(stack.config, 'image', 1));
      await drive(moonlight, CONCURRENCY, CONCURRENCY);
      const two = await drive(moonlight, N, CONCURRENCY);
      rows.push(
        row(
          'moonlight renders/s over HTTP, 2 image worker processes',
          two.perSecond,
          'renders/s',
          one.perSecond,
          `baseline = 1 process; mean latency ${Math.round(two.meanMs)} ms`,
        ),
      );
      rows.push(
        row(
          'moonlight renders/s per image worker process (2 processes)',
          two.perSecond / 2,
          'renders/s',
          baseline,
          'baseline = in-process',
        ),
      );

      const images = (i: number) =>
        api.post('/images', { prompt: `a fox in the snow ${i}`, engine: 'svc-ultra' }).then((r) => r.status);
      const stored = await drive(images, N, CONCURRENCY);
      rows.push(
        row(
          'POST /images renders/s (stored, signed URL), 2 image worker processes',
          stored.perSecond,
          'renders/s',
          two.perSecond,
          `baseline = moonlight, 2 processes; mean latency ${Math.round(stored.meanMs)} ms`,
        ),
      );
    } finally {
      await Promise.all(workers.map(stopWorker));
      await stack.stop();
    }
    return rows;
  },
};
