import { expect } from 'chai';
import { client } from '../../scripts/harness/http';
import { fakeServer } from '../helpers/fake-provider';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, tone } from './helpers';

/**
 * Audio turns with the remote transcription adapter (an OpenAI-compatible /audio/transcriptions
 * API), against a local fake provider: the engine's turn detection cuts the PCM, uploads it as
 * WAV, and the transcript becomes the user's turn.
 */
describe('live: audio turns through an OpenAI-compatible transcription API (fake provider)', function () {
  this.timeout(60_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeServer>>;
  let answer: { status: number; body: unknown } = {
    status: 200,
    body: { text: 'make a flowchart of the hiring process' },
  };
  before(async () => {
    provider = await fakeServer((_req, res) => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
    stack = await startStack({
      scheduler: false,
      env: {
        WORKER_POOLS: 'speech',
        LIVE_TRANSCRIPTION_ENGINE: 'openai',
        LIVE_TRANSCRIPTION_BASE_URL: provider.url,
        OPENAI_API_KEY: 'sk-test-transcribe',
        LIVE_TRANSCRIPTION_MODEL: 'whisper-test',
      },
    });
  });
  after(async () => {
    await stack?.stop();
    await provider?.close();
  });

  const open = async () => {
    const a = await stack.createAccount();
    const s = (await client(stack.baseUrl, a.key).post('/live/session', { turnDetection: { silenceMs: 400 } })).body;
    expect(s.capabilities.audioIn).to.equal(true);
    const c = liveConnect(s.realtimeUrl, { token: s.token });
    const started = await c.next('session.started');
    expect(started.capabilities).to.deep.equal({ audioIn: true, textIn: true, audioOut: true });
    return c;
  };
  const speakInto = (c: ReturnType<typeof liveConnect>) => {
    const audio = Buffer.concat([tone(200, 0), tone(900, 9000), tone(600, 0)]);
    for (let at = 0; at < audio.length; at += 960) c.ws.send(audio.subarray(at, at + 960)); // 20 ms frames
  };

  it('when the user speaks and falls silent, then the turn is transcribed by the provider and answered like a text turn', async () => {
    const c = await open();
    speakInto(c);
    await c.next('speech.started');
    const transcript = await c.next('transcript');
    expect(transcript).to.deep.equal({
      type: 'transcript',
      role: 'user',
      text: 'make a flowchart of the hiring process',
    });
    const result = await c.next('tool.result');
    expect(result.artifact.type).to.equal('flowchart');
    await c.next('resumption');
    expect(c.audioBytes()).to.be.above(24_000);
    c.close();

    const req = provider.requests.at(-1)!;
    expect(req.method).to.equal('POST');
    expect(req.url).to.equal('/audio/transcriptions');
    expect(req.headers.authorization).to.equal('Bearer sk-test-transcribe');
    expect(req.headers['content-type']).to.match(/^multipart\/form-data; boundary=/);
    expect(req.body).to.match(/name="model"\r\n\r\nwhisper-test/);
    expect(req.body).to.match(/filename="turn\.wav"\r\nContent-Type: audio\/wav/);
    expect(req.body).to.contain('RIFF');
    expect(req.body).to.contain('WAVEfmt ');
  });

  it('when the provider fails, then the client gets a transcription_failed error and no turn is made up', async () => {
    answer = { status: 500, body: { error: 'boom sk-secret' } };
    try {
      const c = await open();
      speakInto(c);
      const err = await c.next('error');
      expect(err.code).to.equal('transcription_failed');
      expect(err.message).to.equal('the transcription provider answered HTTP 500');
      expect(c.events.filter((e) => e.type === 'transcript' || e.type === 'assistant.text')).to.have.length(0);
      c.close();
    } finally {
      answer = { status: 200, body: { text: 'make a flowchart of the hiring process' } };
    }
  });
});
