import { expect } from 'chai';
import sharp from 'sharp';
import { poolDefinitions } from '../../workers/pools';
import { spaceWorker } from '../../workers/spaces/space.worker';
import { fovFromFocal35 } from '../../workers/engines/spaces/photo.engine';
import { SPZ_MAGIC } from '../../workers/engines/spaces/spz';
import { listenToEvents } from '../helpers/events';
import { client, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, type FakeServer } from '../images/fakes';
import { gate } from '../video/helpers';
import { holdAfterPreview, readGreyPng, readSpz, renderRoom } from '../../scripts/harness/space-readers';
import { spaceKit } from './kit';

// The synthetic room: 4 m wide, far wall 4 m ahead, ceiling 2.6 m, camera 1.5 m up, 65° wide
// (the default field of view: the PNG carries no EXIF).
const ROOM = { width: 800, height: 600, fovX: 65, cam: 1.5, halfWidth: 2, far: 4, ceiling: 2.6 };
const WITHIN = 0.1;

describe('spaces: POST /real-world/spaces with the one-photo engine', function () {
  this.timeout(60_000);
  let stack: Stack;
  let photos: FakeServer;
  let held = gate();
  const original = poolDefinitions.space;
  before(async () => {
    const room = await renderRoom(ROOM);
    const roomJpeg = await renderRoom({ ...ROOM, format: 'jpeg' });
    const gif = await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 1, g: 2, b: 3 } } })
      .gif()
      .toBuffer();
    photos = await fakeServer((req, res) => {
      if (req.path === '/room.png') {
        res.setHeader('content-type', 'image/png');
        return void res.end(room);
      }
      if (req.path === '/room.jpg') {
        res.setHeader('content-type', 'image/jpeg');
        return void res.end(roomJpeg);
      }
      if (req.path === '/gif') {
        res.setHeader('content-type', 'image/gif');
        return void res.end(gif);
      }
      res.setHeader('content-type', 'text/plain');
      res.end('this is not a photo');
    });
    // The real pool, held after it published the preview when the title asks, so a poll sees
    // stage preview on a processing job without racing the final tier.
    poolDefinitions.space = (rt) => holdAfterPreview(spaceWorker(rt), () => held.opened);
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true', WORKER_POOLS: 'space' } });
  });
  after(async () => {
    poolDefinitions.space = original;
    held.open();
    await stack?.stop();
    await photos?.close();
  });

  const { account, ledger, balance } = spaceKit(() => stack);
  const url = (p: string) => `${photos.url}${p}`;

  it('when the inputs are not exactly one of imageUrl, imageUrls, videoUrl or break a limit, then 400 naming the field', async () => {
    const { api } = await account();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{}, /imageUrl.*exactly one of imageUrl, imageUrls, videoUrl/],
      [{ imageUrl: url('/room.png'), videoUrl: url('/v.mp4') }, /videoUrl.*exactly one of/],
      [{ imageUrls: [] }, /imageUrls.*at least 1/],
      [{ imageUrls: Array.from({ length: 9 }, (_, i) => url(`/p${i}.png`)) }, /imageUrls.*at most 8/],
      [{ imageUrl: `https://example.com/${'a'.repeat(2048)}` }, /imageUrl.*2048/],
      [{ imageUrl: 'ftp://example.com/a.png' }, /imageUrl/],
      [{ imageUrl: url('/room.png'), title: 'x'.repeat(81) }, /title.*80/],
      [{ imageUrl: url('/room.png'), quality: 'ultra' }, /quality/],
    ];
    for (const [body, message] of cases) {
      const r = await api.post('/real-world/spaces', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.match(message);
    }
  });

  it('when imageUrls or videoUrl are posted on a deployment with SPACE_ROOM_ENGINE=none (or remote without a provider URL), then 503 room_engine_unavailable and nothing is charged', async () => {
    for (const env of [{ SPACE_ROOM_ENGINE: 'none' }, { SPACE_ROOM_ENGINE: 'remote' }]) await refusesRooms(env);
  });
  const refusesRooms = async (env: Record<string, string>) => {
    const none = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true', ...env }, workers: false, scheduler: false });
    try {
      const a = await none.createAccount({ credits: 1000 });
      const api = client(none.baseUrl, a.key);
      for (const body of [{ imageUrls: [url('/room.png')] }, { videoUrl: url('/room.mp4') }]) {
        const r = await api.post('/real-world/spaces', body);
        expect(r.status).to.equal(503);
        expect(r.body.error.code).to.equal('room_engine_unavailable');
        expect(r.body.error.message).to.match(/^(imageUrls|videoUrl): .*room engine/);
      }
      expect(await balance(api)).to.equal(1000);
      expect(await none.db.ledger.countDocuments({ accountId: a.accountId })).to.equal(0);
    } finally {
      await none.stop();
    }
  };

  it('when a photo of a known room is posted, then a processing job shows the preview first, then completes at stage space with a valid SPZ, a 2:1 panorama, a 16-bit depth map and dimensions within 10 percent', async () => {
    held = gate();
    const events = await listenToEvents(stack.config, 'space.*');
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', { imageUrl: url('/room.png'), title: 'hold' });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
    expect(r.body).to.include({ type: 'space', status: 'queued', source: 'photo', imagined: true });
    expect(r.body.jobId).to.match(/^space_/);
    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_full', 40]]);

    let seen: any;
    for (const end = Date.now() + 30_000; Date.now() < end; await new Promise((res) => setTimeout(res, 50))) {
      seen = (await api.get(`/jobs/${r.body.jobId}`)).body;
      if (seen.result) break;
    }
    expect(seen.status).to.equal('processing');
    const preview = seen.result;
    expect(preview).to.include({
      stage: 'preview',
      imagined: true,
      source: 'photo',
      photoCount: 1,
      spaceUrl: null,
      spaceFullUrl: null,
      format: null,
      gaussians: null,
      engine: 'local-photo-space-v1',
    });
    expect(preview.panoramaUrl).to.match(
      /^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/assets\/blob_\w+\/panorama\.jpg\?exp=\d+&sig=/,
    );
    held.open();

    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    const res = job.result;
    expect(res).to.include({
      stage: 'space',
      format: 'spz',
      metricScale: 1,
      spaceFullUrl: null,
      floorOffsetM: null,
      colliderUrl: null,
      panoramaUrl: preview.panoramaUrl,
    });
    expect(res.notes.join(' '))
      .to.match(/65° horizontal field of view was assumed/)
      .and.match(/Camera height assumed 1\.5 m/);

    // Dimensions against the known room.
    const d = res.dimensions;
    expect(d.cameraHeightM).to.deep.equal({ value: 1.5, confidence: 0.5, lowerBound: false });
    expect(d.depthM.value).to.be.closeTo(ROOM.far, ROOM.far * WITHIN);
    expect(d.depthM.lowerBound).to.equal(true);
    expect(d.widthM.value).to.be.closeTo(2 * ROOM.halfWidth, 2 * ROOM.halfWidth * WITHIN);
    expect(d.widthM.lowerBound).to.equal(false);
    expect(d.ceilingM.value).to.be.closeTo(ROOM.ceiling, ROOM.ceiling * WITHIN);
    expect(d.ceilingM.lowerBound).to.equal(false);
    expect(d.floorAreaM2.value).to.be.closeTo(d.widthM.value * d.depthM.value, 0.1);
    expect(d.wallsSeen).to.equal(3);
    expect(d.fovDeg.x).to.equal(65);
    for (const k of ['widthM', 'depthM', 'ceilingM', 'floorAreaM2']) expect(d[k].confidence).to.be.within(0, 1);

    // Panorama: a 2:1 JPEG.
    const pano = await sharp(Buffer.from(await (await fetch(res.panoramaUrl)).arrayBuffer())).metadata();
    expect(pano.format).to.equal('jpeg');
    expect(pano.width).to.equal(2 * pano.height!);

    // Depth: 16-bit greyscale PNG on the same grid, millimetres: straight ahead ≈ the far wall.
    const depthRes = await fetch(res.depthUrl);
    expect(depthRes.headers.get('content-type')).to.equal('image/png');
    const depth = readGreyPng(Buffer.from(await depthRes.arrayBuffer()));
    expect([depth.bitDepth, depth.colourType, depth.width, depth.height]).to.deep.equal([
      16,
      0,
      pano.width,
      pano.height,
    ]);
    const ahead = depth.sample(depth.width / 2, depth.height / 2);
    expect(ahead).to.be.closeTo(d.depthM.value * 1000, 60);
    const straightDown = depth.sample(depth.width / 2, depth.height - 1);
    expect(straightDown).to.be.closeTo(1500, 20);
    for (let x = 0; x < depth.width; x += 97)
      for (let y = 0; y < depth.height; y += 89) expect(depth.sample(x, y)).to.be.within(300, 20_000);

    // SPZ read with the independent reader.
    const spz = readSpz(Buffer.from(await (await fetch(res.spaceUrl)).arrayBuffer()));
    expect([spz.magic, spz.version, spz.shDegree, spz.flags, spz.reserved]).to.deep.equal([SPZ_MAGIC, 3, 0, 0, 0]);
    expect(spz.numPoints).to.equal(res.gaussians);
    expect(spz.byteLength).to.equal(spz.expected);
    expect(res.gaussians).to.be.greaterThan(10_000);
    const eps = 0.01;
    const left = -d.widthM.value / 2 - 0.3,
      right = d.widthM.value / 2 + 0.3;
    for (const [x, y, z] of spz.positions) {
      expect(x).to.be.within(left - eps, right + eps);
      expect(y).to.be.within(-eps, d.ceilingM.value + eps);
      expect(-z).to.be.at.most(d.depthM.value + eps); // RUB: the photo looks down -z
    }
    // The far wall carries Gaussians, coloured near the photo's far wall (205, 195, 175).
    const far = spz.positions.findIndex(([, , z]) => Math.abs(-z - d.depthM.value) < 0.02);
    expect(far).to.be.at.least(0);
    for (const q of spz.rotations.slice(0, 50)) expect(q[3]).to.be.closeTo(1, 1e-3);

    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_full', 40]]);
    try {
      const ev = await events.waitFor((e) => e.routingKey === 'space.completed' && e.body.data.jobId === r.body.jobId);
      expect(ev.body.data).to.include({
        stage: 'space',
        spaceUrl: res.spaceUrl,
        panoramaUrl: res.panoramaUrl,
        depthUrl: res.depthUrl,
      });
    } finally {
      await events.close();
    }
  });

  it('when the photo is a JPEG, then it is read like the PNG (same room, same estimate within 10 percent)', async () => {
    const { api } = await account();
    const r = await api.post('/real-world/spaces', { imageUrl: url('/room.jpg'), quality: 'preview' });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    expect(job.result.dimensions.depthM.value).to.be.closeTo(ROOM.far, ROOM.far * WITHIN);
  });

  it('when EXIF gives a 35 mm-equivalent focal length, then the field of view follows it (26 mm ≈ 69.4° across the long side)', () => {
    expect(fovFromFocal35(26, 4000, 3000)).to.be.closeTo(69.4, 0.1);
    expect(fovFromFocal35(26, 3000, 4000)).to.be.lessThan(69.4);
  });

  it('when quality preview is asked, then the job completes at stage preview with a note, no splat, charged space_preview', async () => {
    const { api, accountId } = await account();
    const r = await api.post('/real-world/spaces', { imageUrl: url('/room.png'), quality: 'preview' });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status).to.equal('complete');
    expect(job.result).to.include({
      stage: 'preview',
      spaceUrl: null,
      format: null,
      gaussians: null,
      metricScale: null,
    });
    expect(job.result.notes.join(' ')).to.match(/Only the preview was requested/);
    expect(job.result.depthUrl).to.be.a('string');
    expect(await ledger(accountId)).to.deep.equal([['charge', 'space_preview', 20]]);
  });

  it('when the URL is not an image (text, GIF), then the job fails with a clear error and the charge is refunded', async () => {
    const { api } = await account();
    for (const [p, message] of [
      ['/note.txt', /not a readable image/],
      ['/gif', /gif images are not supported/],
    ] as const) {
      const r = await api.post('/real-world/spaces', { imageUrl: url(p), quality: 'preview' });
      expect(r.status).to.equal(202);
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status).to.equal('failed');
      expect(JSON.stringify(job.error)).to.match(message);
    }
    const ok = async () => (await balance(api)) === 1000;
    for (const end = Date.now() + 10_000; Date.now() < end && !(await ok()); )
      await new Promise((res) => setTimeout(res, 100));
    expect(await balance(api)).to.equal(1000);
  });

  it('when a private address is posted, then 400 naming imageUrl and nothing charged', async () => {
    const { api } = await account();
    const prior = stack.config.ALLOW_LOOPBACK_URLS;
    const r = await api.post('/real-world/spaces', { imageUrl: 'http://10.0.0.1/room.png' });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/imageUrl/);
    expect(prior).to.equal(true);
    expect(await balance(api)).to.equal(1000);
  });
});
