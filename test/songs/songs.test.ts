import { expect } from 'chai';
import sinon from 'sinon';
import { parseWav } from '../../platform/media/wav';
import { planSong } from '../../workers/engines/songs/song.engine';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { listenEvents } from '../helpers/fake-provider';

const fetchBytes = async (url: string, headers: Record<string, string> = {}) => {
  const res = await fetch(url, { headers });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
};

describe('songs (local synthesiser)', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  before(async () => {
    stack = await startStack();
    const acct = await stack.createAccount({ credits: 1000 });
    accountId = acct.accountId;
    api = client(stack.baseUrl, acct.key);
  });
  after(() => stack.stop());

  const song = async (body: Record<string, unknown>) => {
    const r = await api.post('/songs', body);
    expect(r.status, r.text).to.equal(202);
    return waitForJob(api, r.body.jobId);
  };

  it('when a song is posted, then 202 returns a song_ job envelope and credits are charged', async () => {
    const before = (await api.get('/account/credits')).body.balance;
    const r = await api.post('/songs', { style: 'upbeat synth pop', tier: 'fast' });
    expect(r.status).to.equal(202);
    expect(r.body.jobId).to.match(/^song_/);
    expect(r.body).to.include({ type: 'song', status: 'queued', pollUrl: `/api/v1/jobs/${r.body.jobId}` });
    const after = (await api.get('/account/credits')).body.balance;
    expect(before - after).to.equal(stack.config.CREDIT_PRICES.song);
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
  });

  it('when the song completes, then the result names the audio and the WAV header matches it', async () => {
    const job = await song({
      style: 'dreamy lo-fi in D minor',
      title: 'Night Owl',
      lyrics: 'first line here\nsecond line there\n\nthird line sung',
      tier: 'auto',
    });
    expect(job.status).to.equal('complete');
    const r = job.result;
    expect(r).to.include({
      title: 'Night Owl',
      format: 'wav',
      sampleRate: 22050,
      key: 'D minor',
      engine: 'local-synth-v1',
      instrumental: false,
    });
    expect(r.lyrics).to.equal('first line here\nsecond line there\nthird line sung');
    expect(r.tempoBpm).to.be.within(50, 84); // lo-fi range
    expect(r.audioUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/assets\/.+\.wav\?exp=\d+&sig=/);
    // 2 intro + 3 lines × 2 + 2 outro = 10 bars of 4 beats.
    const expected = (10 * 4 * 60) / r.tempoBpm;
    expect(r.durationSeconds).to.be.closeTo(expected, 0.001);

    const file = await fetchBytes(r.audioUrl);
    expect(file.status).to.equal(200);
    expect(file.headers.get('content-type')).to.equal('audio/wav');
    const wav = parseWav(file.body);
    expect(wav).to.include({ format: 1, channels: 1, sampleRate: 22050, bitsPerSample: 16 });
    expect(wav.durationSeconds).to.be.closeTo(expected, 1 / 22050);
    expect(file.body.length).to.equal(r.sizeBytes);
    // Real audio, not silence: a decent RMS level.
    let sum = 0;
    for (let i = 0; i < wav.frames; i++) sum += file.body.readInt16LE(wav.dataOffset + i * 2) ** 2;
    expect(Math.sqrt(sum / wav.frames)).to.be.greaterThan(500);
  });

  it('when the same request is sent twice, then the audio bytes are identical; another style gives other bytes', async () => {
    const body = { style: 'happy acoustic folk', lyrics: 'sun on the hill\nwind in the trees', tier: 'fast' };
    const [a, b, c] = await Promise.all([song(body), song(body), song({ ...body, style: 'dark industrial techno' })]);
    expect(a.result.sha256).to.equal(b.result.sha256);
    const [fa, fb] = await Promise.all([fetchBytes(a.result.audioUrl), fetchBytes(b.result.audioUrl)]);
    expect(fa.body.equals(fb.body)).to.equal(true);
    expect(c.result.sha256).to.not.equal(a.result.sha256);
    expect(a.result.key).to.match(/ major$/);
    expect(c.result.tempoBpm).to.be.within(118, 130);
  });

  it('when the audio is requested with a Range header, then 206 returns exactly that slice', async () => {
    const job = await song({ style: 'jazz trio', instrumental: true, tier: 'fast' });
    const full = await fetchBytes(job.result.audioUrl);
    const part = await fetchBytes(job.result.audioUrl, { range: 'bytes=0-43' });
    expect(part.status).to.equal(206);
    expect(part.headers.get('content-range')).to.equal(`bytes 0-43/${full.body.length}`);
    expect(part.body.toString('ascii', 0, 4)).to.equal('RIFF');
    expect(part.body.equals(full.body.subarray(0, 44))).to.equal(true);
    const tail = await fetchBytes(job.result.audioUrl, { range: 'bytes=1000-1999' });
    expect(tail.status).to.equal(206);
    expect(tail.body.equals(full.body.subarray(1000, 2000))).to.equal(true);
  });

  it('when instrumental is true, then lyrics are null and the length follows the tier', async () => {
    const [fast, auto] = await Promise.all([
      song({ style: 'cinematic orchestral', instrumental: true, lyrics: 'ignored', tier: 'fast' }),
      song({ style: 'cinematic orchestral', instrumental: true }),
    ]);
    expect(fast.result.lyrics).to.equal(null);
    expect(fast.result.instrumental).to.equal(true);
    expect(fast.result.durationSeconds).to.be.closeTo((8 * 240) / fast.result.tempoBpm, 0.001);
    expect(auto.result.durationSeconds).to.be.closeTo((16 * 240) / auto.result.tempoBpm, 0.001);
  });

  it('when autoLyrics is set without lyrics, then deterministic lyrics are written from the style', async () => {
    const job = await song({ style: 'neon synthwave', autoLyrics: true, tier: 'fast' });
    const lines = job.result.lyrics.split('\n');
    expect(lines).to.have.length(4);
    expect(job.result.lyrics).to.match(/neon|synthwave/);
    expect(job.result.lyrics).to.equal(
      planSong({ style: 'neon synthwave', autoLyrics: true, tier: 'fast' }).lines.join('\n'),
    );
  });

  it('when the premium tier is asked, then the audio is 44.1 kHz', async () => {
    const job = await song({ style: 'rock anthem 140 bpm', lyrics: 'we are the ones', tier: 'premium' });
    expect(job.result).to.include({ sampleRate: 44100, tempoBpm: 140 });
    const wav = parseWav((await fetchBytes(job.result.audioUrl)).body);
    expect(wav.sampleRate).to.equal(44100);
  });

  it('when style is missing or a field has the wrong type, then 400 names the field and nothing is charged', async () => {
    const before = (await api.get('/account/credits')).body.balance;
    const a = await api.post('/songs', { title: 'x' });
    expect(a.status).to.equal(400);
    expect(a.body.error.message).to.match(/^style: /);
    const b = await api.post('/songs', { style: 'pop', tier: 'ultra' });
    expect(b.status).to.equal(400);
    expect(b.body.error.message).to.equal('tier: must be one of auto, premium, fast');
    const c = await api.post('/songs', { style: 'pop', instrumental: 'yes' });
    expect(c.body.error.message).to.equal('instrumental: must be a boolean');
    expect((await api.get('/account/credits')).body.balance).to.equal(before);
  });

  it('when a song POST is retried with the same Idempotency-Key, then the original job returns and is billed once', async () => {
    const before = (await api.get('/account/credits')).body.balance;
    const body = { style: 'surf rock', instrumental: true, tier: 'fast' };
    const a = await api.post('/songs', body, { 'idempotency-key': 'song-retry-1' });
    const b = await api.post('/songs', body, { 'idempotency-key': 'song-retry-1' });
    expect(b.status).to.equal(202);
    expect(b.body.jobId).to.equal(a.body.jobId);
    expect(b.headers.get('idempotent-replayed')).to.equal('true');
    expect((await api.get('/account/credits')).body.balance).to.equal(before - stack.config.CREDIT_PRICES.song);
    await waitForJob(api, a.body.jobId);
  });

  it('when the song renders, then the job records its progress section by section', async () => {
    const spy = sinon.spy(stack.workers!.runtime.jobs, 'progress');
    try {
      const job = await song({ style: 'house groove 124 bpm in A minor', instrumental: true, title: 'Groove' });
      const steps = spy
        .getCalls()
        .filter((c) => c.args[0] === job.jobId)
        .map((c) => `${c.args[2].rawStatus}: ${c.args[2].progressMessage}`);
      expect(steps).to.deep.equal([
        'composing: Composing "Groove": 16 bars at 124 BPM in A minor, instrumental',
        'arranging: Arranging 16 bars at 124 BPM in A minor',
        'rendering: Rendered section 1 of 2 (bars 1-8 of 16)',
        'rendering: Rendered section 2 of 2 (bars 9-16 of 16)',
        'encoding: Encoding 16-bit PCM WAV',
        'storing: Saving the audio',
      ]);
    } finally {
      sinon.restore();
    }
  });

  it('when the song completes, then song.completed is published with the audio URL', async () => {
    const listener = await listenEvents(stack.config, 'song.*');
    try {
      const r = await api.post('/songs', { style: 'ambient drone', instrumental: true, tier: 'fast' });
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.jobId);
      expect(e.routingKey).to.equal('song.completed');
      expect(e.body.accountId).to.equal(accountId);
      expect(e.body.data.audioUrl).to.match(/^http:.*\.wav\?/);
      expect(e.body.data.pollUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${r.body.jobId}`);
    } finally {
      await listener.close();
    }
  });
});
