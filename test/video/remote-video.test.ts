import { expect } from 'chai';
import { listenToEvents } from '../helpers/events';
import { client, eventually, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, type FakeServer } from '../images/fakes';
import { gate, makeMp4, probeBytes } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

/**
 * A fake speaking the OpenAI videos protocol: POST /v1/videos, GET /v1/videos/{id},
 * GET /v1/videos/{id}/content. A prompt containing FAIL ends in status failed; a prompt containing
 * HOLD stays in_progress at 50% until the test opens the gate; 5XX answers 503 on create.
 */
describe('video: remote provider adapter (VIDEO_ENGINE=remote) against a fake OpenAI videos API', () => {
  let stack: Stack;
  let provider: FakeServer;
  let mp4: Buffer;
  const held = gate();
  const videos = new Map<string, { prompt: string; polls: number }>();

  before(async () => {
    mp4 = await makeMp4(160, 90, 1);
    provider = await fakeServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.headers.authorization !== 'Bearer vk-test') {
        res.statusCode = 401;
        res.end(JSON.stringify({ error: { message: 'bad key' } }));
        return;
      }
      if (req.method === 'POST' && req.path === '/v1/videos') {
        if (String(req.body.prompt).includes('5XX')) {
          res.statusCode = 503;
          res.end(JSON.stringify({ error: { message: 'overloaded' } }));
          return;
        }
        const id = `video_${videos.size + 1}`;
        videos.set(id, { prompt: req.body.prompt, polls: 0 });
        res.end(
          JSON.stringify({
            id,
            object: 'video',
            status: 'queued',
            progress: 0,
            model: req.body.model,
            seconds: req.body.seconds,
            size: req.body.size,
          }),
        );
        return;
      }
      const m = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(req.path);
      const v = m && videos.get(m[1]!);
      if (!m || !v) {
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { message: 'no such video' } }));
        return;
      }
      if (m[2]) {
        res.setHeader('content-type', 'video/mp4');
        res.end(mp4);
        return;
      }
      v.polls++;
      if (v.prompt.includes('FAIL')) {
        res.end(
          JSON.stringify({
            id: m[1],
            status: 'failed',
            progress: 0,
            error: { code: 'moderation_blocked', message: 'the provider could not render this' },
          }),
        );
        return;
      }
      const heldBack = v.prompt.includes('HOLD') && !gateOpen;
      if (v.polls < 2 || heldBack) {
        res.end(JSON.stringify({ id: m[1], status: 'in_progress', progress: 50 }));
        return;
      }
      res.end(JSON.stringify({ id: m[1], status: 'completed', progress: 100 }));
    });
    stack = await startStack({
      env: {
        VIDEO_ENGINE: 'remote',
        VIDEO_PROVIDER_BASE_URL: `${provider.url}/v1`,
        VIDEO_PROVIDER_API_KEY: 'vk-test',
        VIDEO_PROVIDER_MODEL: 'sora-2',
        VIDEO_PROVIDER_POLL_MS: '20',
        JOB_MAX_ATTEMPTS: '2',
      },
    });
  });
  let gateOpen = false;
  void held.opened.then(() => {
    gateOpen = true;
  });
  after(async () => {
    held.open();
    await stack.stop();
    await provider.close();
  });

  it('when a video is asked, then the provider is driven through create, poll and download, and the real file facts are reported', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const r = await api.post('/videos', { prompt: 'a paper boat HOLD on a stream' });
    expect(r.status).to.equal(202);
    const moving = await eventually(
      async () => {
        const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
        return j.rawStatus === 'provider_in_progress' ? j : null;
      },
      20_000,
      'provider progress',
    );
    expect(moving.progressMessage).to.equal('Provider in progress: 50%');
    held.open();
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 20_000);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result).to.include({ engine: 'openai-compatible:sora-2', tier: 'max', width: 160, height: 90 });
    const created = provider.requests.find((q) => q.method === 'POST')!;
    expect(created.body).to.deep.equal({
      model: 'sora-2',
      prompt: 'a paper boat HOLD on a stream',
      seconds: '8',
      size: '1920x1080',
    });
    const bytes = Buffer.from(await (await fetch(job.result.videoUrl)).arrayBuffer());
    expect(bytes.equals(mp4)).to.equal(true);
    const probe = await probeBytes(bytes);
    expect([probe.width, probe.height]).to.deep.equal([160, 90]);
    expect(job.result.durationSeconds).to.be.closeTo(probe.duration, 0.05);
  });

  it('when the provider fails the render, then the job fails with its reason, credits are refunded and video.failed is published', async () => {
    const events = await listenToEvents(stack.config, 'video.*');
    try {
      const { key, accountId } = await stack.createAccount({ credits: 100 });
      const api = client(stack.baseUrl, key);
      const r = await api.post('/videos', { prompt: 'FAIL please' });
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 20_000);
      expect(job.status).to.equal('failed');
      expect(job.error).to.match(/video provider failed the render: the provider could not render this/);
      const ev = await events.waitFor((e) => e.routingKey === 'video.failed' && e.body.data.jobId === r.body.jobId);
      expect(ev.body.data.error).to.match(/could not render this/);
      const ledger = await eventually(
        async () => {
          const l = await stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();
          return l.length === 2 ? l : null;
        },
        10_000,
        'refund',
      );
      expect(ledger.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
        ['charge', 'video_standard', 20],
        ['refund', 'video_standard', 20],
      ]);
      expect((await api.get('/account/credits')).body.balance).to.equal(100);
    } finally {
      await events.close();
    }
  });

  it('when the provider keeps answering 503, then the job is retried, then fails and is refunded', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const r = await api.post('/videos', { prompt: '5XX storm' });
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 20_000);
    expect(job.status).to.equal('failed');
    expect(job.error).to.match(/failed after 2 attempts: video provider answered 503/);
    expect(
      provider.requests.filter((q) => q.method === 'POST' && String(q.body.prompt).includes('5XX')),
    ).to.have.length(2);
    await eventually(
      async () => (await stack.db.ledger.countDocuments({ accountId, kind: 'refund' })) === 1,
      10_000,
      'refund',
    );
  });
});
