import { expect } from 'chai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { correlation, espeakDirect, postSpeech, rms, run, samplesOf } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

/**
 * POST /speech with the local engine (espeak-ng) through the real stack: API → RabbitMQ →
 * speech pool → streamed back. The reference is espeak-ng run directly on the same text.
 */
describe('speech: POST /speech and GET /speech/voices (espeak-ng-local)', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'speech' } });
  });
  after(async () => {
    await stack?.stop();
  });

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount(opts);
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();

  it("when a sentence is spoken, then the stream is 24 kHz mono s16le PCM as long as espeak-ng's own synthesis of it, audible, with headers that state the format", async () => {
    const { key } = await account();
    const text = 'The quick brown fox jumps over the lazy dog.';
    const r = await postSpeech(stack.baseUrl, key, { text, voice: 'en-us-male' });
    expect(r.status, r.body.toString().slice(0, 200)).to.equal(200);
    expect(r.error).to.equal(undefined);
    expect(r.headers.get('content-type')).to.equal('audio/L16; rate=24000; channels=1');
    expect(r.headers.get('transfer-encoding')).to.equal('chunked');
    expect(r.headers.get('x-audio-sample-rate')).to.equal('24000');
    expect(r.headers.get('x-audio-channels')).to.equal('1');
    expect(r.headers.get('x-audio-encoding')).to.equal('s16le');
    expect(r.headers.get('x-speech-voice')).to.equal('en-us-male');
    expect(r.headers.get('x-speech-engine')).to.equal('espeak-ng-local');

    // espeak-ng is deterministic: the same text and voice give the same samples at 22.05 kHz.
    // Resampled to 24 kHz the duration must be the same to within one output sample (42 µs):
    // a wrong rate (e.g. 22.05 kHz bytes labelled 24 kHz) would be 8.8% off.
    const direct = await espeakDirect(text, 'en-us');
    expect(direct.rate).to.equal(22_050);
    expect(r.body.length % 2).to.equal(0);
    const seconds = r.body.length / 2 / 24_000;
    const expected = direct.samples / direct.rate;
    expect(Math.abs(seconds - expected), `${seconds} s vs ${expected} s`).to.be.at.most(1 / 24_000);
    expect(seconds).to.be.within(2, 5);

    // Audible, not silence or noise: loud enough, and the same waveform as ffmpeg's own
    // resampling of the direct synthesis (a wrong rate, byte order or channel count decorrelates).
    const pcm = samplesOf(r.body);
    expect(rms(pcm)).to.be.above(1000);
    expect(pcm.filter((v) => Math.abs(v) > 2000).length / pcm.length).to.be.above(0.1);
    const reference = samplesOf(
      await run(
        'ffmpeg',
        [
          '-hide_banner',
          '-loglevel',
          'error',
          '-f',
          'wav',
          '-i',
          'pipe:0',
          '-ar',
          '24000',
          '-ac',
          '1',
          '-f',
          's16le',
          'pipe:1',
        ],
        direct.wav,
      ),
    );
    expect(Math.abs(reference.length - pcm.length)).to.be.at.most(1);
    expect(correlation(pcm, reference)).to.be.above(0.999);
  });

  it('when a longer sentence is spoken, then its first bytes reach the client before the last (streamed, chunked)', async () => {
    const { key } = await account();
    const text =
      'When the long summer evening finally settled over the quiet harbour town, the fishermen pulled their boats onto the shingle, mended the torn nets by lantern light, and told each other slow stories about storms they had weathered decades ago, while the children listened from the sea wall.';
    expect(text.length).to.be.at.most(300);
    const r = await postSpeech(stack.baseUrl, key, { text });
    expect(r.status).to.equal(200);
    expect(r.body.length / 2 / 24_000).to.be.above(12);
    // Over a megabyte arrives in several pieces (the pool sends at most 64 KiB a message).
    expect(r.chunkAt.length).to.be.at.least(4);
    expect(r.chunkAt[0]!).to.be.below(r.chunkAt.at(-1)!);
  });

  it('when voice is omitted or "default", then the default voice speaks; another catalogue voice is honoured', async () => {
    const { key } = await account();
    const omitted = await postSpeech(stack.baseUrl, key, { text: 'Good morning.' });
    const named = await postSpeech(stack.baseUrl, key, { text: 'Good morning.', voice: 'default' });
    const french = await postSpeech(stack.baseUrl, key, { text: 'Bonjour à tous.', voice: 'fr-female' });
    expect([omitted.status, named.status, french.status]).to.deep.equal([200, 200, 200]);
    expect(omitted.headers.get('x-speech-voice')).to.equal('en-us-female');
    expect(named.headers.get('x-speech-voice')).to.equal('en-us-female');
    expect(named.body.equals(omitted.body)).to.equal(true);
    expect(french.headers.get('x-speech-voice')).to.equal('fr-female');
    expect(rms(samplesOf(french.body))).to.be.above(500);
  });

  it('when the voice is unknown, then 400 naming voice and nothing is charged', async () => {
    const { api, accountId } = await account({ credits: 5 });
    const r = await api.post('/speech', { text: 'Hello.', voice: 'klingon-warrior' });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(/^voice: unknown voice "klingon-warrior"; GET \/speech\/voices/);
    expect(await balance(api)).to.equal(5);
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when the text is more than one sentence, a second line, or over 300 characters, then 400 naming text and saying to send one sentence per call', async () => {
    const { api, accountId } = await account({ credits: 5 });
    for (const text of [
      'It rained. Then the sun came out.',
      'Is it done? Yes it is',
      'First line\nsecond line',
      'a'.repeat(301),
      'Stop!  Go.',
    ]) {
      const r = await api.post('/speech', { text });
      expect(r.status, text.slice(0, 40)).to.equal(400);
      expect(r.body.error.message, text.slice(0, 40)).to.match(/^text: .*send one sentence per call/);
    }
    for (const text of ['', '   ']) {
      const r = await api.post('/speech', { text });
      expect(r.status).to.equal(400);
      expect(r.body.error.message).to.match(/^text: must not be empty/);
    }
    expect((await api.post('/speech', {})).body.error.message).to.equal('text: is required');
    expect(await ledger(accountId)).to.have.length(0);
    // Abbreviations, initials, decimals and a final "?" or "..." are still one sentence.
    for (const text of [
      'Dr. Smith met J. R. Tolkien at 3.30 p.m. today.',
      'Are you sure?',
      'Well...',
      'It is cheap, i.e. free, and costs 0.00 dollars.',
    ]) {
      const r = await postSpeech(stack.baseUrl, (await account()).key, { text });
      expect(r.status, text).to.equal(200);
    }
  });

  it('when speech is produced, then characters (code points of the trimmed text) × the speech_char price are charged once, and the headers say so', async () => {
    const { api, accountId, key } = await account({ credits: 10 });
    // 40 code points (41 UTF-16 units, 45 UTF-8 bytes): characters are code points.
    const text = '  Café crème: charge me forty characters 🙂  ';
    const chars = [...text.trim()].length;
    expect(chars).to.equal(40);
    const r = await postSpeech(stack.baseUrl, key, { text });
    expect(r.status).to.equal(200);
    expect(r.headers.get('x-speech-characters')).to.equal('40');
    expect(r.headers.get('x-credits-charged')).to.equal('0.4');
    expect(await balance(api)).to.equal(9.6);
    const l = await ledger(accountId);
    expect(l.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'speech_char', 0.4],
    ]);
    expect(await stack.db.db.collection('credit_holds').countDocuments({ accountId })).to.equal(0);
  });

  it('when 300 characters would read out for longer than 30 s ("㎏" is "kilograms"), then the audio stops at exactly 30 s with a clean end and the header states the limit', async () => {
    const { key } = await account({ credits: 10 });
    const r = await postSpeech(stack.baseUrl, key, { text: '㎏'.repeat(300) });
    expect(r.status).to.equal(200);
    expect(r.error).to.equal(undefined);
    expect(r.headers.get('x-audio-max-seconds')).to.equal('30');
    expect(r.headers.get('x-credits-charged')).to.equal('3');
    expect(r.body.length / 2 / 24_000).to.equal(30);
  });

  it('when the balance cannot cover the characters, then 402 and no audio is sent', async () => {
    const { api } = await account({ credits: 0.05 });
    const r = await api.post('/speech', { text: 'This sentence costs more than five cents.' });
    expect(r.status).to.equal(402);
    expect(r.body.error.code).to.equal('insufficient_credits');
    expect(await balance(api)).to.equal(0.05);
  });

  it('when the voices are listed with a read or an ai key, then every voice has a name, language, engine and gender where known, exactly one is the default', async () => {
    for (const scopes of [['read'], ['ai']] as const) {
      const { api } = await account({ scopes: [...scopes] });
      const r = await api.get('/speech/voices');
      expect(r.status, scopes[0]).to.equal(200);
      expect(r.body.total).to.equal(r.body.data.length);
      expect(r.body.data.length).to.be.at.least(16);
      const names = r.body.data.map((v: any) => v.name);
      expect(new Set(names).size).to.equal(names.length);
      expect(names).to.include.members([
        'en-us-female',
        'en-us-male',
        'en-gb-female',
        'fr-female',
        'de-male',
        'es-female',
        'it-male',
        'pt-br-female',
        'nl-male',
      ]);
      expect(r.body.data.filter((v: any) => v.default).map((v: any) => v.name)).to.deep.equal(['en-us-female']);
      for (const v of r.body.data) {
        expect(Object.keys(v).sort()).to.deep.equal(['default', 'description', 'engine', 'gender', 'language', 'name']);
        expect(v.engine).to.equal('espeak-ng-local');
        expect(v.language).to.match(/^[a-z]{2}-[A-Z]{2}$/);
        expect([null, 'female', 'male']).to.include(v.gender);
      }
    }
    const writeOnly = await account({ scopes: ['write'] });
    expect((await writeOnly.api.get('/speech/voices')).status).to.equal(403);
    const readOnly = await account({ scopes: ['read'] });
    expect((await readOnly.api.post('/speech', { text: 'Hello.' })).status).to.equal(403);
  });

  it('when every catalogue voice speaks, then each produces audio (no name the API accepts is one espeak-ng refuses)', async () => {
    const { api, key } = await account();
    const voices = (await api.get('/speech/voices')).body.data as { name: string }[];
    for (const v of voices) {
      const r = await postSpeech(stack.baseUrl, key, { text: 'One two three.', voice: v.name });
      expect(r.status, v.name).to.equal(200);
      expect(rms(samplesOf(r.body)), v.name).to.be.above(300);
    }
  });
});
