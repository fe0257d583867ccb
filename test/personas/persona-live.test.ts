import { expect } from 'chai';
import { fakeOpenAi } from '../chat/fake-openai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, type LiveClient } from '../live/helpers';

const INSTRUCTIONS = 'You are Ada, a patient maths tutor. Never give the answer before the method.';
const PERSONA = {
  name: 'Ada',
  instructions: INSTRUCTIONS,
  greeting: 'Hi, I am Ada. What shall we work on?',
  faceId: 'aurora',
  voice: 'en-gb-female',
  tools: ['create_notes'],
};

/**
 * A persona conversation speaks as its persona: the version's instructions are the
 * chat engine's system message, its greeting is the first assistant turn (text and PCM), only its
 * tools are offered or run, web deployments connect only from their allowed origins, and tool calls
 * are listed as events. The chat engine is a local fake OpenAI-compatible provider, so the test
 * sees exactly what the engine was sent.
 */
describe('personas: a conversation speaks as its persona', function () {
  this.timeout(60_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeOpenAi>>;
  let api: Client;
  let accountId: string;
  const clients: LiveClient[] = [];
  before(async () => {
    provider = await fakeOpenAi();
    stack = await startStack({
      scheduler: false,
      env: {
        WORKER_POOLS: 'speech',
        CHAT_ENGINE: 'openai',
        CHAT_MODEL: 'fake-chat-1',
        OPENAI_BASE_URL: provider.url,
        OPENAI_API_KEY: 'sk-test',
        CHAT_TIMEOUT_MS: '5000',
        LIVE_HEARTBEAT_MS: '200',
      },
    });
    const a = await stack.createAccount({ credits: 1000 });
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => {
    await stack?.stop();
    await provider?.close();
  });

  const connect = (url: string, token: string, origin?: string) => {
    const c = liveConnect(url, { token, origin });
    clients.push(c);
    return c;
  };
  const conversation = async (deployment: Record<string, unknown>) => {
    const p = await api.post('/personas', PERSONA);
    expect(p.status, p.text).to.equal(201);
    expect((await api.post(`/personas/${p.body.id}/publish`)).status).to.equal(200);
    const d = await api.post(`/personas/${p.body.id}/deployments`, deployment);
    expect(d.status, d.text).to.equal(201);
    const conv = await api.post(`/personas/${p.body.id}/conversations`, { deploymentId: d.body.id });
    expect(conv.status, conv.text).to.equal(201);
    return { personaId: p.body.id as string, conv: conv.body };
  };
  const liveActions = async () =>
    (await stack.db.ledger.find({ accountId, operation: 'live_action' }).toArray()).reduce(
      (n, e: any) => n + (e.kind === 'refund' ? -e.millicredits : e.millicredits) / 1000,
      0,
    );

  it("when a persona conversation connects, then the greeting comes first (text and PCM), the instructions are the system message, only the persona's tools are offered, a tool outside its list is not run, and tool calls are listed as events", async () => {
    const { personaId, conv } = await conversation({ channel: 'voice' });
    provider.script((_body, n) => {
      if (n === 0)
        return {
          toolCalls: [
            { name: 'create_flowchart', args: { title: 'Hiring', steps: ['Apply', 'Interview'] } },
            { name: 'create_notes', args: { title: 'Fractions', markdown: '# Fractions\n\nMethod first.' } },
          ],
        };
      return { text: 'I wrote your notes on fractions.' };
    });
    const chargedBefore = await liveActions();
    const c = connect(conv.connect.realtimeUrl, conv.connect.token);
    // Sent at once: the turn still waits behind the greeting.
    c.send({ type: 'input_text', text: 'Write notes on fractions and draw a hiring flowchart.' });
    const started = await c.next('session.started');
    expect(started.persona).to.equal(`persona:${personaId}@1`);
    expect(started.tools, "the live actions the persona's tools map to").to.deep.equal(['create_notes']);
    const greeting = await c.next('resumption');
    expect(c.events.filter((e) => e.type !== 'session.started')[0]).to.deep.equal({
      type: 'assistant.text',
      text: PERSONA.greeting,
      greeting: true,
    });
    expect(greeting.audioBytes, 'the greeting is spoken').to.be.above(10_000);
    expect(c.audioBytes()).to.equal(greeting.audioBytes);

    await c.next('resumption');
    const sent = JSON.parse(provider.requests.find((r) => r.url.endsWith('/chat/completions'))!.body);
    expect(sent.messages[0].role).to.equal('system');
    expect(sent.messages[0].content).to.include(INSTRUCTIONS);
    expect(sent.messages[1], 'the engine sees the greeting as the first assistant turn').to.deep.include({
      role: 'assistant',
      content: PERSONA.greeting,
    });
    expect(
      sent.tools.map((t: any) => t.function.name),
      'memory and the other live actions are not offered',
    ).to.deep.equal(['create_notes']);
    const results = c.events.filter((e) => e.type === 'tool.result');
    expect(results.map((e) => [e.name, e.artifact.type])).to.deep.equal([
      ['create_flowchart', 'error'],
      ['create_notes', 'notes'],
    ]);
    expect(await stack.db.db.collection('projects').countDocuments({ accountId, kind: 'flowchart' })).to.equal(0);
    expect(await liveActions(), 'only the tool that ran is charged').to.equal(chargedBefore + 1);

    const events = await api.get(`/personas/${personaId}/conversations/${conv.id}/events`);
    expect(events.status, events.text).to.equal(200);
    expect(events.body.data.map((e: any) => e.type)).to.deep.equal([
      'started',
      'assistant_turn',
      'user_turn',
      'tool_call',
      'tool_call',
      'assistant_turn',
    ]);
    const calls = events.body.data.filter((e: any) => e.type === 'tool_call');
    expect(calls.map((e: any) => [e.text, e.data.name, e.data.ok, e.data.artifactType])).to.deep.equal([
      ['create_flowchart', 'create_flowchart', false, 'error'],
      ['create_notes', 'create_notes', true, 'notes'],
    ]);
    expect(calls[1].data.title).to.equal('Fractions');
    expect(calls[1].data.callId).to.be.a('string');
  });

  it('when a persona conversation is ended over HTTP, or its persona deleted, then its open connection closes with 1000 "session ended" and takes no more turns', async () => {
    const { personaId, conv } = await conversation({ channel: 'voice' });
    const c = connect(conv.connect.realtimeUrl, conv.connect.token);
    await c.next('session.started');
    await c.next('resumption'); // the greeting
    expect((await api.post(`/personas/${personaId}/conversations/${conv.id}/end`)).status).to.equal(200);
    expect(await c.closed).to.deep.equal({ code: 1000, reason: 'session ended' });

    const other = await conversation({ channel: 'voice' });
    const c2 = connect(other.conv.connect.realtimeUrl, other.conv.connect.token);
    await c2.next('session.started');
    await c2.next('resumption');
    expect((await api.delete(`/personas/${other.personaId}`)).status).to.be.oneOf([200, 204]);
    expect(await c2.closed).to.deep.equal({ code: 1000, reason: 'session ended' });
  });

  it('when a persona conversation is resumed on a new connection, then the greeting is not spoken again', async () => {
    const { conv } = await conversation({ channel: 'api' });
    provider.script(() => ({ text: 'Sure.' }));
    const first = connect(conv.connect.realtimeUrl, conv.connect.token);
    await first.next('session.started');
    expect((await first.next('assistant.text')).greeting).to.equal(true);
    const { handle } = await first.next('resumption');
    first.close();
    await first.closed;
    const again = await api.post('/live/session', { resumptionHandle: handle });
    expect(again.status, again.text).to.equal(200);
    expect(again.body).to.include({ resumed: true, charged: 0, sessionId: conv.connect.sessionId });
    expect(again.body.persona).to.match(/^persona:per_\w+@1$/);
    expect(again.body.tools).to.deep.equal(['create_notes']);
    const second = connect(again.body.realtimeUrl, again.body.token);
    expect((await second.next('session.started')).historyTurns).to.equal(0);
    second.send({ type: 'input_text', text: 'hello' });
    await second.next('resumption');
    expect(second.events.filter((e) => e.type === 'assistant.text' && e.greeting)).to.have.length(0);
  });

  it("when a web deployment's token connects, then a page of another origin, or no Origin, is refused with 4403 without using the token up, and an allowed origin connects", async () => {
    const { conv } = await conversation({ channel: 'web', allowedOrigins: ['https://shop.example.com'] });
    const bad = connect(conv.connect.realtimeUrl, conv.connect.token, 'https://evil.example.com');
    expect(await bad.closed).to.deep.equal({ code: 4403, reason: 'origin not allowed for this deployment' });
    const none = connect(conv.connect.realtimeUrl, conv.connect.token);
    const refused = await none.closed;
    expect(refused.code).to.equal(4403);
    expect(refused.reason).to.match(/Origin header missing/);
    const good = connect(conv.connect.realtimeUrl, conv.connect.token, 'https://Shop.example.com');
    expect((await good.next('session.started')).sessionId).to.equal(conv.connect.sessionId);

    // A voice deployment has no origin list: any client connects.
    const voice = await conversation({ channel: 'voice' });
    const anywhere = connect(voice.conv.connect.realtimeUrl, voice.conv.connect.token, 'https://elsewhere.example.org');
    await anywhere.next('session.started');
  });
});
