import { expect } from 'chai';
import sinon from 'sinon';
import { decodeImage } from '../../platform/media/codec';
import { listenToEvents } from '../helpers/events';
import { client, eventually, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, solidPng, type FakeServer } from '../images/fakes';
import { gate, probeBytes } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

const SCALE = 0.05;

describe('video: POST /videos with the local ffmpeg engine', () => {
  let stack: Stack;
  let refs: FakeServer;
  let held = gate();
  before(async () => {
    refs = await fakeServer(async (req, res) => {
      if (req.path.startsWith('/held')) await held.opened;
      if (req.path === '/missing.png') {
        res.statusCode = 404;
        return void res.end();
      }
      res.setHeader('content-type', 'image/png');
      res.end(await solidPng(32, 18, req.path.includes('blue') ? [20, 40, 220] : [220, 120, 20]));
    });
    stack = await startStack({
      env: { ALLOW_LOOPBACK_URLS: 'true', VIDEO_RENDER_SCALE: String(SCALE), POOL_CONCURRENCY: 'video=2' },
    });
  });
  after(async () => {
    held.open();
    await stack.stop();
    await refs.close();
  });

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount({ credits: 1000, ...opts });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  // Charges are recorded in a batch right after the answer (platform/jobs/accept.ts): write it first.
  const ledger = async (accountId: string) => {
    await stack.rt.jobs.flushAccepted();
    return stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;

  it('when only a prompt is posted, then 202 with a queued vid_ job, and it completes with a real MP4 whose size and length match the result', async () => {
    const events = await listenToEvents(stack.config, 'video.*');
    try {
      const { api, accountId } = await account();
      const r = await api.post('/videos', { prompt: 'a drone shot over a rocky coast at dawn' });
      expect(r.status).to.equal(202);
      expect(r.body.jobId).to.match(/^vid_/);
      expect(r.body).to.include({ type: 'video', status: 'queued', pollUrl: `/api/v1/jobs/${r.body.jobId}` });
      expect(r.body.notes).to.deep.equal([]);
      expect((await ledger(accountId)).map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
        ['charge', 'video_standard', 20],
      ]);

      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status, job.error).to.equal('complete');
      const res = job.result;
      expect(res).to.include({
        tier: 'max',
        aspectRatio: '16:9',
        resolution: '1080p',
        clipSeconds: 8,
        engine: 'local-ffmpeg-v1',
        mimeType: 'video/mp4',
        fps: 24,
        openingFrameUsed: false,
      });
      expect(res.notes.join(' ')).to.match(
        /Rendered at scale 0\.05 \(VIDEO_RENDER_SCALE\): 96x54 for 1 s instead of 1920x1080 for 8 s/,
      );
      expect(res.videoUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/assets\/blob_\w+\/video\.mp4\?exp=\d+&sig=/);

      const file = await fetch(res.videoUrl);
      expect(file.headers.get('content-type')).to.equal('video/mp4');
      const bytes = Buffer.from(await file.arrayBuffer());
      expect(bytes.length).to.equal(res.sizeBytes);
      const probe = await probeBytes(bytes);
      expect(probe.codec).to.equal('h264');
      expect([probe.width, probe.height]).to.deep.equal([res.width, res.height]);
      expect([res.width, res.height]).to.deep.equal([96, 54]);
      expect(probe.duration).to.be.closeTo(res.durationSeconds, 0.05);
      expect(res.durationSeconds).to.be.closeTo(1, 0.1);

      const poster = await decodeImage(Buffer.from(await (await fetch(res.posterUrl)).arrayBuffer()));
      expect([poster.width, poster.height]).to.deep.equal([96, 54]);

      // HTTP Range on the MP4: exactly the asked bytes.
      const part = await fetch(res.videoUrl, { headers: { range: 'bytes=100-299' } });
      expect(part.status).to.equal(206);
      expect(part.headers.get('content-range')).to.equal(`bytes 100-299/${bytes.length}`);
      expect(part.headers.get('content-type')).to.equal('video/mp4');
      expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(100, 300))).to.equal(true);
      const tail = await fetch(res.videoUrl, { headers: { range: 'bytes=-64' } });
      expect(tail.status).to.equal(206);
      expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(bytes.length - 64))).to.equal(true);
      expect((await fetch(res.videoUrl, { headers: { range: `bytes=${bytes.length + 10}-` } })).status).to.equal(416);

      const ev = await events.waitFor((e) => e.routingKey === 'video.completed' && e.body.data.jobId === r.body.jobId);
      expect(ev.body.data).to.include({ status: 'complete', videoUrl: res.videoUrl });
      expect(ev.body.data.pollUrl).to.match(/^http:\/\/.*\/api\/v1\/jobs\/vid_/);
    } finally {
      await events.close();
    }
  });

  it('when a premium tier is asked on a workspace without premium video, then max with a note and the standard price', async () => {
    const { api, accountId } = await account({ features: { premiumVideo: false } });
    const r = await api.post('/videos', {
      prompt: 'a storm',
      modelTier: 'cinema',
      aspectRatio: '4:3',
      resolution: '4k',
      clipSeconds: 12,
    });
    expect(r.status).to.equal(202);
    expect(r.body.notes).to.have.length(4);
    expect(r.body.notes[0]).to.match(
      /modelTier cinema is a premium tier this workspace has not enabled; the video renders on max/,
    );
    expect(r.body.notes[1]).to.match(/aspectRatio 4:3 is not offered on the max tier .* 16:9/);
    expect(r.body.notes[2]).to.match(/resolution 4k applies to premium tiers only/);
    expect(r.body.notes[3]).to.match(/clipSeconds 12 applies to premium tiers only/);
    expect((await ledger(accountId))[0]).to.include({ operation: 'video_standard', millicredits: 20_000 });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.result).to.include({ tier: 'max', aspectRatio: '16:9', resolution: '1080p', clipSeconds: 8 });
    expect(job.result.notes.slice(0, 4)).to.deep.equal(r.body.notes);
  });

  it('when cinema is asked on a premium workspace, then up to 4k and 15 s (clamped with a note), at several times the standard price', async () => {
    const { api, accountId } = await account({ features: { premiumVideo: true } });
    const r = await api.post('/videos', {
      prompt: 'a slow dolly through a forest',
      modelTier: 'cinema',
      aspectRatio: '21:9',
      resolution: '4k',
      clipSeconds: 20,
    });
    expect(r.status).to.equal(202);
    expect(r.body.notes).to.have.length(1);
    expect(r.body.notes[0]).to.match(/clipSeconds 20 is above what cinema reaches; it is clamped to 15/);
    const charge = (await ledger(accountId))[0]!;
    expect(charge).to.include({ operation: 'video_premium' });
    const prices = (await api.get('/account/credits')).body.prices;
    expect(fromUnits(charge.millicredits)).to.equal(prices.video_premium);
    expect(prices.video_premium / prices.video_standard).to.be.at.least(3);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result).to.include({ tier: 'cinema', aspectRatio: '21:9', resolution: '4k', clipSeconds: 15 });
    const probe = await probeBytes(Buffer.from(await (await fetch(job.result.videoUrl)).arrayBuffer()));
    expect([probe.width, probe.height]).to.deep.equal([job.result.width, job.result.height]);
    expect([job.result.width, job.result.height]).to.deep.equal([252, 108]); // 5040x2160 at 0.05
  });

  it('when cinema-ultra is asked above 720p, then 720p with a note, and 30 s is accepted', async () => {
    const { api } = await account({ features: { premiumVideo: true } });
    const r = await api.post('/videos', {
      prompt: 'a long take of waves',
      modelTier: 'cinema-ultra',
      resolution: '1080p',
      clipSeconds: 30,
      aspectRatio: '9:16',
    });
    expect(r.status).to.equal(202);
    expect(r.body.notes).to.deep.equal([
      "resolution 1080p is above what cinema-ultra reaches; it renders at 720p, the tier's ceiling.",
    ]);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.result).to.include({ tier: 'cinema-ultra', resolution: '720p', clipSeconds: 30 });
    expect(job.result.durationSeconds).to.be.closeTo(1.5, 0.1); // 30 s at scale 0.05
    expect([job.result.width, job.result.height]).to.deep.equal([36, 64]); // 720x1280 at 0.05
  });

  it('when out-of-range values are sent, then 400 naming the field, and nothing is charged', async () => {
    const { api, accountId } = await account();
    for (const [body, field] of [
      [{ prompt: 'x', clipSeconds: 3 }, 'clipSeconds'],
      [{ prompt: 'x', clipSeconds: 31 }, 'clipSeconds'],
      [{ prompt: 'x', modelTier: 'ultra' }, 'modelTier'],
      [{ prompt: 'x', aspectRatio: '2:1' }, 'aspectRatio'],
      [{ prompt: 'x', resolution: '8k' }, 'resolution'],
      [
        { prompt: 'x', referenceImageUrls: Array.from({ length: 31 }, (_, i) => `https://a.example/${i}.png`) },
        'referenceImageUrls',
      ],
      [{ prompt: 'x', referenceImageUrl: 'nope' }, 'referenceImageUrl'],
      [{}, 'prompt'],
    ] as const) {
      const r = await api.post('/videos', body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).to.equal(400);
      expect(r.body.error.message.startsWith(`${field}:`), r.body.error.message).to.equal(true);
    }
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when references exceed a standard tier budget, then referenceImageUrl is kept as the opening frame and the rest trimmed with a note', async () => {
    const { api } = await account();
    const anchor = `${refs.url}/anchor-blue.png`;
    const r = await api.post('/videos', {
      prompt: 'animate this',
      referenceImageUrl: anchor,
      referenceImageUrls: [`${refs.url}/a.png`, `${refs.url}/b.png`],
    });
    expect(r.status).to.equal(202);
    expect(r.body.notes).to.deep.equal([
      "3 reference images exceed the max tier's budget of 1; the first 1 was kept and becomes the opening frame.",
    ]);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result).to.include({ openingFrameUsed: true, referenceImagesUsed: 1 });
    expect(refs.requests.some((q) => q.path === '/anchor-blue.png')).to.equal(true);
    expect(refs.requests.some((q) => q.path === '/a.png' || q.path === '/b.png')).to.equal(false);
  });

  it('when cinema gets 12 references, then 9 are kept (note) and used as subject references', async () => {
    const { api } = await account({ features: { premiumVideo: true } });
    const list = Array.from({ length: 12 }, (_, i) => `${refs.url}/subject-${i}.png`);
    const r = await api.post('/videos', {
      prompt: 'the same character walking',
      modelTier: 'cinema',
      referenceImageUrls: list,
    });
    expect(r.body.notes).to.deep.equal([
      "12 reference images exceed the cinema tier's budget of 9; the first 9 were kept.",
    ]);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.result).to.include({ openingFrameUsed: false, referenceImagesUsed: 9 });
  });

  it('when a reference URL is private, then 400 naming it and nothing is charged', async () => {
    const { api, accountId } = await account();
    const r = await api.post('/videos', { prompt: 'x', referenceImageUrls: ['http://10.1.2.3/frame.png'] });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/^referenceImageUrls\.0: .*private/);
    const r2 = await api.post('/videos', { prompt: 'x', referenceImageUrl: 'http://169.254.169.254/latest/' });
    expect(r2.body.error.message).to.match(/^referenceImageUrl: /);
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when the opening frame cannot be fetched, then the job fails and its credits are refunded', async () => {
    const events = await listenToEvents(stack.config, 'video.*');
    try {
      const { api, accountId } = await account({ credits: 50 });
      const r = await api.post('/videos', { prompt: 'x', referenceImageUrl: `${refs.url}/missing.png` });
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status).to.equal('failed');
      expect(job.error).to.match(/openingFrameUrl: could not be fetched \(HTTP 404\)/);
      // The job is marked failed first, then refunded: wait for the refund to land.
      const l = await eventually(
        async () => ((await ledger(accountId)).length === 2 ? ledger(accountId) : null),
        10_000,
        'refund',
      );
      expect(l.map((e) => [e.kind, e.operation])).to.deep.equal([
        ['charge', 'video_standard'],
        ['refund', 'video_standard'],
      ]);
      expect(await balance(api)).to.equal(50);
      await events.waitFor((e) => e.routingKey === 'video.failed' && e.body.data.jobId === r.body.jobId);
    } finally {
      await events.close();
    }
  });

  it('when the job runs, then GET /jobs shows rawStatus and progressMessage moving', async () => {
    held = gate();
    const { api } = await account();
    const r = await api.post('/videos', { prompt: 'x', referenceImageUrl: `${refs.url}/held-frame.png` });
    expect(r.body).to.include({ status: 'queued', rawStatus: 'queued' });
    const fetching = await eventually(
      async () => {
        const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
        return j.rawStatus === 'fetching_references' ? j : null;
      },
      20_000,
      'fetching_references',
    );
    expect(fetching).to.include({ status: 'processing', progressMessage: 'Fetching 1 reference image' });
    held.open();
    const done = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(done).to.include({ status: 'complete', rawStatus: 'complete', progressMessage: 'Done' });
  });

  it('when a text-to-video job renders, then its progress moves through painting, ffmpeg encoding percentages, probing and storing', async () => {
    const spy = sinon.spy(stack.workers!.runtime.jobs, 'progress');
    try {
      const { api } = await account();
      const r = await api.post('/videos', { prompt: 'a violet sky over a forest' });
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status, job.error).to.equal('complete');
      const trail = spy
        .getCalls()
        .filter((c) => c.args[0] === r.body.jobId)
        .map((c) => c.args[2]);
      const raw = trail.map((p) => p.rawStatus);
      expect(raw[0]).to.equal('rendering');
      expect(raw.indexOf('painting')).to.be.greaterThan(0);
      expect(raw.indexOf('encoding')).to.be.greaterThan(raw.indexOf('painting'));
      expect(raw.indexOf('probing')).to.be.greaterThan(raw.lastIndexOf('encoding'));
      expect(raw.at(-1)).to.equal('storing');
      expect(trail.some((p) => /^Encoding frames: \d+% \(\d+\/24\)$/.test(p.progressMessage))).to.equal(true);
    } finally {
      spy.restore();
    }
  });

  it('when a dispatch is retried with the same Idempotency-Key, then the same job comes back and it is billed once', async () => {
    const { api, accountId } = await account();
    const h = { 'idempotency-key': 'video-retry-1' };
    const a = await api.post('/videos', { prompt: 'same', modelTier: 'fast' }, h);
    const b = await api.post('/videos', { prompt: 'same', modelTier: 'fast' }, h);
    expect(b.status).to.equal(202);
    expect(b.body.jobId).to.equal(a.body.jobId);
    expect((await ledger(accountId)).filter((e) => e.kind === 'charge')).to.have.length(1);
    await waitForJob(api, a.body.jobId, ['complete', 'failed'], 30_000);
  });
});
