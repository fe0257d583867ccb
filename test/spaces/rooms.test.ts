import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import sharp from 'sharp';
import sinon from 'sinon';
import { createLogger } from '../../platform/infra/log';
import { poolDefinitions } from '../../workers/pools';
import { spaceWorker } from '../../workers/spaces/space.worker';
import { boxColliderGlb } from '../../workers/engines/spaces/collider';
import { boxSplats } from '../../workers/engines/spaces/photo.engine';
import { createRoomSpaceEngine, QUICK_GAUSSIANS } from '../../workers/engines/spaces/room.engine';
import { encodeSpz, SPZ_MAGIC } from '../../workers/engines/spaces/spz';
import type { SpaceEngineContext } from '../../workers/engines/spaces/space.engine';
import { estimateYaws } from '../../workers/engines/spaces/stitch';
import { listenToEvents } from '../helpers/events';
import { client, eventually, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, type FakeServer } from '../images/fakes';
import { gate } from '../video/helpers';
import {
  holdAfterPreview,
  readSpz,
  renderRoomView,
  renderRoomViewImage,
  type TexturedRoom,
} from '../../scripts/harness/space-readers';
import { spaceKit } from './kit';

const run = promisify(execFile);

// An 8 m square room, the camera at its centre 1.5 m up; views 640×480, 65° wide (no EXIF, so the
// default field of view), turned 0°, 40°, 80° and 120° to the right.
const ROOM: TexturedRoom = { half: 4, ceiling: 2.6, cam: 1.5 };
const VIEW = { width: 640, height: 480, fovX: 65, room: ROOM };
const YAWS = [0, 40, 80, 120];
/** Documented tolerance of the recovered yaw on a level rendered room (docs/capabilities/spaces.md). */
const YAW_TOLERANCE_DEG = 2;
/** Walls measured from the floor–wall line: within 10 percent on a level rendered room. */
const WITHIN = 0.1;
/** The room stack's video byte limit (lowered from 100 MB so the test serves a small "too large" file). */
const VIDEO_MAX_BYTES = 2 * 1024 * 1024;

/** An MP4 of the room turned through `yaws`, `fps` frames a second, made by ffmpeg from rendered frames. */
async function roomVideo(yaws: number[], fps: number): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'room-video-'));
  try {
    for (const [i, yawDeg] of yaws.entries())
      await writeFile(
        path.join(dir, `f${String(i).padStart(3, '0')}.png`),
        await renderRoomViewImage({ ...VIEW, yawDeg }),
      );
    const out = path.join(dir, 'room.mp4');
    await run('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-framerate',
      String(fps),
      '-i',
      path.join(dir, 'f%03d.png'),
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      '-y',
      out,
    ]);
    return await readFile(out);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** GLB 2.0 read from the published layout: 12-byte header, JSON chunk, BIN chunk. */
function readGlb(b: Buffer) {
  const magic = b.readUInt32LE(0),
    version = b.readUInt32LE(4),
    length = b.readUInt32LE(8);
  const jsonLen = b.readUInt32LE(12),
    jsonType = b.readUInt32LE(16);
  const json = JSON.parse(b.toString('utf8', 20, 20 + jsonLen));
  const binAt = 20 + jsonLen;
  const binLen = b.readUInt32LE(binAt),
    binType = b.readUInt32LE(binAt + 4);
  return { magic, version, length, jsonType, json, binLen, binType };
}

