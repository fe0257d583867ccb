import { expect } from 'chai';
import { mp3Info } from '../../workers/engines/songs/elevenlabs.engine';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, listenEvents, until } from '../helpers/fake-provider';
import { toUnits } from '../../platform/credits/credits';

/** MPEG-1 Layer III frames, 128 kb/s, 44.1 kHz, silent payload: what the Music API streams. */
function mp3Frames(seconds: number): Buffer {
  const frames = Math.ceil((seconds * 44100) / 1152);
  const frame = Buffer.alloc(417);
  frame.set([0xff, 0xfb, 0x90, 0x00]);
  return Buffer.concat(Array.from({ length: frames }, () => frame));
}

describe('songs (ElevenLabs Music adapter against a local fake)', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  let fake: Awaited<ReturnType<typeof fakeServer>>;
  let mode: 'ok' | 'refuse' | 'flaky' = 'ok';
  let flakyFailures = 0;

  before(async () => {
    fake = await fakeServer((req, res) => {
      if (req.method !== 'POST' || !req.url.startsWith('/v1/music')) {
        res.writeHead(404).end();
        return;
      }
      if (mode === 'flaky' && flakyFailures > 0) {
        flakyFailures--;
        res
          .writeHead(503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ detail: { status: 'service_unavailable' } }));
        return;
      }
      if (mode === 'refuse' || req.headers['xi-api-key'] !== 'el-test-key') {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ detail: { status: 'invalid_api_key', message: 'Invalid API key' } }));
        return;
      }
      const body = JSON.parse(req.body);
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(mp3Frames(body.music_length_ms / 1000));
    });
    stack = await startStack({
      env: { SONG_ENGINE: 'elevenlabs', ELEVENLABS_BASE_URL: fake.url, ELEVENLABS_API_KEY: 'el-test-key' },
    });
    const acct = await stack.createAccount({ credits: 100 });
    accountId = acct.accountId;
    api = client(stack.baseUrl, acct.key);
  });
  after(async () => {
    await stack.stop();
    await fake.close();
  });

  it('when the provider composes, then the job shows its progress while waiting and completes with the MP3', async () => {
    mode = 'ok';
    fake.hold();
    const r = await api.post('/songs', { style: 'sad piano ballad', lyrics: 'one\ntwo\nthree', title: 'Rain' });
    expect(r.status).to.equal(202);
    const during = await until(async () => {
      const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
      return j.rawStatus === 'requesting' ? j : null;
    }, 'the job to wait on the provider');
    expect(during.status).to.equal('processing');
    expect(during.progressMessage).to.match(/^Asking the music provider for \d+ s at \d+ BPM in [A-G][#b]? minor$/);
    fake.open();
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status, job.error).to.equal('complete');

    const sent = fake.requests.at(-1)!;
    expect(sent.url).to.equal('/v1/music?output_format=mp3_44100_128');
    const body = JSON.parse(sent.body);
    expect(body.model_id).to.equal('music_v1');
    expect(body.force_instrumental).to.equal(false);
    expect(body.prompt)
      .to.contain('sad piano ballad')
      .and.contain('one\ntwo\nthree')
      .and.contain(`${job.result.tempoBpm} BPM`);
    expect(body.music_length_ms).to.equal(
      Math.max(10_000, Math.round(((2 + 6 + 2) * 240 * 1000) / job.result.tempoBpm)),
    );

    expect(job.result).to.include({
      format: 'mp3',
      mimeType: 'audio/mpeg',
      sampleRate: 44100,
      title: 'Rain',
      engine: 'elevenlabs-music:music_v1',
    });
    expect(job.result.durationSeconds).to.be.closeTo(body.music_length_ms / 1000, 0.03);
    const audio = Buffer.from(await (await fetch(job.result.audioUrl)).arrayBuffer());
    expect(mp3Info(audio)?.sampleRate).to.equal(44100);
  });

  it('when the provider is briefly unavailable, then the job is retried and completes, billed once', async () => {
    mode = 'flaky';
    flakyFailures = 1;
    const before = (await api.get('/account/credits')).body.balance;
    const r = await api.post('/songs', { style: 'sea shanty', instrumental: true, tier: 'fast' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status, job.error).to.equal('complete');
    const doc = await stack.db.jobs.findOne({ _id: r.body.jobId, accountId });
    expect(doc?.attempts).to.equal(2);
    expect((await api.get('/account/credits')).body.balance).to.equal(before - stack.config.CREDIT_PRICES.song);
  });

  it('when the provider refuses, then the job fails, the credits come back and song.failed is published', async () => {
    mode = 'refuse';
    const listener = await listenEvents(stack.config, 'song.*');
    try {
      const before = (await api.get('/account/credits')).body.balance;
      const r = await api.post('/songs', { style: 'polka', instrumental: true });
      // Charged at dispatch (the refund may already follow: the refusal is fast).
      await stack.rt.jobs.flushAccepted(); // the charge's ledger entry follows the answer in a batch
      expect(
        await stack.db.ledger.countDocuments({
          jobId: r.body.jobId,
          kind: 'charge',
          millicredits: toUnits(stack.config.CREDIT_PRICES.song),
        }),
      ).to.equal(1);
      const job = await waitForJob(api, r.body.jobId);
      expect(job.status).to.equal('failed');
      expect(job.error).to.equal('music provider refused the request (401: invalid_api_key)');
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.jobId);
      expect(e.routingKey).to.equal('song.failed');
      await until(async () => (await api.get('/account/credits')).body.balance === before, 'the refund');
      const ledger = await stack.db.ledger.find({ accountId, jobId: r.body.jobId }).toArray();
      expect(ledger.map((l) => l.kind).sort()).to.deep.equal(['charge', 'refund']);
    } finally {
      await listener.close();
    }
  });
});
