import { expect } from 'chai';
import OpenAI from 'openai';
import { createAgentsRepository } from '../../platform/agents/agents.repository';
import { DEV_AGENTS } from '../../platform/agents/seed';
import { createChatEngine } from '../../platform/assistant/engines/index';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { agentWorker } from '../../workers/agents/agent.worker';
import { ConsumerPool } from '../../workers/pool/consumer';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { scriptedOr, waitForRun } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

/**
 * POST /chat/completions (SPEC 2.18) driven by the official `openai` npm client: baseURL is the
 * API base, apiKey the svc_ key. The agent pool runs in this process with the local engine.
 */
describe('agents: POST /chat/completions with the openai client', function () {
  this.timeout(60_000);
  let stack: Stack;
  let pool: ConsumerPool<unknown> | undefined;
  let openai: OpenAI;
  let api: Client;
  let key: string;
  let research: string;
  let outreach: string;
  let tight: string;

  before(async () => {
    stack = await startStack({
      scheduler: false,
      env: { WORKER_POOLS: 'research', AGENT_RUN_WAIT_MS: '1500', CHAT_KEEPALIVE_MS: '50', RATE_LIMIT_MAX: '100000' },
    });
    const a = await stack.createAccount({ credits: 1000 });
    key = a.key;
    api = client(stack.baseUrl, key);
    // maxRetries 0: a retried 5xx would hide what the service answered.
    openai = new OpenAI({ baseURL: stack.baseUrl, apiKey: key, maxRetries: 0 });
    const repo = createAgentsRepository(stack.rt.store);
    const [r, o] = DEV_AGENTS.map(({ id: _id, ...def }) => def);
    research = (await repo.forAccount(a.accountId).upsert(r!))._id;
    outreach = (await repo.forAccount(a.accountId).upsert(o!))._id;
    tight = (
      await repo.forAccount(a.accountId).upsert({
        name: 'tight',
        instructions: 'research',
        tools: ['start_research'],
        creditBudget: 5,
      })
    )._id;
  });
  after(async () => {
    await pool?.close();
    await stack?.stop();
  });

  it('when no agent worker takes the run within AGENT_RUN_WAIT_MS, then 504 timeout (x-should-retry: false) names the run, and the run completes once a worker is there', async () => {
    const r = await api.post('/chat/completions', {
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'write notes about patience' }],
    });
    expect(r.status, r.text).to.equal(504);
    expect(r.body.error.code).to.equal('timeout');
    expect(r.headers.get('x-should-retry')).to.equal('false');
    const runId = /\b(run_[a-z0-9]+)\b/.exec(r.body.error.message)![1]!;
    pool = new ConsumerPool(stack.rt, agentWorker(stack.rt, { engine: scriptedOr(createChatEngine(stack.config)) }), {
      concurrency: 4,
      shutdownGraceMs: 2000,
    }) as ConsumerPool<unknown>;
    await pool.start();
    expect((await waitForRun(api, research, runId, ['completed'])).status).to.equal('completed');
  });

  it('when a plain completion is asked, then the answer is a chat.completion with the reply, usage and the opencharts extension, and the thread is metadata.thread_id', async () => {
    const res = await openai.chat.completions.create({
      model: `agent:${research}`,
      messages: [
        { role: 'system', content: 'ignored: the agent has its own instructions' },
        { role: 'user', content: 'an earlier message that is not sent' },
        { role: 'assistant', content: 'an earlier answer' },
        { role: 'user', content: [{ type: 'text', text: 'write notes about the launch checklist' }] },
      ],
      metadata: { thread_id: 'ops.thread-7' },
    });
    const ext = (res as unknown as { opencharts: any }).opencharts;
    expect(res.object).to.equal('chat.completion');
    expect(res.id).to.equal(`chatcmpl-${ext.runId}`);
    expect(res.model).to.equal(`agent:${research}`);
    expect(res.created).to.be.a('number');
    expect(res.choices).to.have.length(1);
    expect(res.choices[0]!).to.deep.include({ index: 0, finish_reason: 'stop' });
    expect(res.choices[0]!.message.role).to.equal('assistant');
    expect(res.choices[0]!.message.content).to.be.a('string').and.not.empty;
    expect(res.usage).to.deep.equal({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
    expect(ext).to.include({
      agentId: research,
      threadId: 'ops.thread-7',
      status: 'completed',
      pendingApproval: null,
      resultUrl: `/api/v1/agents/${research}/runs/${ext.runId}/result`,
    });
    expect(ext.artifacts).to.have.length(1);
    expect(ext.artifacts[0]).to.include({ kind: 'project' });
    const run = await stack.db.db.collection<any>(COLLECTIONS.agentRuns).findOne({ _id: ext.runId });
    expect(run).to.include({
      trigger: 'completions',
      instruction: 'write notes about the launch checklist',
      threadId: 'ops.thread-7',
    });
  });

  it('when `user` is given without metadata.thread_id, then it is the thread (hashed when it is not a valid thread id)', async () => {
    const plain = await openai.chat.completions.create({
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'list my projects' }],
      user: 'customer-42',
    });
    expect((plain as any).opencharts.threadId).to.equal('customer-42');
    const email = await openai.chat.completions.create({
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'list my projects' }],
      user: 'ann@example.com',
    });
    expect((email as any).opencharts.threadId).to.match(/^user_[a-f0-9]{32}$/);
  });

  it('when stream is true, then keepalive comments come while the agent works, then one chat.completion.chunk with the whole reply, then exactly data: [DONE]', async () => {
    const stream = await openai.chat.completions.create({
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'write notes about streaming' }],
      stream: true,
    });
    const chunks: any[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks).to.have.length(1);
    expect(chunks[0].object).to.equal('chat.completion.chunk');
    expect(chunks[0].choices[0].delta.content).to.be.a('string').and.not.empty;
    expect(chunks[0].choices[0].finish_reason).to.equal('stop');
    expect(chunks[0].opencharts).to.include({ status: 'completed', agentId: research });

    const raw = await fetch(`${stack.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: `agent:${research}`,
        messages: [{ role: 'user', content: 'write notes about raw streams' }],
        stream: true,
      }),
    });
    expect(raw.status).to.equal(200);
    expect(raw.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(raw.headers.get('cache-control')).to.equal('no-cache');
    const text = await raw.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events[0]).to.equal(': keepalive');
    expect(events[events.length - 1]).to.equal('data: [DONE]');
    const data = events.filter((e) => e.startsWith('data: '));
    expect(data).to.have.length(2);
    expect(JSON.parse(data[0]!.slice(6)).object).to.equal('chat.completion.chunk');
    expect(events.slice(0, -2).every((e) => e === ': keepalive')).to.equal(true);
  });

  it('when the agent pauses for approval, then the completion says so with status paused and pendingApproval {actionSlug, approveUrl}, plain and streamed', async () => {
    const res = await openai.chat.completions.create({
      model: `agent:${outreach}`,
      messages: [{ role: 'user', content: 'email alice@example.com about the launch' }],
    });
    const ext = (res as any).opencharts;
    expect(ext.status).to.equal('paused');
    expect(ext.pendingApproval).to.deep.equal({
      actionSlug: 'send_email',
      approveUrl: `/api/v1/agents/${outreach}/runs/${ext.runId}/approve`,
    });
    expect(res.choices[0]!.message.content).to.include('send_email').and.include(ext.pendingApproval.approveUrl);
    const result = await api.get(`/agents/${outreach}/runs/${ext.runId}/result`);
    expect(result.body.status).to.equal('paused');

    const stream = await openai.chat.completions.create({
      model: `agent:${outreach}`,
      messages: [{ role: 'user', content: 'email bob@example.com about the launch' }],
      stream: true,
    });
    const chunks: any[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0].opencharts.status).to.equal('paused');
    expect(chunks[0].opencharts.pendingApproval.actionSlug).to.equal('send_email');
  });

  it('when the model lacks the agent: prefix, names no agent of the caller, or no user message is sent, then 400 / 404 and nothing is charged', async () => {
    const before = (await api.get('/account/credits')).body.balance;
    const bad = await openai.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(bad).to.be.instanceOf(OpenAI.APIError);
    expect((bad as InstanceType<typeof OpenAI.APIError>).status).to.equal(400);
    expect(JSON.stringify((bad as any).error)).to.include('model');
    const unknown = await openai.chat.completions
      .create({ model: 'agent:agt_nobody', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect((unknown as InstanceType<typeof OpenAI.APIError>).status).to.equal(404);
    expect((unknown as any).error.code).to.equal('not_found');
    const noUser = await api.post('/chat/completions', {
      model: `agent:${research}`,
      messages: [{ role: 'system', content: 'only a system message' }],
    });
    expect(noUser.status).to.equal(400);
    expect(noUser.body.error.message).to.match(/^messages/);
    const tooLong = await api.post('/chat/completions', {
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'x'.repeat(20_001) }],
    });
    expect(tooLong.status).to.equal(400);
    expect((await api.get('/account/credits')).body.balance).to.equal(before);
  });

  it('when the run fails, then 502 agent_run_failed (x-should-retry: false) with the reason, and the fee is refunded; streamed, an error chunk then [DONE]', async () => {
    const before = (await api.get('/account/credits')).body.balance;
    const r = await api.post('/chat/completions', {
      model: `agent:${tight}`,
      messages: [{ role: 'user', content: 'research the tides' }],
    });
    expect(r.status, r.text).to.equal(502);
    expect(r.body.error.code).to.equal('agent_run_failed');
    expect(r.body.error.message).to.include('credit budget of 5 credits reached');
    expect(r.headers.get('x-should-retry')).to.equal('false');
    const stream = await openai.chat.completions.create({
      model: `agent:${tight}`,
      messages: [{ role: 'user', content: 'research the moon' }],
      stream: true,
    });
    const err = await (async () => {
      try {
        for await (const _ of stream) void _;
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).to.be.instanceOf(OpenAI.APIError);
    expect(String((err as Error).message)).to.include('credit budget');
    expect((await api.get('/account/credits')).body.balance).to.equal(before);
  });
  it('when a completion is retried with the same Idempotency-Key, then the same run answers and the fee is charged once; the key with another message is 422', async () => {
    const before = (await api.get('/account/credits')).body.balance as number;
    const key = `cmp-${Date.now()}`;
    const body = {
      model: `agent:${research}`,
      messages: [{ role: 'user', content: 'write notes about idempotent completions' }],
    };
    const a = await api.post('/chat/completions', body, { 'Idempotency-Key': key });
    expect(a.status, a.text).to.equal(200);
    const b = await api.post('/chat/completions', { ...body, stream: true }, { 'Idempotency-Key': key });
    expect(b.status).to.equal(200);
    expect(b.text).to.include(a.body.id);
    expect(before - ((await api.get('/account/credits')).body.balance as number)).to.equal(
      fromUnits(stack.rt.credits.millicreditsFor('agent_run')),
    );
    const c = await api.post(
      '/chat/completions',
      { ...body, messages: [{ role: 'user', content: 'something else' }] },
      { 'Idempotency-Key': key },
    );
    expect(c.status).to.equal(422);
    expect(c.body.error.code).to.equal('idempotency_key_reused');
    const bad = await api.post('/chat/completions', body, { 'Idempotency-Key': 'has space' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.include('Idempotency-Key');
  });
});
