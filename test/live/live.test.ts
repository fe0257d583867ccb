import { expect } from 'chai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { signLiveToken } from '../../platform/live/tokens';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { liveConnect, tone, type LiveClient } from './helpers';

/**
 * POST /live/session, the realtime engine (WebSocket at /realtime) and POST /live/action through
 * the real stack: API, RabbitMQ, the speech pool (espeak-ng) and the image pool. Offline: no
 * transcription engine (text turns only).
 */
describe('live: sessions, the realtime engine and /live/action', function () {
  this.timeout(60_000);
  let stack: Stack;
  const clients: LiveClient[] = [];
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'speech,image' } });
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => stack?.stop());

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount(opts);
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const connect = (url: string, token?: string) => {
    const c = liveConnect(url, { token });
    clients.push(c);
    return c;
  };
  const session = (id: string) => stack.db.db.collection<any>(COLLECTIONS.liveSessions).findOne({ _id: id });

  it('when a session is opened, then it answers a single-use token, the ws:// URL and the locked settings, and is charged live_session once', async () => {
    const { api, accountId } = await account();
    const before = await balance(api);
    const r = await api.post('/live/session', {
      voice: 'en-us-robot',
      deviceName: 'Robo',
      clientTools: ['get_device_status'],
      turnDetection: { silenceMs: 500 },
    });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({
      persona: 'robot',
      voice: 'en-us-robot',
      deviceName: 'Robo',
      ambient: false,
      resumed: false,
      charged: 5,
    });
    expect(r.body.realtimeUrl).to.equal(`${stack.baseUrl.replace('http://', 'ws://').replace('/api/v1', '')}/realtime`);
    expect(r.body.sessionId).to.match(/^live_/);
    expect(r.body.tools).to.include.members([
      'search_web',
      'create_presentation',
      'create_notes',
      'create_flowchart',
      'create_whiteboard',
      'generate_image',
      'list_projects',
      'get_account',
      'remember',
      'recall',
      'forget',
    ]);
    expect(r.body.clientTools).to.deep.equal(['get_device_status']);
    expect(r.body.turnDetection).to.deep.equal({
      type: 'energy',
      rmsThreshold: 500,
      silenceMs: 500,
      minSpeechMs: 100,
      maxTurnMs: 30_000,
    });
    expect(r.body.capabilities).to.deep.equal({ audioIn: false, textIn: true, audioOut: true });
    expect(new Date(r.body.expiresAt).getTime() - Date.now()).to.be.within(250_000, 301_000);
    expect(await balance(api)).to.equal(before - 5);
    const charges = await stack.db.ledger.find({ accountId, operation: 'live_session' }).toArray();
    expect(charges.filter((c) => c.kind === 'charge' || c.kind === undefined).length).to.be.at.least(1);
    expect(charges.filter((c) => c.kind === 'refund')).to.have.length(0);
    const doc = await session(r.body.sessionId);
    expect(doc).to.include({ status: 'issued', accountId });
    expect(doc.charge.capturedAt).to.be.instanceOf(Date);
    expect(await stack.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })).to.equal(0);
  });

  it('when ambient is asked without the proactiveAudio feature, then 400 ambient_not_available and nothing is charged; with it, the session answers only turns that name the device', async () => {
    const plain = await account();
    const before = await balance(plain.api);
    const refused = await plain.api.post('/live/session', { ambient: true, deviceName: 'Robo' });
    expect(refused.status).to.equal(400);
    expect(refused.body.error.code).to.equal('ambient_not_available');
    expect(await balance(plain.api)).to.equal(before);

    const featured = await account({ features: { proactiveAudio: true } });
    const ok = await featured.api.post('/live/session', { ambient: true, deviceName: 'Robo' });
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.ambient).to.equal(true);
    const c = connect(ok.body.realtimeUrl, ok.body.token);
    await c.next('session.started');
    c.send({ type: 'input_text', text: 'make a flowchart of the hiring process' });
    const ignored = await c.next('turn.ignored');
    expect(ignored.reason).to.equal('not_addressed');
    c.send({ type: 'input_text', text: 'Robo, make a flowchart of the hiring process' });
    const result = await c.next('tool.result');
    expect(result.artifact.type).to.equal('flowchart');
  });

  it('when the voice is unknown, then 400 naming voice and nothing is charged', async () => {
    const { api } = await account();
    const before = await balance(api);
    const r = await api.post('/live/session', { voice: 'klingon-deep' });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(/^voice: unknown voice "klingon-deep"/);
    expect(await balance(api)).to.equal(before);
    const long = await api.post('/live/session', { deviceName: 'x'.repeat(65) });
    expect(long.status).to.equal(400);
    expect(long.body.error.message).to.match(/deviceName/);
  });

  it('when a text turn asks for a flowchart, then the client gets assistant text, a tool.result whose flowchart exists over HTTP, 24 kHz PCM of the reply, and a resumption handle', async () => {
    const { api } = await account();
    const s = (await api.post('/live/session', {})).body;
    const c = connect(s.realtimeUrl, s.token);
    const started = await c.next('session.started');
    expect(started).to.include({ sessionId: s.sessionId, persona: 'robot' });
    expect(started.capabilities).to.deep.equal({ audioIn: false, textIn: true, audioOut: true });
    expect(started.resumptionHandle).to.match(/^lh1\./);
    expect((await session(s.sessionId)).status).to.equal('connected');

    const before = await balance(api);
    c.send({ type: 'input_text', text: 'make a flowchart of onboarding' });
    const result = await c.next('tool.result');
    expect(result.name).to.equal('create_flowchart');
    expect(result.artifact).to.include({ type: 'flowchart', title: 'Onboarding' });
    const project = await api.get(`/projects/${result.artifact.projectId}`);
    expect(project.status).to.equal(200);
    expect(project.body.name).to.equal('Onboarding');
    const final = await c.next('assistant.text', (e) => typeof e.text === 'string');
    expect(final.text).to.match(/flowchart "Onboarding"/);
    const deltas = c.events
      .filter((e) => e.type === 'assistant.text' && typeof e.delta === 'string')
      .map((e) => e.delta)
      .join('');
    expect(deltas).to.equal(final.text);
    const resumption = await c.next('resumption');
    expect(resumption.handle).to.match(/^lh1\./);
    // The reply spoken: whole s16le samples, about as long as espeak-ng takes for ~10 words (1 to 10 s at 48,000 bytes a second).
    expect(c.audioBytes()).to.equal(resumption.audioBytes);
    expect(c.audioBytes() % 2).to.equal(0);
    expect(c.audioBytes() / 48_000).to.be.within(1, 10);
    // The server tool went through the /live/action code: live_action charged once (1 credit).
    expect(await balance(api)).to.equal(before - 1);
    const doc = await session(s.sessionId);
    expect(doc.history.map((h: any) => h.role)).to.deep.equal(['user', 'assistant']);
  });

  it('when an ai-only key runs a session, then the assistant is not offered the project, account or memory tools, asking for projects lists none, and a key that lost read on connect is treated alike', async () => {
    const { api, accountId } = await account();
    expect(
      (
        await api.post('/flowcharts', {
          name: 'Hidden roadmap',
          nodes: [
            { id: 'a', label: 'A' },
            { id: 'b', label: 'B' },
          ],
          edges: [{ from: 'a', to: 'b' }],
        })
      ).status,
    ).to.equal(201);
    const { key } = await stack.rt.accounts.forAccount(accountId).createKey({ name: 'ai only', scopes: ['ai'] });
    const s = (await client(stack.baseUrl, key).post('/live/session', {})).body;
    expect(s.tools).to.not.include.members(['list_projects']);
    const c = connect(s.realtimeUrl, s.token);
    const started = await c.next('session.started');
    for (const t of ['list_projects', 'get_account', 'add_flowchart_steps', 'remember', 'recall', 'forget'])
      expect(started.tools).to.not.include(t);
    expect(started.tools).to.include('create_flowchart');
    c.send({ type: 'input_text', text: 'list my projects' });
    const final = await c.next('assistant.text', (e) => typeof e.text === 'string');
    expect(final.text).to.not.include('Hidden roadmap');
    expect(c.events.filter((e) => e.type === 'tool.result')).to.have.length(0);

    // Opened with every scope, then the key keeps only ai: the connect offers only what ai allows.
    const full = await stack.rt.accounts
      .forAccount(accountId)
      .createKey({ name: 'narrowed', scopes: ['ai', 'read', 'write'] });
    const s2 = (await client(stack.baseUrl, full.key).post('/live/session', {})).body;
    expect(s2.tools).to.include('list_projects');
    await stack.db.apiKeys.updateOne({ _id: full.doc._id }, { $set: { scopes: ['ai'] } });
    const c2 = connect(s2.realtimeUrl, s2.token);
    const started2 = await c2.next('session.started');
    expect(started2.tools).to.not.include('list_projects');
    c2.send({ type: 'input_text', text: 'list my projects' });
    const final2 = await c2.next('assistant.text', (e) => typeof e.text === 'string');
    expect(final2.text).to.not.include('Hidden roadmap');
  });

  it('when the assistant calls a client tool, then the client gets tool.call, its tool_result feeds the reply, and a late or unknown callId is refused', async () => {
    const { api } = await account();
    const s = (await api.post('/live/session', { clientTools: ['get_device_status'] })).body;
    const c = connect(s.realtimeUrl, s.token);
    await c.next('session.started');
    c.send({ type: 'input_text', text: 'what is your battery status?' });
    const call = await c.next('tool.call');
    expect(call).to.include({ name: 'get_device_status' });
    expect(call.callId).to.be.a('string');
    c.send({ type: 'tool_result', callId: call.callId, output: { battery: 81, charging: false } });
    const final = await c.next('assistant.text', (e) => typeof e.text === 'string');
    expect(final.text).to.contain('"battery":81');
    await c.next('resumption');
    expect(c.events.filter((e) => e.type === 'tool.result')).to.have.length(0); // client tools are not echoed as server results
    c.send({ type: 'tool_result', callId: call.callId, output: 'late' });
    expect((await c.next('error')).code).to.equal('unknown_call');

    // Without clientTools the assistant is not offered the tool: no tool.call.
    const s2 = (await api.post('/live/session', {})).body;
    const c2 = connect(s2.realtimeUrl, s2.token);
    await c2.next('session.started');
    c2.send({ type: 'input_text', text: 'what is your battery status?' });
    await c2.next('resumption');
    expect(c2.events.filter((e) => e.type === 'tool.call')).to.have.length(0);
  });

  it('when the connection drops, then the newest handle opens a free token for the same session, which continues the conversation; older handles are refused', async () => {
    const { api } = await account();
    const s = (await api.post('/live/session', {})).body;
    const c = connect(s.realtimeUrl, s.token);
    await c.next('session.started');
    c.send({ type: 'input_text', text: 'remember that my favourite colour is teal' });
    const { handle } = await c.next('resumption');
    c.ws.terminate();
    await c.closed;
    for (let i = 0; i < 50 && (await session(s.sessionId)).status !== 'dropped'; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect((await session(s.sessionId)).status).to.equal('dropped');

    const before = await balance(api);
    const r = await api.post('/live/session', { resumptionHandle: handle });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ sessionId: s.sessionId, resumed: true, charged: 0 });
    expect(await balance(api)).to.equal(before);

    const c2 = connect(r.body.realtimeUrl, r.body.token);
    const started = await c2.next('session.started');
    expect(started.historyTurns).to.equal(1);
    c2.send({ type: 'input_text', text: 'what do you remember about colour?' });
    const final = await c2.next('assistant.text', (e) => typeof e.text === 'string');
    expect(final.text).to.contain('favourite colour is teal');
    await c2.next('resumption');
    const doc = await session(s.sessionId);
    expect(doc.history).to.have.length(4);
    expect(doc.connections).to.equal(2);

    // The handle used above was superseded by the ones sent since.
    const old = await api.post('/live/session', { resumptionHandle: handle });
    expect(old.status).to.equal(400);
    expect(old.body.error.code).to.equal('resumption_handle_expired');
    // The token used above connects once only.
    const again = connect(r.body.realtimeUrl, r.body.token);
    expect(await again.closed).to.deep.equal({ code: 4403, reason: 'token already used or superseded' });
  });

  it("when a resumption handle is forged or another account's, then 400 invalid_resumption_handle or 404, never a free session", async () => {
    const a = await account();
    const b = await account();
    const s = (await a.api.post('/live/session', {})).body;
    const c = connect(s.realtimeUrl, s.token);
    const { resumptionHandle } = await c.next('session.started');

    const before = await balance(b.api);
    const other = await b.api.post('/live/session', { resumptionHandle });
    expect(other.status).to.equal(404);
    expect(other.body.error.code).to.equal('not_found');
    const [head, body, sig] = resumptionHandle.split('.');
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
    const forgedBody = Buffer.from(JSON.stringify({ ...claims, acc: b.accountId })).toString('base64url');
    for (const h of [
      `${head}.${forgedBody}.${sig}`,
      `${head}.${body}.${sig.slice(0, -2)}AA`,
      'lh1.e30.AAAA',
      s.token,
    ]) {
      const r = await b.api.post('/live/session', { resumptionHandle: h });
      expect(r.status, h).to.equal(400);
      expect(r.body.error.code).to.equal('invalid_resumption_handle');
    }
    expect(await balance(b.api)).to.equal(before);
    const expired = signLiveToken(stack.config.ASSET_SIGNING_SECRET, 'lh', { ...claims, exp: Date.now() - 1000 });
    const r = await a.api.post('/live/session', { resumptionHandle: expired });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('resumption_handle_expired');
  });

  it('when the token is expired, tampered with, missing, or reused after the session ended, then the connection is closed with 4401 or 4403 and a reason', async () => {
    const { api, accountId } = await account();
    const s = (await api.post('/live/session', {})).body;
    const [head, body, sig] = s.token.split('.');
    const tampered = connect(s.realtimeUrl, `${head}.${body}.${sig.slice(0, -3)}abc`);
    expect(await tampered.closed).to.deep.equal({ code: 4401, reason: 'token invalid' });
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
    expect(claims.acc).to.equal(accountId);
    const expired = connect(
      s.realtimeUrl,
      signLiveToken(stack.config.ASSET_SIGNING_SECRET, 'lt', { ...claims, exp: Date.now() - 1 }),
    );
    expect(await expired.closed).to.deep.equal({ code: 4401, reason: 'token expired' });
    const silent = connect(s.realtimeUrl);
    silent.send({ type: 'input_text', text: 'hello' });
    expect((await silent.closed).code).to.equal(4401);

    // The token sent as the first event instead of in the URL works too.
    const c = connect(s.realtimeUrl);
    c.send({ type: 'auth', token: s.token });
    await c.next('session.started');
    const { resumptionHandle } = c.events[0]!;
    c.send({ type: 'end' });
    expect(await c.closed).to.deep.equal({ code: 1000, reason: 'session ended' });
    expect((await session(s.sessionId)).status).to.equal('ended');
    const reused = connect(s.realtimeUrl, s.token);
    expect(await reused.closed).to.deep.equal({ code: 4403, reason: 'session ended' });
    const resumed = await api.post('/live/session', { resumptionHandle });
    expect(resumed.status).to.equal(400);
    expect(resumed.body.error.code).to.equal('session_ended');
  });

  it('when audio frames arrive without a transcription engine, then an error event says text turns only and no transcript is made up', async () => {
    const { api } = await account();
    const s = (await api.post('/live/session', {})).body;
    const c = connect(s.realtimeUrl, s.token);
    await c.next('session.started');
    c.ws.send(Buffer.concat([tone(600), tone(800, 0)]));
    const err = await c.next('error');
    expect(err.code).to.equal('audio_not_supported');
    expect(err.message).to.match(/text turns only/);
    c.send({ type: 'input_text', text: 'make a flowchart of the release' });
    await c.next('resumption');
    expect(c.events.filter((e) => e.type === 'transcript')).to.have.length(0);
  });

  describe('POST /live/action', () => {
    it("runs each category's tool, answers the line and artifacts, and charges live_action only on success", async () => {
      const { api } = await account();
      const run = async (action: string, params: Record<string, unknown>) => {
        const before = await balance(api);
        const r = await api.post('/live/action', { action, params });
        expect(r.status, `${action}: ${r.text}`).to.equal(200);
        return { ...r.body, spent: before - (await balance(api)) };
      };
      const flow = await run('create_flowchart', { title: 'Deploy', steps: ['Build', 'Test', 'Ship'] });
      expect(flow).to.include({ action: 'create_flowchart', ok: true, charged: 1, spent: 1 });
      expect(flow.line).to.equal('Done: I made the flowchart "Deploy"; it is in your projects.');
      expect((await api.get(`/projects/${flow.artifacts[0].projectId}`)).status).to.equal(200);
      const notes = await run('create_notes', { title: 'Standup', markdown: '# Standup\n- ship it' });
      expect(notes.artifacts[0].type).to.equal('notes');
      expect(notes.charged).to.equal(1);
      const board = await run('create_whiteboard', { title: 'Ideas', notes: ['one', 'two'] });
      expect(board.artifacts[0].type).to.equal('whiteboard');
      const image = await run('generate_image', { prompt: 'a lighthouse at dusk' });
      expect(image.artifacts[0].type).to.equal('image');
      expect(image).to.include({ ok: true, charged: 3, spent: 3 }); // live_action 1 + image 2
      const deck = await run('create_presentation', {
        title: 'Roadmap',
        brief: 'Our plan for next year in three parts.',
      });
      expect(deck.artifacts[0].type).to.equal('presentation');
      expect(deck.charged).to.equal(16); // live_action 1 + deck 15
      const projects = await run('list_projects', {});
      expect(projects.artifacts[0].data.total).to.be.at.least(4);
      expect(projects.line).to.match(/^You have \d+ projects/);
      const acct = await run('get_account', {});
      expect(acct.artifacts[0].data.plan).to.equal('pro');
      expect(acct.line).to.match(/pro plan with [\d.]+ credits/);

      // Search has no provider here: an honest failure, not charged.
      const search = await run('search_web', { query: 'weather in Lisbon' });
      expect(search).to.include({ ok: false, charged: 0, spent: 0 });
      expect(search.artifacts[0].type).to.equal('error');
      expect(search.line).to.match(/^Sorry, I could not do that: web search is not configured/);
    });

    it('keeps memories per account that later sessions recall, and forgets them', async () => {
      const a = await account();
      const b = await account();
      const saved = await a.api.post('/live/action', {
        action: 'remember',
        params: { text: 'the wifi password is on the fridge' },
      });
      expect(saved.status, saved.text).to.equal(200);
      expect(saved.body.line).to.equal('I will remember that the wifi password is on the fridge.');
      const memoryId = saved.body.artifacts[0].data.memoryId;

      // A new session (another token, another connection) recalls it.
      const s = (await a.api.post('/live/session', {})).body;
      const c = connect(s.realtimeUrl, s.token);
      await c.next('session.started');
      c.send({ type: 'input_text', text: 'what do you remember about the wifi?' });
      expect((await c.next('assistant.text', (e) => typeof e.text === 'string')).text).to.equal(
        'I remember: the wifi password is on the fridge.',
      );

      const other = await b.api.post('/live/action', { action: 'recall', params: {} });
      expect(other.body.line).to.equal('I have nothing remembered yet.');
      const notTheirs = await b.api.post('/live/action', { action: 'forget', params: { memoryId } });
      expect(notTheirs.body).to.include({ ok: false, charged: 0 });
      const forgot = await a.api.post('/live/action', { action: 'forget', params: { memoryId } });
      expect(forgot.body).to.include({ ok: true, charged: 1 });
      const after = await a.api.post('/live/action', { action: 'recall', params: { query: 'wifi' } });
      expect(after.body.line).to.equal('I have nothing remembered about wifi.');
    });

    it('refuses an unknown action or params that do not fit it with 400 naming the field, and a short balance with 402, charging nothing', async () => {
      const { api } = await account();
      const before = await balance(api);
      const unknown = await api.post('/live/action', { action: 'launch_rocket', params: {} });
      expect(unknown.status).to.equal(400);
      expect(unknown.body.error.message).to.match(/^action: must be one of search_web/);
      const bad = await api.post('/live/action', {
        action: 'create_flowchart',
        params: { title: 'X', steps: ['only one'] },
      });
      expect(bad.status).to.equal(400);
      expect(bad.body.error.message).to.match(/params\.steps/);
      expect(await balance(api)).to.equal(before);
      const poor = await account({ credits: 0 });
      const r = await poor.api.post('/live/action', { action: 'get_account', params: {} });
      expect(r.status).to.equal(402);
      expect(r.body.error.code).to.equal('insufficient_credits');
      const s = await poor.api.post('/live/session', {});
      expect(s.status).to.equal(402);
    });
  });
});