describe('spaces: rooms from photos or a video with the local room engine (local-room-v1)', function () {
  this.timeout(90_000);
  let stack: Stack;
  let files: FakeServer;
  let held = gate();
  const original = poolDefinitions.space;
  before(async () => {
    const views = await Promise.all(YAWS.map((yawDeg) => renderRoomViewImage({ ...VIEW, yawDeg })));
    const sweep = await roomVideo(
      Array.from({ length: 12 }, (_, i) => i * 8),
      4,
    ); // 3 s, 0° to 88°
    const long = await roomVideo(
      Array.from({ length: 20 }, (_, i) => i * 4),
      4,
    ); // 5 s: over the 4 s limit below
    files = await fakeServer((req, res) => {
      const m = /^\/view(\d)\.png$/.exec(req.path);
      if (m && views[Number(m[1])]) {
        res.setHeader('content-type', 'image/png');
        res.end(views[Number(m[1])]);
        return;
      }
      const video = {
        '/sweep.mp4': sweep,
        '/long.mp4': long,
        '/big.mp4': Buffer.concat([sweep, Buffer.alloc(VIDEO_MAX_BYTES)]),
      }[req.path];
      if (video) {
        res.setHeader('content-type', 'video/mp4');
        res.end(video);
        return;
      }
      res.statusCode = 404;
      res.end('not found');
    });
    poolDefinitions.space = (rt) => holdAfterPreview(spaceWorker(rt), () => held.opened);
    stack = await startStack({
      env: {
        ALLOW_LOOPBACK_URLS: 'true',
        WORKER_POOLS: 'space',
        SPACE_ROOM_ENGINE: 'local',
        SPACE_VIDEO_MAX_SECONDS: '4',
        SPACE_VIDEO_MAX_BYTES: String(VIDEO_MAX_BYTES),
      },
    });
  });
  after(async () => {
    poolDefinitions.space = original;
    held.open();
    await stack?.stop();
    await files?.close();
  });

  const { account, ledger, balance } = spaceKit(() => stack);
  const url = (p: string) => `${files.url}${p}`;
  const bytes = async (u: string) => Buffer.from(await (await fetch(u)).arrayBuffer());

  it('when four overlapping views of a rendered room are stitched, then each recovered yaw is within 2° of the true turn', async () => {
    const views = await Promise.all(
      YAWS.map(async (yawDeg) => {
        const g = await sharp(renderRoomView({ ...VIEW, yawDeg }), { raw: { width: 640, height: 480, channels: 3 } })
          .resize({ width: 320 })
          .greyscale()
          .raw()
          .toBuffer();
        return { grey: Float32Array.from(g), w: 320, h: 240 };
      }),
    );
    const est = estimateYaws(views, VIEW.fovX);
    for (const [i, y] of est.yawDeg.entries()) expect(y, `view ${i}`).to.be.closeTo(YAWS[i]!, YAW_TOLERANCE_DEG);
    expect(est.order).to.deep.equal([0, 1, 2, 3]);
    expect(est.notes).to.deep.equal([]);
  });

  it('when views are posted as imageUrls, then a processing job shows the quick room first, then completes with the full splat, a PNG panorama and a GLB collider inside the room', async () => {
    held = gate();
    const events = await listenToEvents(stack.config, 'space.*');
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', {
      imageUrls: YAWS.map((_, i) => url(`/view${i}.png`)),
      title: 'hold',
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    expect(r.body).to.include({ type: 'space', status: 'queued', source: 'photos', imagined: true });
    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_full', 40]]);

    const seen = await eventually(
      async () => {
        const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
        return j.result ? j : null;
      },
      60_000,
      'the preview',
    );
    expect(seen.status).to.equal('processing');
    const preview = seen.result;
    expect(preview).to.include({
      stage: 'preview',
      source: 'photos',
      photoCount: 4,
      format: 'spz',
      metricScale: null,
      floorOffsetM: null,
      panoramaUrl: null,
      spaceFullUrl: null,
      colliderUrl: null,
      depthUrl: null,
      dimensions: null,
      engine: 'local-room-v1',
    });
    const quick = readSpz(await bytes(preview.spaceUrl));
    expect([quick.magic, quick.version]).to.deep.equal([SPZ_MAGIC, 3]);
    expect(quick.numPoints).to.equal(preview.gaussians);
    expect(quick.byteLength).to.equal(quick.expected);
    expect(preview.gaussians).to.be.within(QUICK_GAUSSIANS * 0.9, QUICK_GAUSSIANS * 1.1);
    held.open();

    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    const res = job.result;
    expect(res).to.include({
      stage: 'space',
      source: 'photos',
      photoCount: 4,
      format: 'spz',
      spaceUrl: preview.spaceUrl,
      metricScale: 1.5,
      floorOffsetM: 1.5,
      dimensions: null,
      depthUrl: null,
    });
    expect(res.notes.join(' '))
      .to.match(/phase correlation/)
      .and.match(/Camera height assumed 1\.5 m/)
      .and.match(/generated/);

    // The full splat: more Gaussians, all inside the room once scaled to metres.
    const full = readSpz(await bytes(res.spaceFullUrl));
    expect(full.numPoints).to.equal(res.gaussians);
    expect(full.byteLength).to.equal(full.expected);
    expect(res.gaussians).to.be.greaterThan(preview.gaussians * 4);
    const k = res.metricScale;
    const bound = ROOM.half * (1 + WITHIN);
    const lo = [Infinity, Infinity, Infinity],
      hi = [-Infinity, -Infinity, -Infinity];
    for (const p of full.positions)
      for (let a = 0; a < 3; a++) {
        lo[a] = Math.min(lo[a]!, p[a]! * k);
        hi[a] = Math.max(hi[a]!, p[a]! * k);
      }
    for (const a of [0, 2]) expect(Math.max(-lo[a]!, hi[a]!)).to.be.at.most(bound);
    expect(lo[1]).to.be.closeTo(-res.floorOffsetM, 0.01); // the floor
    expect(hi[1]).to.be.closeTo(ROOM.ceiling - ROOM.cam, ROOM.ceiling * WITHIN); // the ceiling, measured
    expect(-lo[2]!).to.be.closeTo(ROOM.half, ROOM.half * WITHIN); // the wall the first view faced, measured
    expect(hi[0]).to.be.closeTo(ROOM.half, ROOM.half * WITHIN); // the wall on the right (views at 80° and 120°), measured

    // Panorama: a 2:1 PNG.
    const panoRes = await fetch(res.panoramaUrl);
    expect(panoRes.headers.get('content-type')).to.equal('image/png');
    const pano = await sharp(Buffer.from(await panoRes.arrayBuffer())).metadata();
    expect(pano.format).to.equal('png');
    expect(pano.width).to.equal(2 * pano.height!);

    // Collider: a GLB 2.0 with a mesh, accessors and a binary chunk, its box inside the room.
    const glbBytes = await bytes(res.colliderUrl);
    const glb = readGlb(glbBytes);
    expect([glb.magic, glb.version, glb.length, glb.jsonType, glb.binType]).to.deep.equal([
      0x46546c67,
      2,
      glbBytes.length,
      0x4e4f534a,
      0x004e4942,
    ]);
    expect(glb.json.meshes).to.have.length(1);
    const prim = glb.json.meshes[0].primitives[0];
    const pos = glb.json.accessors[prim.attributes.POSITION];
    expect(pos).to.include({ type: 'VEC3', count: 24 });
    expect(glb.json.accessors[prim.indices].count).to.equal(36);
    expect(glb.binLen).to.be.at.least(24 * 12 * 2 + 36 * 2);
    expect(pos.min[1] * k).to.be.closeTo(-res.floorOffsetM, 1e-3);
    for (const a of [0, 2]) expect(Math.max(-pos.min[a], pos.max[a]) * k).to.be.at.most(bound);

    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_full', 40]]);
    try {
      const ev = await events.waitFor((e) => e.routingKey === 'space.completed' && e.body.data.jobId === r.body.jobId);
      expect(ev.body.data).to.include({
        stage: 'space',
        spaceUrl: res.spaceUrl,
        spaceFullUrl: res.spaceFullUrl,
        colliderUrl: res.colliderUrl,
        panoramaUrl: res.panoramaUrl,
      });
    } finally {
      await events.close();
    }
  });

  /** An engine context in memory; `store` may be replaced to fail. */
  const memoryCtx = (
    published: unknown[],
    store: SpaceEngineContext['store'] = async (_b, _t, name) => `mem:${name}`,
  ): SpaceEngineContext => ({
    jobId: 'job-mem',
    signal: new AbortController().signal,
    progress: async () => {},
    store,
    publishPreview: async (r) => void published.push(r),
    log: createLogger('silent'),
    recall: () => undefined,
    remember: async () => {},
  });

  it("when the full tier's computation fails after the quick room landed, then the build completes at stage preview with the quick splat and a fixed note (no raw error text)", async () => {
    const engine = createRoomSpaceEngine({ defaultFovDeg: VIEW.fovX, cameraHeightM: ROOM.cam });
    const photos = await Promise.all([0, 40].map((yawDeg) => renderRoomViewImage({ ...VIEW, yawDeg })));
    const published: unknown[] = [];
    // Only the full tier encodes a PNG (the panorama): make that computation fail.
    const png = sinon.stub(sharp.prototype, 'png').throws(new Error('vips: out of memory in /srv/secret/tmp'));
    let result: Awaited<ReturnType<typeof engine.build>>;
    try {
      result = await engine.build(
        { plan: { source: 'photos', imageUrls: [], quality: 'full', title: null }, photos },
        memoryCtx(published),
      );
    } finally {
      png.restore();
    }
    expect(published).to.have.length(1);
    expect(result).to.include({
      stage: 'preview',
      spaceUrl: 'mem:space-quick.spz',
      spaceFullUrl: null,
      colliderUrl: null,
      panoramaUrl: null,
      metricScale: null,
    });
    expect(result.notes.join(' '))
      .to.include('The full room could not be built; the quick room is the result.')
      .and.not.include('vips');
  });

  it('when storing the full tier fails (blob store or database outage), then the build fails so the pool retries the job, instead of completing a paid full room at preview', async () => {
    const engine = createRoomSpaceEngine({ defaultFovDeg: VIEW.fovX, cameraHeightM: ROOM.cam });
    const photos = await Promise.all([0, 40].map((yawDeg) => renderRoomViewImage({ ...VIEW, yawDeg })));
    const published: unknown[] = [];
    const outage = new Error('the blob store is unavailable');
    const ctx = memoryCtx(published, async (_b, _t, name) => {
      if (name === 'collider.glb') throw outage;
      return `mem:${name}`;
    });
    let caught: unknown = null;
    await engine
      .build({ plan: { source: 'photos', imageUrls: [], quality: 'full', title: null }, photos }, ctx)
      .catch((err) => (caught = err));
    expect(caught).to.equal(outage);
    expect(published).to.have.length(1);
  });

  it('when quality preview is asked for a room, then the job completes at stage preview with the quick splat and a note, charged space_preview', async () => {
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', {
      imageUrls: [url('/view0.png'), url('/view1.png')],
      quality: 'preview',
    });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    expect(job.result).to.include({
      stage: 'preview',
      photoCount: 2,
      metricScale: null,
      spaceFullUrl: null,
      panoramaUrl: null,
      colliderUrl: null,
    });
    expect(job.result.spaceUrl).to.be.a('string');
    expect(job.result.notes.join(' ')).to.match(/Only the preview was requested/);
    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_preview', 20]]);
  });

  it('when a video sweep rendered with ffmpeg is posted, then frames are sampled and the room completes with photoCount 0', async () => {
    const { api } = await account();
    const r = await api.post('/real-world/spaces', { videoUrl: url('/sweep.mp4') });
    expect(r.status).to.equal(202);
    expect(r.body.source).to.equal('video');
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    expect(job.result).to.include({
      stage: 'space',
      source: 'video',
      photoCount: 0,
      engine: 'local-room-v1',
      metricScale: 1.5,
    });
    expect(job.result.notes.join(' ')).to.match(/Built from 12 frames sampled evenly from the video/);
    // The sweep turned 88° with a 65° view: the stitched frames cover about 153° round the camera.
    const seenDeg = Number(/\((\d+)° of the room seen/.exec(job.result.notes.join(' '))?.[1]);
    expect(seenDeg).to.be.closeTo(88 + 65, 2 * YAW_TOLERANCE_DEG);
    const full = readSpz(await bytes(job.result.spaceFullUrl));
    expect(full.numPoints).to.equal(job.result.gaussians);
  });

  it('when the video is longer than the limit (SPACE_VIDEO_MAX_SECONDS 4), then the job fails saying so and the charge is refunded', async () => {
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', { videoUrl: url('/long.mp4') });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status).to.equal('failed');
    expect(JSON.stringify(job.error)).to.match(/videoUrl: the video is 5\.0 s long; at most 4 s/);
    await eventually(async () => (await balance(api)) === 1000, 10_000, 'the refund');
    expect((await ledger(accountId)).map(([kind]) => kind)).to.deep.equal(['charge', 'refund']);
  });

  it('when the video is larger than the limit (SPACE_VIDEO_MAX_BYTES), then the job fails saying so and the charge is refunded', async () => {
    const { api } = await account();
    const r = await api.post('/real-world/spaces', { videoUrl: url('/big.mp4'), quality: 'preview' });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status).to.equal('failed');
    expect(JSON.stringify(job.error)).to.match(new RegExp(`videoUrl: larger than ${VIDEO_MAX_BYTES} bytes`));
    await eventually(async () => (await balance(api)) === 1000, 10_000, 'the refund');
  });

  it('when one of the photos is missing or not an image, then the job fails naming it and the charge is refunded', async () => {
    const { api } = await account();
    const r = await api.post('/real-world/spaces', {
      imageUrls: [url('/view0.png'), url('/gone.png')],
      quality: 'preview',
    });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status).to.equal('failed');
    expect(JSON.stringify(job.error)).to.match(/imageUrls\[1\]: could not be fetched \(HTTP 404\)/);
    await eventually(async () => (await balance(api)) === 1000, 10_000, 'the refund');
  });

  it('when one of imageUrls is a private address, then 400 naming it and nothing charged', async () => {
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', { imageUrls: [url('/view0.png'), 'http://10.0.0.1/room.png'] });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/imageUrls\[1\]/);
    expect(await ledger(accountId)).to.deep.equal([]);
  });
});

