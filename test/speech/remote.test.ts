import type http from 'node:http';
import { expect } from 'chai';
import { fakeServer, type Recorded } from '../helpers/fake-provider';
import { client, eventually, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { SPEECH_AUDIO_MAX_BYTES } from '../../platform/speech/limits';
import { createSpeechService } from '../../platform/speech/speech.service';
import { postSpeech, samplesOf, tone } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

/**
 * SPEECH_ENGINE=openai: the remote adapter against a local fake of an OpenAI-compatible audio
 * speech API (POST /audio/speech, response_format pcm, 24 kHz s16le mono streamed), through the
 * real stack. The fake decides when each piece of audio leaves, so these tests also show the
 * API forwarding audio before the provider has finished, and what each failure costs.
 */
describe('speech: the OpenAI-compatible engine (fake provider) and what failures cost', function () {
  this.timeout(60_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeServer>>;
  let behaviour: (req: Recorded, res: http.ServerResponse) => Promise<void>;

  before(async () => {
    provider = await fakeServer((req, res) => behaviour(req, res));
    stack = await startStack({
      scheduler: false,
      env: {
        WORKER_POOLS: 'speech',
        SPEECH_ENGINE: 'openai',
        SPEECH_MODEL: 'tts-test',
        OPENAI_BASE_URL: `${provider.url}/v1`,
        OPENAI_API_KEY: 'sk-fake-speech',
        SPEECH_RPC_TIMEOUT_MS: '1500',
      },
    });
  });
  after(async () => {
    await stack?.stop();
    await provider?.close();
  });

  const account = async (credits = 10) => {
    const a = await stack.createAccount({ credits });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();
  const pcmHead = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'audio/pcm' });

  it('when the provider streams PCM, then it is asked in the OpenAI protocol and the client receives the first audio before the provider sends the rest', async () => {
    const first = tone(0.5, 440);
    const rest = tone(1, 660);
    let clientHasFirst!: () => void;
    const clientGotFirst = new Promise<void>((r) => (clientHasFirst = r));
    behaviour = async (_req, res) => {
      pcmHead(res);
      res.write(first);
      // The provider does not go on until the client has heard the beginning: without streaming
      // end to end, this call could never finish.
      await clientGotFirst;
      res.end(rest);
    };
    const { key } = await account();
    const r = await postSpeech(stack.baseUrl, key, { text: 'Stream this to me please.', voice: 'nova' }, (n) => {
      if (n >= first.length) clientHasFirst();
    });
    expect(r.status).to.equal(200);
    expect(r.error).to.equal(undefined);
    expect(r.body.equals(Buffer.concat([first, rest]))).to.equal(true);
    expect(r.headers.get('x-speech-engine')).to.equal('openai-compatible:tts-test');
    expect(r.headers.get('x-speech-voice')).to.equal('nova');
    expect(r.headers.get('content-type')).to.equal('audio/L16; rate=24000; channels=1');

    const sent = provider.requests.at(-1)!;
    expect(sent.method).to.equal('POST');
    expect(sent.url).to.equal('/v1/audio/speech');
    expect(sent.headers.authorization).to.equal('Bearer sk-fake-speech');
    expect(JSON.parse(sent.body)).to.deep.equal({
      model: 'tts-test',
      input: 'Stream this to me please.',
      voice: 'nova',
      response_format: 'pcm',
    });
  });

  it('when the provider splits a sample across pieces, then the client still gets whole samples in order', async () => {
    const audio = tone(0.3, 300);
    behaviour = async (_req, res) => {
      pcmHead(res);
      for (let i = 0; i < audio.length; i += 777) {
        res.write(audio.subarray(i, i + 777)); // odd sizes
        await new Promise((r) => setTimeout(r, 2));
      }
      res.end();
    };
    const { key } = await account();
    const r = await postSpeech(stack.baseUrl, key, { text: 'Odd pieces.' });
    expect(r.status).to.equal(200);
    expect(r.body.equals(audio)).to.equal(true);
    expect(samplesOf(r.body).length).to.equal(audio.length / 2);
  });

  it("when the voices are listed, then they are the provider's, multilingual, gender unknown, alloy the default", async () => {
    const { api } = await account();
    const r = await api.get('/speech/voices');
    expect(r.status).to.equal(200);
    expect(r.body.data.map((v: any) => v.name)).to.include.members(['alloy', 'nova', 'onyx', 'shimmer']);
    expect(r.body.data.filter((v: any) => v.default).map((v: any) => v.name)).to.deep.equal(['alloy']);
    for (const v of r.body.data)
      expect(v).to.include({ language: 'mul', gender: null, engine: 'openai-compatible:tts-test' });
    expect((await api.post('/speech', { text: 'Hi.', voice: 'en-us-female' })).body.error.message).to.match(
      /^voice: unknown voice/,
    );
  });

  it('when the provider answers 500, then 503 before any audio and the held credits are given back', async () => {
    behaviour = async (_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'the speech model is on fire' } }));
    };
    const { api, accountId } = await account(10);
    const r = await api.post('/speech', { text: 'This will not be spoken.' });
    expect(r.status).to.equal(503);
    expect(r.body.error.code).to.equal('service_unavailable');
    // Only the status: the provider's own message can quote the API key (see the 401 test).
    expect(r.body.error.message).to.equal('speech provider answered 500; nothing was charged');
    expect(await balance(api)).to.equal(10);
    const l = await ledger(accountId);
    expect(l.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'speech_char', 0.24],
      ['refund', 'speech_char', 0.24],
    ]);
  });

  it('when the provider refuses the key with a message quoting it, then the 503 says only the status and nothing was charged', async () => {
    behaviour = async (_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            message:
              'Incorrect API key provided: sk-fake-***eech. You can find your API key at https://platform.openai.com/account/api-keys.',
          },
        }),
      );
    };
    const { api } = await account(10);
    const r = await api.post('/speech', { text: 'Who am I?' });
    expect(r.status).to.equal(503);
    expect(r.body.error.message).to.equal('speech provider answered 401; nothing was charged');
    expect(JSON.stringify(r.body)).not.to.match(/sk-|API key/);
    expect(await balance(api)).to.equal(10);
  });

  it("when the provider would speak for longer than 30 s, then the client gets exactly 30 s, ended cleanly, is told the limit, and the provider's answer is cancelled", async () => {
    const second = tone(1, 220);
    let providerClosed!: (wroteAll: boolean) => void;
    const closed = new Promise<boolean>((r) => (providerClosed = r));
    behaviour = async (_req, res) => {
      pcmHead(res);
      let wroteAll = false;
      res.on('close', () => providerClosed(wroteAll));
      // 100 s at twice real time: without the cap all of it would be sent and charged as one call.
      for (let i = 0; i < 100 && !res.destroyed; i++) {
        res.write(second);
        await new Promise((r) => setTimeout(r, 5));
      }
      wroteAll = !res.destroyed;
      res.end();
    };
    const { key, api } = await account(10);
    const r = await postSpeech(stack.baseUrl, key, { text: '㎏ ㎏ ㎏ ㎏ ㎏.' });
    expect(r.status).to.equal(200);
    expect(r.error).to.equal(undefined);
    expect(r.headers.get('x-audio-max-seconds')).to.equal('30');
    expect(r.body.length).to.equal(SPEECH_AUDIO_MAX_BYTES);
    expect(r.body.length / 2 / 24_000).to.equal(30);
    expect(await closed, 'the provider was stopped before writing all 100 s').to.equal(false);
    expect(await balance(api)).to.equal(9.9);
  });

  it('when the client leaves while the credit hold is still being made and the audio has already come, then nothing is delivered and the hold is released', async () => {
    behaviour = async (_req, res) => {
      pcmHead(res);
      res.end(tone(0.5));
    };
    const { api, accountId } = await account(10);
    const rt = stack.rt;
    // Only the hold is slowed (real database, broker, pool and provider), to open the window.
    let holdMay!: () => void;
    const holdGate = new Promise<void>((r) => (holdMay = r));
    const credits = Object.assign(Object.create(rt.credits) as typeof rt.credits, {
      hold: async (...args: Parameters<typeof rt.credits.hold>) => {
        await holdGate;
        return rt.credits.hold(...args);
      },
    });
    const service = createSpeechService({ ...rt, credits });
    const ac = new AbortController();
    let started = 0;
    let chunks = 0;
    const speaking = service
      .speak(
        { accountId, requestId: 'req-early-abort', request: { text: 'Gone already.' } as any, signal: ac.signal },
        { start: () => started++, chunk: () => chunks++ },
      )
      .catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 700)); // the pool has answered with all its audio
    ac.abort(new Error('the client left'));
    holdMay();
    const err = (await speaking) as Error;
    expect(err).to.be.instanceOf(Error);
    expect(err.message).to.match(/^the client left before the audio was sent; nothing was charged$/);
    expect([started, chunks]).to.deep.equal([0, 0]);
    expect(await balance(api)).to.equal(10);
    expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    expect(await stack.db.db.collection('credit_holds').countDocuments({ accountId })).to.equal(0);
  });

  it('when no audio comes before the deadline, then 504 and nothing is charged', async () => {
    behaviour = async (_req, res) => {
      await new Promise((r) => setTimeout(r, 2500));
      if (!res.destroyed) res.end();
    };
    const { api, accountId } = await account(10);
    const t0 = Date.now();
    const r = await api.post('/speech', { text: 'Too slow.' });
    expect(r.status).to.equal(504);
    expect(r.body.error.code).to.equal('timeout');
    expect(r.body.error.message).to.match(/nothing was charged$/);
    expect(Date.now() - t0).to.be.within(1400, 2400);
    expect(await balance(api)).to.equal(10);
    expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
  });

  it('when the provider breaks off after some audio, then the client sees the body cut (no clean end) and the charge stands', async () => {
    const part = tone(0.25);
    behaviour = async (_req, res) => {
      pcmHead(res);
      res.write(part);
      await new Promise((r) => setTimeout(r, 100));
      res.destroy();
    };
    const { api, accountId, key } = await account(10);
    const r = await postSpeech(stack.baseUrl, key, { text: 'Cut me off.' });
    expect(r.status).to.equal(200);
    expect(r.error, 'reading the body fails').to.be.instanceOf(Error);
    expect(r.body.equals(part)).to.equal(true);
    expect(await balance(api)).to.equal(9.89);
    expect((await ledger(accountId)).map((e) => [e.kind, fromUnits(e.millicredits)])).to.deep.equal([['charge', 0.11]]);
    await eventually(
      async () => (await stack.db.db.collection('credit_holds').countDocuments({ accountId })) === 0,
      5000,
      'the hold captured',
    );
  });

  it('when the client leaves before any audio, then the hold is given back', async () => {
    let asked!: () => void;
    const providerAsked = new Promise<void>((r) => (asked = r));
    behaviour = async (_req, res) => {
      asked();
      await new Promise((r) => setTimeout(r, 800));
      if (!res.destroyed) res.end(tone(0.1));
    };
    const { api, accountId, key } = await account(10);
    const ac = new AbortController();
    const pending = fetch(`${stack.baseUrl}/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'Never mind.' }),
      signal: ac.signal,
    }).catch((e: unknown) => e);
    await providerAsked;
    ac.abort();
    await pending;
    await eventually(async () => (await ledger(accountId)).length === 2, 5000, 'the refund');
    expect(await balance(api)).to.equal(10);
  });
});
