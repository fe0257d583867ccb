/**
 * `npm run screenshots`: regenerates the pictures of what the local engines make (docs/*.png, shown in
 * docs/capabilities/README.md).
 * Starts a throwaway stack (API, worker pools and scheduler in this process, its own database and
 * queue prefix on the local FerretDB and RabbitMQ, dropped at the end), then, over HTTP like any
 * client: POST /presentations and the deck's first slide → docs/slide.png; POST /images →
 * docs/image.png; POST /images/moonlight → docs/moonlight.png. The renders are deterministic, so
 * the files change only when a renderer does.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { client, waitForJob } from './harness/http';
import { startStack } from './harness/stack';

const docs = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs');

/** What each picture shows (also printed, so the docs can quote the requests). */
export const SHOTS = {
  slide: {
    name: 'Quarterly review',
    brief:
      'We grew revenue 40% in Q2, led by the new self-serve plan. Churn fell from 5% to 3% after the onboarding redesign. Next quarter we open two regional offices and hire twelve engineers.',
    slideCount: 5,
  },
  image: {
    prompt: 'a cabin in a snowy pine forest at night under the stars, watercolour',
    engine: 'svc-ultra',
    aspectRatio: '16:9',
    includeBase64: true,
  },
  moonlight: { prompt: 'a lighthouse on a cliff at sunset, oil painting', seed: 42 },
} as const;

const fromDataUrl = (s: string) => Buffer.from(s.slice(s.indexOf(',') + 1), 'base64');

async function main() {
  const stack = await startStack({ env: { LOG_LEVEL: 'warn' } });
  try {
    const { key } = await stack.createAccount({ plan: 'pro', credits: 1000 });
    const api = client(stack.baseUrl, key);
    mkdirSync(docs, { recursive: true });

    const deck = await api.post('/presentations', SHOTS.slide);
    if (deck.status !== 201) throw new Error(`POST /presentations answered ${deck.status}: ${deck.text}`);
    const job = await waitForJob(api, deck.body.job.jobId, ['complete', 'failed'], 120_000);
    if (job.status !== 'complete') throw new Error(`deck job ${job.status}: ${job.error}`);
    const slide = await fetch(job.result.slides[0].imageUrl);
    writeFileSync(path.join(docs, 'slide.png'), Buffer.from(await slide.arrayBuffer()));

    const image = await api.post('/images', SHOTS.image);
    if (image.status !== 200) throw new Error(`POST /images answered ${image.status}: ${image.text}`);
    writeFileSync(path.join(docs, 'image.png'), fromDataUrl(image.body.base64));

    const moon = await api.post('/images/moonlight', SHOTS.moonlight);
    if (moon.status !== 200) throw new Error(`POST /images/moonlight answered ${moon.status}: ${moon.text}`);
    writeFileSync(path.join(docs, 'moonlight.png'), fromDataUrl(moon.body.base64));

    console.log(
      `docs/slide.png      ${job.result.engine}, first of ${job.result.slideCount} slides: POST /presentations ${JSON.stringify(SHOTS.slide)}`,
    );
    console.log(
      `docs/image.png      ${image.body.renderer} (${image.body.engine}) ${image.body.width}x${image.body.height}: POST /images ${JSON.stringify(SHOTS.image)}`,
    );
    console.log(
      `docs/moonlight.png  ${moon.body.engine} ${moon.body.width}x${moon.body.height}: POST /images/moonlight ${JSON.stringify(SHOTS.moonlight)}`,
    );
  } finally {
    await stack.stop();
  }
}

await main();