describe('spaces: rooms through the remote world-generation adapter (SPACE_ROOM_ENGINE=remote)', function () {
  this.timeout(60_000);
  const KEY = 'sk-provider-secret-123';
  const original = poolDefinitions.space;
  const held = gate();
  let stack: Stack;
  let provider: FakeServer;
  let assets: { quick: Buffer; full: Buffer; glb: Buffer; pano: Buffer };
  const polls = new Map<string, number>();
  let blipped = false;
  before(async () => {
    const box = { left: -2, right: 2, far: 3, back: -2, ceiling: 2.5, cameraHeight: 1.5 };
    const grey = (_x: number, _y: number, _z: number, out: Float32Array, o: number) => out.fill(128, o, o + 3);
    assets = {
      quick: encodeSpz(boxSplats(box, grey, 2_000)),
      full: encodeSpz(boxSplats(box, grey, 8_000)),
      glb: await boxColliderGlb({ min: [-2, -1.5, -3], max: [2, 1, 2] }),
      pano: await sharp({ create: { width: 64, height: 32, channels: 3, background: { r: 9, g: 9, b: 9 } } })
        .png()
        .toBuffer(),
    };
    provider = await fakeServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.path.startsWith('/v1/') && req.headers.authorization !== `Bearer ${KEY}`) {
        res.statusCode = 401;
        res.end(JSON.stringify({ error: 'bad key' }));
        return;
      }
      if (req.method === 'POST' && req.path === '/v1/worlds') {
        if (req.body?.title === 'refuse') {
          res.statusCode = 422;
          res.end(JSON.stringify({ error: 'inputs show more than one room' }));
          return;
        }
        res.end(JSON.stringify({ id: req.body?.title === 'fail' ? 'w-fail' : `w-${polls.size}` }));
        return;
      }
      const m = /^\/v1\/worlds\/([\w-]+)$/.exec(req.path);
      if (m) {
        const n = (polls.get(m[1]!) ?? 0) + 1;
        polls.set(m[1]!, n);
        const a = (p: string) => `${provider.url}/assets/${p}`;
        if (m[1] === 'w-fail') {
          res.end(JSON.stringify({ id: m[1], status: n < 2 ? 'running' : 'failed', error: 'could not find a floor' }));
          return;
        }
        if (n === 1) {
          res.end(JSON.stringify({ id: m[1], status: 'queued' }));
          return;
        }
        const quick = { splatUrl: a('quick.spz'), gaussians: 2_000 };
        if (n === 2) {
          res.end(JSON.stringify({ id: m[1], status: 'running', quick }));
          return;
        }
        res.end(
          JSON.stringify({
            id: m[1],
            status: 'succeeded',
            quick,
            full: {
              splatUrl: a('full.spz'),
              gaussians: 8_000,
              metricScale: 1.25,
              floorOffsetM: 1.5,
              colliderUrl: a('room.glb'),
              panoramaUrl: a('pano.png'),
            },
          }),
        );
        return;
      }
      const asset = {
        '/assets/quick.spz': assets.quick,
        '/assets/full.spz': assets.full,
        '/assets/room.glb': assets.glb,
        '/assets/pano.png': assets.pano,
      }[req.path];
      if (asset) {
        res.setHeader('content-type', 'application/octet-stream');
        res.end(asset);
        return;
      }
      res.statusCode = 404;
      res.end('{}');
    });
    // A job titled "flaky" loses its first attempt (a database blip on a progress write) after the
    // world was created, so the pool retries it.
    poolDefinitions.space = (rt) => {
      const def = holdAfterPreview(spaceWorker(rt), () => held.opened);
      return {
        ...def,
        process: (plan, ctx) =>
          def.process(plan, {
            ...ctx,
            progress: async (raw, message, partial) => {
              if (plan.title === 'flaky' && raw === 'provider_queued' && !blipped) {
                blipped = true;
                throw new Error('database blip');
              }
              await ctx.progress(raw, message, partial);
            },
          }),
      };
    };
    stack = await startStack({
      env: {
        ALLOW_LOOPBACK_URLS: 'true',
        WORKER_POOLS: 'space',
        SPACE_ROOM_ENGINE: 'remote',
        SPACE_PROVIDER_BASE_URL: provider.url,
        SPACE_PROVIDER_API_KEY: KEY,
        SPACE_PROVIDER_POLL_MS: '50',
      },
    });
  });
  after(async () => {
    poolDefinitions.space = original;
    held.open();
    await stack?.stop();
    await provider?.close();
  });

  // The worker fetches and checks every input before the adapter runs: the provider serves them too.
  const photoUrls = () => [`${provider.url}/assets/pano.png`, `${provider.url}/assets/pano.png`];

  it("when photos are posted, then the adapter creates a world with the URLs and the key, polls it, and stores the provider's assets under our signed URLs", async () => {
    const a = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, a.key);
    const r = await api.post('/real-world/spaces', { imageUrls: photoUrls(), title: 'hold' });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    const seen = await eventually(
      async () => {
        const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
        return j.result ? j : null;
      },
      20_000,
      'the preview',
    );
    expect(seen.status).to.equal('processing');
    expect(seen.result).to.include({
      stage: 'preview',
      format: 'spz',
      metricScale: null,
      spaceFullUrl: null,
      engine: 'remote-world-v1',
    });
    held.open();
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    const res = job.result;
    expect(res).to.include({
      stage: 'space',
      source: 'photos',
      photoCount: 2,
      format: 'spz',
      metricScale: 1.25,
      floorOffsetM: 1.5,
      engine: 'remote-world-v1',
      dimensions: null,
    });
    for (const u of [res.spaceUrl, res.spaceFullUrl, res.colliderUrl, res.panoramaUrl])
      expect(u).to.match(new RegExp(`^${stack.config.PUBLIC_BASE_URL}/api/v1/assets/blob_`));
    expect(await (await fetch(res.spaceUrl)).arrayBuffer().then(Buffer.from)).to.deep.equal(assets.quick);
    expect(await (await fetch(res.spaceFullUrl)).arrayBuffer().then(Buffer.from)).to.deep.equal(assets.full);
    expect(readSpz(assets.full).numPoints).to.equal(res.gaussians); // counted in the file, not the provider's 8000
    const create = provider.requests.find((q) => q.method === 'POST' && q.body?.title === 'hold');
    expect(create?.body).to.deep.equal({ source: 'photos', imageUrls: photoUrls(), quality: 'full', title: 'hold' });
    expect(create?.headers.authorization).to.equal(`Bearer ${KEY}`);
    expect(provider.requests.filter((q) => q.path.startsWith('/assets/') && q.headers.authorization)).to.deep.equal([]); // the key goes to the API only
  });

  it('when a job is retried after its world was created, then the retry polls that world and the provider is asked to create only one (with the job id as idempotency key)', async () => {
    const a = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, a.key);
    const r = await api.post('/real-world/spaces', { imageUrls: photoUrls(), title: 'flaky' });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    expect(job.result).to.include({ stage: 'space', engine: 'remote-world-v1' });
    expect(blipped, 'the first attempt failed').to.equal(true);
    expect(JSON.stringify(job)).to.not.include('providerWorld'); // kept on the job for the worker, never shown
    const creates = provider.requests.filter((q) => q.method === 'POST' && q.body?.title === 'flaky');
    expect(creates).to.have.length(1);
    expect(creates[0]!.headers['idempotency-key']).to.equal(r.body.jobId);
  });

  it('when the provider reports the world failed or refuses it, then the job fails with a clear error (never the key) and the charge is refunded', async () => {
    const a = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, a.key);
    for (const [title, message] of [
      ['fail', /provider could not build the room: could not find a floor/],
      ['refuse', /provider refused the request \(HTTP 422: inputs show more than one room\)/],
    ] as const) {
      const r = await api.post('/real-world/spaces', { imageUrls: photoUrls(), title });
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status).to.equal('failed');
      expect(JSON.stringify(job.error)).to.match(message).and.not.include(KEY);
    }
    await eventually(async () => (await api.get('/account/credits')).body.balance === 1000, 10_000, 'the refunds');
  });
});
