import { expect } from 'chai';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, type LiveClient } from './helpers';

/** A slow client never makes the server buffer without bound; a newer connection takes a session over. */
describe('live: backpressure and connection takeover', function () {
  this.timeout(90_000);
  let stack: Stack;
  const clients: LiveClient[] = [];
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'speech', LIVE_MAX_BUFFERED_BYTES: '65536' } });
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => stack?.stop());

  it('when the client stops reading during a long spoken reply, then the server skips the rest of the audio, says so, and finishes the turn', async () => {
    const a = await stack.createAccount();
    const api = client(stack.baseUrl, a.key);
    // Ten long memories: recalling them is a reply of several minutes of audio (well over 10 MB).
    for (let i = 0; i < 10; i++) {
      const text =
        `item ${i} of the packing list is ${'a rather long description of camping gear and spare batteries '.repeat(7)}`.slice(
          0,
          480,
        );
      expect((await api.post('/live/action', { action: 'remember', params: { text } })).status).to.equal(200);
    }
    const s = (await api.post('/live/session', {})).body;
    const c = liveConnect(s.realtimeUrl, { token: s.token });
    clients.push(c);
    await c.next('session.started');
    c.ws.pause(); // stop reading: the kernel's buffers fill, then the server's
    c.send({ type: 'input_text', text: 'what do you remember about the packing list?' });
    await new Promise((r) => setTimeout(r, 4000));
    const heldBefore = process.memoryUsage().rss;
    c.ws.resume();
    const err = await c.next('error', (e) => e.code === 'backpressure', 30_000);
    expect(err.message).to.match(/skipped/);
    const done = await c.next('resumption', () => true, 30_000);
    expect(c.audioBytes()).to.equal(done.audioBytes);
    const final = c.events.find((e) => e.type === 'assistant.text' && typeof e.text === 'string')!;
    const fullAudioEstimate = (final.text.length / 15) * 48_000; // espeak-ng speaks ~15 characters a second
    expect(done.audioBytes).to.be.below(fullAudioEstimate / 2);
    expect(process.memoryUsage().rss - heldBefore).to.be.below(64 * 1024 * 1024);
  });

  it('when a second connection claims the session with a resumed token, then the first is closed with 4409 and the session stays connected', async () => {
    const a = await stack.createAccount();
    const api = client(stack.baseUrl, a.key);
    const s = (await api.post('/live/session', {})).body;
    const first = liveConnect(s.realtimeUrl, { token: s.token });
    clients.push(first);
    const { resumptionHandle } = await first.next('session.started');
    const r = (await api.post('/live/session', { resumptionHandle })).body;
    const second = liveConnect(r.realtimeUrl, { token: r.token });
    clients.push(second);
    await second.next('session.started');
    expect(await first.closed).to.deep.equal({
      code: 4409,
      reason: 'superseded by a newer connection to this session',
    });
    await new Promise((r2) => setTimeout(r2, 200));
    const doc = await stack.db.db.collection<any>('live_sessions').findOne({ _id: s.sessionId });
    expect(doc).to.include({ status: 'connected', connections: 2 });
  });
});
