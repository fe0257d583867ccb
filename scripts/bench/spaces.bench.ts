/**
 * One-photo spaces benchmarks, on this machine against the real services:
 *  (a) one-photo space end to end for a 12 MP photo (4000x3000 JPEG of a rendered box room):
 *      dispatch (POST /real-world/spaces) to the preview seen by polling GET /jobs/{id}, and
 *      dispatch to complete (stage space). API and space pool in this process.
 *  (b) SPZ encode throughput (Gaussians per second, pack + gzip) against a bare gzip of the same
 *      uncompressed bytes (the baseline: what the packing costs on top of compression).
 *  (c) the room engine (local-room-v1) time per input frame: 4 overlapping 640x480 PNG views of a
 *      rendered room, the whole build (decode, stitch, panorama, geometry, quick and full SPZ, PNG,
 *      GLB; blobs kept in memory) divided by 4, against a bare sharp decode + resize to 640 px + raw
 *      of the same frames (the baseline: what reading the frames costs at least).
 */
import { gzipSync } from 'node:zlib';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { client } from '../harness/http';
import { startStack } from '../harness/stack';
import sharp from 'sharp';
import { renderRoom, renderRoomViewImage } from '../harness/space-readers';
import { createLogger } from '../../platform/infra/log';
import { boxSplats } from '../../workers/engines/spaces/photo.engine';
import { createRoomSpaceEngine } from '../../workers/engines/spaces/room.engine';
import { encodeSpz, packSpz } from '../../workers/engines/spaces/spz';
import { row, type Bench, type BenchRow } from './bench';

const RUNS = Number(process.env.BENCH_SPACE_RUNS ?? 3);

async function endToEnd(): Promise<BenchRow[]> {
  const photo = await renderRoom({
    width: 4000,
    height: 3000,
    fovX: 65,
    cam: 1.5,
    halfWidth: 2,
    far: 4,
    ceiling: 2.6,
    format: 'jpeg',
  });
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'image/jpeg');
    res.end(photo);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/room.jpg`;
  const stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true', WORKER_POOLS: 'space' } });
  try {
    const a = await stack.createAccount({ credits: 100_000 });
    const api = client(stack.baseUrl, a.key);
    const previews: number[] = [];
    const completes: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const r = await api.post('/real-world/spaces', { imageUrl: url });
      if (r.status !== 202) throw new Error(`dispatch answered ${r.status}`);
      let preview: number | null = null;
      for (;;) {
        const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
        if (preview === null && j.result) preview = performance.now() - t0;
        if (j.status === 'complete') break;
        if (j.status === 'failed') throw new Error(`job failed: ${j.error}`);
        await new Promise((res) => setTimeout(res, 20));
      }
      previews.push(preview!);
      completes.push(performance.now() - t0);
    }
    const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    return [
      row(
        'one-photo space, 12 MP: dispatch to preview (median)',
        med(previews),
        'ms',
        undefined,
        `${RUNS} runs, polled every 20 ms`,
      ),
      row('one-photo space, 12 MP: dispatch to complete (median)', med(completes), 'ms', undefined, `${RUNS} runs`),
    ];
  } finally {
    await stack.stop();
    server.close();
  }
}

function encodeThroughput(): BenchRow[] {
  const box = { left: -2.5, right: 2.5, far: 4, back: -1, ceiling: 2.6, cameraHeight: 1.5 };
  const splats = boxSplats(box, (dx, dy, dz, out, o) => {
    out[o] = 128 + 100 * dx;
    out[o + 1] = 128 + 100 * dy;
    out[o + 2] = 128 + 100 * dz;
  });
  const raw = packSpz(splats);
  const time = (fn: () => void) => {
    fn();
    const t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < 2000) {
      fn();
      n++;
    }
    return (performance.now() - t0) / n / 1000;
  };
  const encodeS = time(() => encodeSpz(splats));
  const gzipS = time(() => gzipSync(raw, { level: 6 }));
  return [
    row(
      'SPZ encode (pack + gzip), Gaussians per second',
      splats.count / encodeS,
      'Gaussians/s',
      splats.count / gzipS,
      `${splats.count} Gaussians, ${raw.length} bytes before gzip; baseline: bare gzip of the same bytes`,
    ),
  ];
}

async function roomPerFrame(): Promise<BenchRow[]> {
  const room = { half: 4, ceiling: 2.6, cam: 1.5 };
  const frames = await Promise.all(
    [0, 40, 80, 120].map((yawDeg) => renderRoomViewImage({ width: 640, height: 480, fovX: 65, yawDeg, room })),
  );
  const engine = createRoomSpaceEngine({ defaultFovDeg: 65, cameraHeightM: 1.5 });
  const ctx = {
    signal: new AbortController().signal,
    progress: async () => {},
    store: async (_b: Buffer, _t: string, name: string) => `mem:${name}`,
    publishPreview: async () => {},
    jobId: 'bench',
    log: createLogger('silent'),
    recall: () => undefined,
    remember: async () => {},
  };
  const plan = { source: 'photos' as const, imageUrls: [], quality: 'full' as const, title: null };
  const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const builds: number[] = [];
  const decodes: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    let t0 = performance.now();
    await engine.build({ plan, photos: frames }, ctx);
    const build = performance.now() - t0;
    t0 = performance.now();
    for (const f of frames) await sharp(f).resize({ width: 640 }).removeAlpha().raw().toBuffer();
    const decode = performance.now() - t0;
    if (i > 0) {
      builds.push(build / frames.length);
      decodes.push(decode / frames.length);
    } // run 0 warms up
  }
  return [
    row(
      'room engine (local-room-v1), time per input frame (median)',
      med(builds),
      'ms',
      med(decodes),
      `4 views 640x480, full quality (quick + full splat, PNG panorama, GLB), ${RUNS} runs; baseline: bare sharp decode + resize of the same frames`,
    ),
  ];
}

export const bench: Bench = {
  name: 'spaces',
  async run() {
    return [...encodeThroughput(), ...(await roomPerFrame()), ...(await endToEnd())];
  },
};
