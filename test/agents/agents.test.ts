import { expect } from 'chai';
import { createAgentsRepository } from '../../platform/agents/agents.repository';
import { DEV_AGENTS } from '../../platform/agents/seed';
import { createChatEngine } from '../../platform/assistant/engines/index';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { agentWorker } from '../../workers/agents/agent.worker';
import { ConsumerPool } from '../../workers/pool/consumer';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { createWebhook, startReceiver, type Receiver } from '../webhooks/helpers';
import { emailCall, script, scriptedOr, waitForRun } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

/**
 * Agents over HTTP against the real services (SPEC 2.18, 3.4, 4.9): the agent pool runs in this
 * process with the deployment's local engine (instructions starting with `script:` are scripted
 * exactly, see helpers.ts).
 */
describe('agents: runs, approvals, threads and usage over HTTP', function () {
  this.timeout(120_000);
  let stack: Stack;
  let pool: ConsumerPool<unknown>;
  let api: Client;
  let other: Client;
  let accountId: string;
  let research: string;
  let outreach: string;
  let otherAgent: string;
  let rcv: Receiver;

  const outbox = () => stack.db.db.collection<any>(COLLECTIONS.agentOutbox).find({ accountId }).toArray();
  const send = (agentId: string, message: string, threadId?: string) =>
    api.post(`/agents/${agentId}/messages`, { message, ...(threadId ? { threadId } : {}) });
  const accepted = async (agentId: string, message: string, threadId?: string) => {
    const r = await send(agentId, message, threadId);
    expect(r.status, r.text).to.equal(202);
    return r.body as { runId: string; threadId: string; agentId: string; status: string; resultUrl: string };
  };
  const approve = (agentId: string, runId: string, body: Record<string, unknown>) =>
    api.post(`/agents/${agentId}/runs/${runId}/approve`, body);

  before(async () => {
    stack = await startStack({
      scheduler: false,
      env: { WORKER_POOLS: 'research,webhook', ALLOW_LOOPBACK_URLS: 'true', RATE_LIMIT_MAX: '100000' },
    });
    pool = new ConsumerPool(stack.rt, agentWorker(stack.rt, { engine: scriptedOr(createChatEngine(stack.config)) }), {
      concurrency: 4,
      shutdownGraceMs: 2000,
    }) as ConsumerPool<unknown>;
    await pool.start();
    const a = await stack.createAccount({ credits: 1000 });
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
    const b = await stack.createAccount({ credits: 1000 });
    other = client(stack.baseUrl, b.key);
    const repo = createAgentsRepository(stack.rt.store);
    const [r, o] = DEV_AGENTS.map(({ id: _id, ...def }) => def);
    research = (await repo.forAccount(accountId).upsert(r!))._id;
    outreach = (await repo.forAccount(accountId).upsert(o!))._id;
    otherAgent = (await repo.forAccount(b.accountId).upsert(r!))._id;
    rcv = await startReceiver();
    await createWebhook(api, { url: rcv.url, events: ['evi.run_completed', 'evi.run_failed'] });
  });
  after(async () => {
    await pool?.close();
    await rcv?.close();
    await stack?.stop();
  });

  it('when the research assistant is asked for notes, then 202 queues a run that completes with the notes project, the fee charged once, and status, list and result agree', async () => {
    const before = (await api.get('/account/credits')).body;
    const acc = await accepted(research, 'write notes about our launch plan');
    expect(acc).to.include({ agentId: research, status: 'queued' });
    expect(acc.runId).to.match(/^run_/);
    expect(acc.threadId).to.match(/^thr_/);
    expect(acc.resultUrl).to.equal(`/api/v1/agents/${research}/runs/${acc.runId}/result`);

    const result = await waitForRun(api, research, acc.runId, ['completed', 'failed']);
    expect(result.status, JSON.stringify(result)).to.equal('completed');
    expect(result).to.include({
      runId: acc.runId,
      agentId: research,
      threadId: acc.threadId,
      error: null,
      pendingApproval: null,
      creditsUsed: 5,
      trigger: 'message',
      pollUrl: acc.resultUrl,
    });
    expect(result.reply).to.be.a('string').and.not.empty;
    expect(result.startedAt).to.be.a('string');
    expect(result.completedAt).to.be.a('string');
    expect(result.artifacts).to.have.length(1);
    const art = result.artifacts[0];
    expect(art.kind).to.equal('project');
    expect(art.url).to.equal(`${stack.config.PUBLIC_BASE_URL}/notes/${art.projectId}`);
    expect(result.steps.map((s: any) => [s.slug, s.status])).to.deep.equal([['create_notes', 'done']]);
    const project = await api.get(`/projects/${art.projectId}`);
    expect(project.status).to.equal(200);
    expect(project.body.kind).to.equal('notes');

    const status = await api.get(`/agents/${research}/runs/${acc.runId}`);
    expect(status.body).to.include({
      runId: acc.runId,
      status: 'completed',
      trigger: 'message',
      creditsUsed: 5,
      pendingApproval: null,
      resultUrl: acc.resultUrl,
    });
    const list = await api.get(`/agents/${research}/runs?limit=1`);
    expect(list.status).to.equal(200);
    expect(list.body.data[0].runId).to.equal(acc.runId);
    const after = (await api.get('/account/credits')).body;
    expect(before.balance - after.balance).to.equal(5);
  });

  it('when two messages go to one thread, then the second run sees the first exchange as history; another thread sees none; a /run instruction is not kept as a user message', async () => {
    const thread = 'memory.thread-1';
    const first = await accepted(research, 'hello there, remember the blue launch', thread);
    expect(first.threadId).to.equal(thread);
    expect((await waitForRun(api, research, first.runId)).status).to.equal('completed');
    const second = await accepted(research, 'script:recall', thread);
    expect((await waitForRun(api, research, second.runId)).reply).to.include('hello there, remember the blue launch');
    const elsewhere = await accepted(research, 'script:recall', 'memory.thread-2');
    expect((await waitForRun(api, research, elsewhere.runId)).reply).to.include('history: []');

    const task = await api.post(`/agents/${research}/run`, { instruction: 'script:recall', threadId: thread });
    expect(task.status, task.text).to.equal(202);
    const taskResult = await waitForRun(api, research, task.body.runId);
    expect(taskResult.trigger).to.equal('run');
    expect(taskResult.reply).to.include('hello there').and.include('script:recall');
    const thread1 = await stack.db.db
      .collection<any>(COLLECTIONS.agentThreads)
      .findOne({ _id: `${research}:${thread}` });
    // message, reply, message, reply, and the run's reply only.
    expect(thread1.messages.map((m: any) => m.role)).to.deep.equal([
      'user',
      'assistant',
      'user',
      'assistant',
      'assistant',
    ]);
  });

  it('when the outreach agent plans send_email, then the run pauses holding no worker; a wrong token is 400 and it stays paused; approve once completes it (stored, not sent); a repeat is already_recorded; the next run asks again', async () => {
    const acc = await accepted(outreach, 'email alice@example.com about the launch');
    const paused = await waitForRun(api, outreach, acc.runId);
    expect(paused.status).to.equal('paused');
    const pa = paused.pendingApproval;
    expect(pa).to.include({
      runId: acc.runId,
      actionSlug: 'send_email',
      decisionRecorded: false,
      approveUrl: `/api/v1/agents/${outreach}/runs/${acc.runId}/approve`,
    });
    expect(pa.reviewToken).to.match(/^[a-f0-9]{64}$/);
    expect(pa.availableScopes).to.deep.equal(['once', 'task', 'always']);
    expect(pa.actionArgs.to).to.equal('alice@example.com');
    expect(pa.plan[0]).to.deep.include({ slug: 'send_email' });
    const stored = await stack.db.db.collection<any>(COLLECTIONS.agentRuns).findOne({ _id: acc.runId });
    expect(stored.lease).to.equal(null);
    expect(await outbox()).to.deep.equal([]);
    const status = await api.get(`/agents/${outreach}/runs/${acc.runId}`);
    expect(status.body.pendingApproval).to.deep.equal({
      actionSlug: 'send_email',
      approveUrl: pa.approveUrl,
      decisionRecorded: false,
    });

    const wrong = await approve(outreach, acc.runId, { decision: 'approve', reviewToken: 'a'.repeat(64) });
    expect(wrong.status).to.equal(400);
    expect(wrong.body.error.code).to.equal('invalid_review_token');
    expect(wrong.text).to.not.include(pa.reviewToken);
    expect((await api.get(`/agents/${outreach}/runs/${acc.runId}`)).body.status).to.equal('paused');
    const badScope = await approve(outreach, acc.runId, {
      decision: 'approve',
      reviewToken: pa.reviewToken,
      scope: 'forever',
    });
    expect(badScope.status).to.equal(400);
    expect(badScope.body.error.message).to.include('scope');

    const ok = await approve(outreach, acc.runId, { decision: 'approve', reviewToken: pa.reviewToken });
    expect(ok.status, ok.text).to.equal(202);
    expect(ok.body).to.deep.equal({ runId: acc.runId, decision: 'approve', status: 'resuming' });
    const done = await waitForRun(api, outreach, acc.runId, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(done.reply).to.include('no mail transport');
    expect(done.steps.map((s: any) => [s.slug, s.status])).to.deep.equal([['send_email', 'done']]);
    const mails = await outbox();
    expect(mails).to.have.length(1);
    expect(mails[0]).to.include({
      to: 'alice@example.com',
      status: 'queued_no_transport',
      runId: acc.runId,
      agentId: outreach,
    });

    const again = await approve(outreach, acc.runId, { decision: 'approve', reviewToken: pa.reviewToken });
    expect(again.status).to.equal(202);
    expect(again.body).to.deep.equal({ runId: acc.runId, decision: 'approve', status: 'already_recorded' });
    const flip = await approve(outreach, acc.runId, { decision: 'reject', reviewToken: pa.reviewToken });
    expect(flip.status).to.equal(409);
    expect(flip.body.error.code).to.equal('run_not_paused');

    const next = await accepted(outreach, 'email bob@example.com about the launch');
    expect((await waitForRun(api, outreach, next.runId)).status).to.equal('paused');
  });

  it('when a run is approved with scope task, then a second send_email in the same run does not ask', async () => {
    const acc = await accepted(outreach, script([emailCall('carol@example.com'), emailCall('dave@example.com')]));
    const paused = await waitForRun(api, outreach, acc.runId);
    expect(paused.status).to.equal('paused');
    expect(paused.pendingApproval.plan.map((p: any) => p.args.to)).to.deep.equal([
      'carol@example.com',
      'dave@example.com',
    ]);
    const ok = await approve(outreach, acc.runId, {
      decision: 'approve',
      reviewToken: paused.pendingApproval.reviewToken,
      scope: 'task',
    });
    expect(ok.status, ok.text).to.equal(202);
    const done = await waitForRun(api, outreach, acc.runId, ['completed', 'failed']);
    expect(done.status, JSON.stringify(done)).to.equal('completed');
    expect(done.steps.map((s: any) => s.args.to)).to.deep.equal(['carol@example.com', 'dave@example.com']);
    const mine = (await outbox()).filter((m) => m.runId === acc.runId);
    expect(mine).to.have.length(2);

    // once: the same two calls ask twice.
    const once = await accepted(outreach, script([emailCall('erin@example.com'), emailCall('frank@example.com')]));
    const p1 = await waitForRun(api, outreach, once.runId);
    await approve(outreach, once.runId, {
      decision: 'approve',
      reviewToken: p1.pendingApproval.reviewToken,
      scope: 'once',
    });
    // The approve moved the run to queued before answering: the next pause is the second call's.
    const p2 = await waitForRun(api, outreach, once.runId);
    expect(p2.status).to.equal('paused');
    expect(p2.pendingApproval.actionArgs.to).to.equal('frank@example.com');
    expect(p2.pendingApproval.reviewToken).to.not.equal(p1.pendingApproval.reviewToken);
    // The first review's decision still answers already_recorded.
    const repeat = await approve(outreach, once.runId, {
      decision: 'approve',
      reviewToken: p1.pendingApproval.reviewToken,
    });
    expect(repeat.body.status).to.equal('already_recorded');
    await approve(outreach, once.runId, { decision: 'approve', reviewToken: p2.pendingApproval.reviewToken });
    expect((await waitForRun(api, outreach, once.runId, ['completed', 'failed'])).status).to.equal('completed');
  });

  it('when a run is rejected, then it completes without sending: the step is rejected, the outbox holds nothing of it, and the reply says the action was not taken; a reject with scope task is 400', async () => {
    const acc = await accepted(outreach, 'email grace@example.com about the launch');
    const paused = await waitForRun(api, outreach, acc.runId);
    const token = paused.pendingApproval.reviewToken;
    const badReject = await approve(outreach, acc.runId, { decision: 'reject', reviewToken: token, scope: 'task' });
    expect(badReject.status).to.equal(400);
    expect(badReject.body.error.message).to.include('scope');
    const r = await approve(outreach, acc.runId, { decision: 'reject', reviewToken: token });
    expect(r.status, r.text).to.equal(202);
    expect(r.body).to.deep.equal({ runId: acc.runId, decision: 'reject', status: 'resuming' });
    const done = await waitForRun(api, outreach, acc.runId, ['completed', 'failed']);
    expect(done.status).to.equal('completed');
    expect(done.steps.map((s: any) => [s.slug, s.status])).to.deep.equal([['send_email', 'rejected']]);
    expect(done.reply).to.match(/declined send_email to grace@example\.com, so that action was not taken/);
    expect((await outbox()).filter((m) => m.runId === acc.runId)).to.deep.equal([]);
    expect((await approve(outreach, acc.runId, { decision: 'reject', reviewToken: token })).body.status).to.equal(
      'already_recorded',
    );
  });

  it('when a run is approved with scope always, then later runs of the agent do not ask', async () => {
    const acc = await accepted(outreach, 'email heidi@example.com about the launch');
    const paused = await waitForRun(api, outreach, acc.runId);
    const r = await approve(outreach, acc.runId, {
      decision: 'approve',
      reviewToken: paused.pendingApproval.reviewToken,
      scope: 'always',
    });
    expect(r.status, r.text).to.equal(202);
    expect((await waitForRun(api, outreach, acc.runId, ['completed', 'failed'])).status).to.equal('completed');
    const later = await accepted(outreach, 'email ivan@example.com about the launch');
    const done = await waitForRun(api, outreach, later.runId);
    expect(done.status).to.equal('completed');
    expect((await outbox()).filter((m) => m.runId === later.runId)).to.have.length(1);
    const agent = await stack.db.db.collection<any>(COLLECTIONS.agents).findOne({ _id: outreach });
    expect(agent.alwaysAllowed).to.deep.equal(['send_email']);
  });

  it('when a run needs three approvals, each approved once, then it completes: pauses do not use up its claims', async () => {
    // An agent of its own: an earlier test allowed send_email `always` for the outreach agent.
    const { id: _id, ...def } = DEV_AGENTS[1]!;
    const mailer = (
      await createAgentsRepository(stack.rt.store)
        .forAccount(accountId)
        .upsert({ ...def, name: 'mailer' })
    )._id;
    const people = ['kim@example.com', 'lee@example.com', 'max@example.com'];
    const acc = await accepted(mailer, script(people.map((p) => emailCall(p))));
    for (const who of people) {
      const paused = await waitForRun(api, mailer, acc.runId);
      expect(paused.status, JSON.stringify(paused)).to.equal('paused');
      expect(paused.pendingApproval.actionArgs.to).to.equal(who);
      const ok = await approve(mailer, acc.runId, {
        decision: 'approve',
        reviewToken: paused.pendingApproval.reviewToken,
        scope: 'once',
      });
      expect(ok.status, ok.text).to.equal(202);
    }
    const done = await waitForRun(api, mailer, acc.runId, ['completed', 'failed']);
    expect(done.status, JSON.stringify(done)).to.equal('completed');
    expect(done.steps.map((s: any) => [s.args.to, s.status])).to.deep.equal(people.map((p) => [p, 'done']));
  });

  it('when a message or run POST is retried with the same Idempotency-Key, then the same run answers, it runs once and is billed once; another body with the key is 422', async () => {
    // An agent of its own, so the usage test's counts stay those of the research agent.
    const { id: _rid, ...rdef } = DEV_AGENTS[0]!;
    const research = (
      await createAgentsRepository(stack.rt.store)
        .forAccount(accountId)
        .upsert({ ...rdef, name: 'researcher two' })
    )._id;
    const before = (await api.get('/account/credits')).body.balance as number;
    const key = `msg-${Date.now()}`;
    const first = await api.post(
      `/agents/${research}/messages`,
      { message: 'write notes about retries' },
      { 'Idempotency-Key': key },
    );
    expect(first.status, first.text).to.equal(202);
    const again = await api.post(
      `/agents/${research}/messages`,
      { message: 'write notes about retries' },
      { 'Idempotency-Key': key },
    );
    expect(again.status, again.text).to.equal(202);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const other = await api.post(
      `/agents/${research}/messages`,
      { message: 'something else' },
      { 'Idempotency-Key': key },
    );
    expect(other.status).to.equal(422);
    const runKey = `run-${Date.now()}`;
    const r1 = await api.post(
      `/agents/${research}/run`,
      { instruction: 'write notes about the run route' },
      { 'Idempotency-Key': runKey },
    );
    const r2 = await api.post(
      `/agents/${research}/run`,
      { instruction: 'write notes about the run route' },
      { 'Idempotency-Key': runKey },
    );
    expect(r1.status, r1.text).to.equal(202);
    expect(r2.body.runId).to.equal(r1.body.runId);
    await waitForRun(api, research, first.body.runId, ['completed']);
    await waitForRun(api, research, r1.body.runId, ['completed']);
    const runs = stack.db.db.collection<any>(COLLECTIONS.agentRuns);
    expect(
      await runs.countDocuments({
        accountId,
        instruction: { $in: ['write notes about retries', 'write notes about the run route'] },
      }),
    ).to.equal(2);
    expect(before - ((await api.get('/account/credits')).body.balance as number)).to.equal(
      2 * fromUnits(stack.rt.credits.millicreditsFor('agent_run')),
    );
  });

  it('when a run fails after a tool delivered work, then its fee stands (not refunded)', async () => {
    const repo = createAgentsRepository(stack.rt.store);
    const mixed = await repo.forAccount(accountId).upsert({
      name: 'mixed',
      instructions: 'notes then research',
      tools: ['create_notes', 'start_research'],
      creditBudget: 10,
    });
    const before = (await api.get('/account/credits')).body.balance as number;
    const acc = await accepted(
      mixed._id,
      script([
        { name: 'create_notes', args: { title: 'Made first', markdown: '# kept' } },
        { name: 'start_research', args: { query: 'too dear' } },
      ]),
    );
    const failed = await waitForRun(api, mixed._id, acc.runId, ['completed', 'failed']);
    expect(failed.status).to.equal('failed');
    expect(failed.error).to.equal('credit budget of 10 credits reached');
    expect(failed.steps.map((s: any) => [s.slug, s.status])).to.deep.equal([
      ['create_notes', 'done'],
      ['start_research', 'failed'],
    ]);
    expect(failed.creditsUsed).to.equal(fromUnits(stack.rt.credits.millicreditsFor('agent_run')));
    expect(await stack.db.ledger.countDocuments({ _id: `led_refund_${acc.runId}` })).to.equal(0);
    expect(before - ((await api.get('/account/credits')).body.balance as number)).to.equal(
      fromUnits(stack.rt.credits.millicreditsFor('agent_run')),
    );
  });

  it("when another account names this account's agent or run, then every agent route answers 404 not_found", async () => {
    const acc = await accepted(research, 'write notes about secrets of A');
    await waitForRun(api, research, acc.runId);
    const token = 'b'.repeat(64);
    const calls = [
      other.post(`/agents/${research}/messages`, { message: 'hi' }),
      other.post(`/agents/${research}/run`, { instruction: 'hi' }),
      other.get(`/agents/${research}/runs`),
      other.get(`/agents/${research}/runs/${acc.runId}`),
      other.get(`/agents/${research}/runs/${acc.runId}/result`),
      other.post(`/agents/${research}/runs/${acc.runId}/approve`, { decision: 'approve', reviewToken: token }),
      other.get(`/agents/${research}/usage?days=7`),
      // B's own agent with A's run id: a run of another agent.
      other.get(`/agents/${otherAgent}/runs/${acc.runId}`),
      other.get(`/agents/${otherAgent}/runs/${acc.runId}/result`),
      // A's own run under A's other agent.
      api.get(`/agents/${outreach}/runs/${acc.runId}`),
    ];
    for (const r of await Promise.all(calls)) {
      expect(r.status, r.text).to.equal(404);
      expect(r.body.error.code).to.equal('not_found');
      expect(r.text).to.not.include('secrets of A');
    }
    expect((await other.get(`/agents/${otherAgent}/runs`)).body.data).to.deep.equal([]);
  });

  it('when a message or instruction is longer than 20000 characters or a threadId breaks its pattern, then 400 names the field and nothing is charged', async () => {
    const before = (await api.get('/account/credits')).body;
    const long = await send(research, 'x'.repeat(20_001));
    expect(long.status).to.equal(400);
    expect(long.body.error.message).to.match(/^message/);
    const longRun = await api.post(`/agents/${research}/run`, { instruction: 'x'.repeat(20_001) });
    expect(longRun.status).to.equal(400);
    expect(longRun.body.error.message).to.match(/^instruction/);
    for (const threadId of ['', 'a'.repeat(65), 'has space', 'slash/no', 'émoji']) {
      const r = await api.post(`/agents/${research}/messages`, { message: 'hi', threadId });
      expect(r.status, threadId).to.equal(400);
      expect(r.body.error.message).to.match(/^threadId/);
    }
    const noInstruction = await api.post(`/agents/${research}/run`, {});
    expect(noInstruction.status).to.equal(400);
    expect(noInstruction.body.error.message).to.match(/^instruction/);
    expect((await api.get('/account/credits')).body).to.deep.equal(before);

    const max = await accepted(research, 'y'.repeat(20_000), 'a'.repeat(64));
    expect(max.threadId).to.equal('a'.repeat(64));
    await waitForRun(api, research, max.runId);
  });

  it('when the balance cannot cover the run fee, then 402 and no run is stored', async () => {
    const poor = await stack.createAccount({ credits: 2 });
    const repo = createAgentsRepository(stack.rt.store);
    const agent = await repo.forAccount(poor.accountId).upsert({ ...DEV_AGENTS[0]!, id: undefined });
    const r = await client(stack.baseUrl, poor.key).post(`/agents/${agent._id}/messages`, {
      message: 'write notes about money',
    });
    expect(r.status).to.equal(402);
    expect(r.body.error.code).to.equal('insufficient_credits');
    expect(await stack.db.db.collection(COLLECTIONS.agentRuns).countDocuments({ accountId: poor.accountId })).to.equal(
      0,
    );
  });

  it('when a paid tool would pass the credit budget, then the run fails with the budget error, its fee is refunded once, and evi.run_failed reaches the webhook; completed runs send evi.run_completed', async () => {
    const repo = createAgentsRepository(stack.rt.store);
    const tight = await repo.forAccount(accountId).upsert({
      name: 'tight',
      instructions: 'research things',
      tools: ['start_research'],
      creditBudget: 10,
    });
    const before = (await api.get('/account/credits')).body;
    const acc = await accepted(tight._id, 'research the history of lighthouses');
    const failed = await waitForRun(api, tight._id, acc.runId, ['completed', 'failed']);
    expect(failed.status).to.equal('failed');
    expect(failed.error).to.equal('credit budget of 10 credits reached');
    expect(failed.creditsUsed).to.equal(0);
    expect(failed.steps[0]).to.deep.include({ slug: 'start_research', status: 'failed' });
    const after = (await api.get('/account/credits')).body;
    expect(after).to.deep.equal(before);
    const refunds = await stack.db.ledger.countDocuments({ _id: `led_refund_${acc.runId}` });
    expect(refunds).to.equal(1);

    const [hook] = await rcv.waitFor(1, (x) => x.body?.event === 'evi.run_failed' && x.body.data.runId === acc.runId);
    expect(hook!.body.data).to.deep.equal({
      runId: acc.runId,
      agentId: tight._id,
      threadId: acc.threadId,
      status: 'failed',
      resultUrl: `${stack.config.PUBLIC_BASE_URL}${acc.resultUrl}`,
      creditsUsed: 0,
      error: 'credit budget of 10 credits reached',
    });
    expect(hook!.headers['x-service-event']).to.equal('evi.run_failed');

    const ok = await accepted(research, 'write notes about the webhook');
    await waitForRun(api, research, ok.runId, ['completed']);
    const [done] = await rcv.waitFor(1, (x) => x.body?.event === 'evi.run_completed' && x.body.data.runId === ok.runId);
    expect(done!.body.data).to.include({ status: 'completed', agentId: research, creditsUsed: 5, error: null });
  });

  it('when usage is asked, then days outside 1..90 are 400, and the window counts runs by status and trigger with credits and durations', async () => {
    for (const days of ['0', '91', 'x', '1.5']) {
      const r = await api.get(`/agents/${research}/usage?days=${days}`);
      expect(r.status, days).to.equal(400);
      expect(r.body.error.message).to.match(/^days/);
    }
    const runs = await stack.db.db
      .collection<any>(COLLECTIONS.agentRuns)
      .find({ accountId, agentId: research })
      .toArray();
    const u = await api.get(`/agents/${research}/usage?days=1`);
    expect(u.status, u.text).to.equal(200);
    expect(u.body).to.include({ agentId: research, days: 1, runs: runs.length, truncated: false });
    const count = (key: string) => {
      const m: Record<string, number> = {};
      for (const r of runs) m[r[key]] = (m[r[key]] ?? 0) + 1;
      return m;
    };
    expect(u.body.byStatus).to.deep.equal(count('status'));
    expect(u.body.byTrigger).to.deep.equal(count('trigger'));
    expect(u.body.byTrigger.run).to.equal(1);
    expect(u.body.creditsUsed).to.equal(runs.reduce((n: number, r: any) => n + r.creditsUsed, 0));
    expect(u.body.avgDurationMs).to.be.a('number').and.at.least(0);
    expect(u.body.lastRunAt).to.equal(
      runs
        .map((r: any) => r.createdAt)
        .sort((a: Date, b: Date) => b.getTime() - a.getTime())[0]
        .toISOString(),
    );
    const def = await api.get(`/agents/${research}/usage`);
    expect(def.body.days).to.equal(7);
    const filtered = await api.get(`/agents/${research}/runs?status=completed&limit=100`);
    expect(filtered.body.data.every((r: any) => r.status === 'completed')).to.equal(true);
    expect(filtered.body.total).to.equal(u.body.byStatus.completed);
  });
});
