import { expect } from 'chai';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { fakeOpenAi } from '../chat/fake-openai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, type LiveClient } from '../live/helpers';

const PERSONA = {
  name: 'Ada',
  instructions: 'You are Ada, a patient maths tutor.',
  greeting: 'Hi, I am Ada.',
  faceId: 'aurora',
  voice: 'en-gb-female',
  tools: ['create_notes'],
};

/**
 * What a persona conversation costs and records: the live_session charge is
 * delivered by the conversation row (refunded when it is never written), a retried start under the
 * same Idempotency-Key is charged once, every turn becomes an event however long the session runs,
 * and creditsUsed counts what its tools kept too.
 */
describe('personas: conversation charges, idempotent starts and complete events', function () {
  this.timeout(90_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeOpenAi>>;
  let api: Client;
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
        LIVE_TURNS_PER_MINUTE: '6000',
      },
    });
    api = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
  });
  afterEach(() => {
    sinon.restore();
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => {
    await stack?.stop();
    await provider?.close();
  });

  const balance = async () => (await api.get('/account/credits')).body.balance as number;
  const deployment = async () => {
    const p = await api.post('/personas', PERSONA);
    expect((await api.post(`/personas/${p.body.id}/publish`)).status).to.equal(200);
    const d = await api.post(`/personas/${p.body.id}/deployments`, { channel: 'api' });
    return { personaId: p.body.id as string, deploymentId: d.body.id as string };
  };
  const connect = (conv: any) => {
    const c = liveConnect(conv.connect.realtimeUrl, { token: conv.connect.token });
    clients.push(c);
    return c;
  };

  it('when the conversation row cannot be written, then the start fails and the live_session charge is refunded', async () => {
    const { personaId, deploymentId } = await deployment();
    const before = await balance();
    const insertOne = Collection.prototype.insertOne;
    sinon.stub(Collection.prototype, 'insertOne').callsFake(function (this: Collection, ...args: any[]) {
      if (this.collectionName === 'persona_conversations') return Promise.reject(new Error('disk full'));
      return (insertOne as any).apply(this, args);
    });
    const r = await api.post(`/personas/${personaId}/conversations`, { deploymentId });
    expect(r.status).to.equal(500);
    sinon.restore();
    expect(await balance()).to.equal(before);
  });

  it('when a start is retried with the same Idempotency-Key, then it answers the same conversation and is charged once', async () => {
    const { personaId, deploymentId } = await deployment();
    const before = await balance();
    const headers = { 'idempotency-key': `start-${personaId}` };
    const a = await api.post(`/personas/${personaId}/conversations`, { deploymentId }, headers);
    const b = await api.post(`/personas/${personaId}/conversations`, { deploymentId }, headers);
    expect(a.status, a.text).to.equal(201);
    expect(b.status).to.equal(201);
    expect(b.body.id).to.equal(a.body.id);
    expect(await balance()).to.equal(before - a.body.creditsUsed);
  });

  it("when a conversation runs past the session's 40-entry history and a tool is charged, then every turn is an event and creditsUsed counts the tool", async () => {
    const { personaId, deploymentId } = await deployment();
    const before = await balance();
    const conv = (await api.post(`/personas/${personaId}/conversations`, { deploymentId })).body;
    provider.script((_body, n) =>
      n === 0
        ? { toolCalls: [{ name: 'create_notes', args: { title: 'Sums', markdown: '# Sums' } }] }
        : { text: `Answer ${n}.` },
    );
    const c = connect(conv);
    await c.next('session.started');
    await c.next('resumption'); // the greeting
    const turns = 22;
    for (let i = 0; i < turns; i++) {
      c.send({ type: 'input_text', text: `question ${i}` });
      await c.next('resumption');
    }
    const events = await api.get(`/personas/${personaId}/conversations/${conv.id}/events?limit=100`);
    const types = events.body.data.map((e: any) => e.type);
    expect(types.filter((t: string) => t === 'user_turn')).to.have.length(turns);
    expect(types.filter((t: string) => t === 'assistant_turn')).to.have.length(turns + 1);
    expect(events.body.data.find((e: any) => e.type === 'user_turn').text).to.equal('question 0');
    const end = await api.post(`/personas/${personaId}/conversations/${conv.id}/end`);
    expect(end.body.creditsUsed).to.be.above(conv.creditsUsed);
    expect(end.body.creditsUsed, 'creditsUsed is what the balance lost').to.equal(before - (await balance()));
  });
});
