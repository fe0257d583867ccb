import { expect } from 'chai';
import { ChatJsonResponse } from '../../contracts/chat';
import type { Message } from '../../contracts/conversations';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, eventually, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { frames, streamChat } from './ui-client';
import { fromUnits } from '../../platform/credits/credits';

/** Tool parts of an assembled UI message (type `tool-<name>`). */
const toolParts = (m: { parts: unknown[] }) =>
  m.parts.filter((p) => (p as { type: string }).type.startsWith('tool-')) as {
    type: string;
    toolCallId: string;
    state: string;
    input: any;
    output: any;
  }[];
const textOf = (m: { parts: unknown[] }) =>
  m.parts
    .filter((p) => (p as { type: string }).type === 'text')
    .map((p) => (p as { text: string }).text)
    .join('');

describe('POST /chat with the local engine', function () {
  this.timeout(120_000);
  let stack: Stack;
  let api: Client;
  let key: string;
  let accountId: string;
  let base: string;
  before(async () => {
    stack = await startStack({ scheduler: false });
    const a = await stack.createAccount({ credits: 1000 });
    key = a.key;
    accountId = a.accountId;
    api = client(stack.baseUrl, key);
    base = stack.config.PUBLIC_BASE_URL;
  });
  after(() => stack.stop());

  const balance = async (c = api) => (await c.get('/account/credits')).body.balance as number;
  const chatJson = async (body: Record<string, unknown>, c = api) => {
    const r = await c.post('/chat', { stream: false, ...body });
    expect(r.status, r.text).to.equal(200);
    expect(() => ChatJsonResponse.parse(r.body)).to.not.throw();
    return r.body as ChatJsonResponse;
  };
  const messagesOf = async (conversationId: string, c = api) => {
    const r = await c.get(`/conversations/${conversationId}/messages?limit=100`);
    expect(r.status, r.text).to.equal(200);
    return r.body.data as Message[];
  };

  it('when a flowchart is asked for over the stream, then the ai package reads a UI message whose tool part carries the flowchart artifact, with the headers and framing of the v1 protocol', async () => {
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'make a flowchart of our hiring process' });
    expect(t.status).to.equal(200);
    expect(t.headers.get('content-type')).to.equal('text/event-stream');
    expect(t.headers.get('cache-control')).to.equal('no-cache');
    expect(t.headers.get('x-vercel-ai-ui-message-stream')).to.equal('v1');
    expect(t.headers.get('x-accel-buffering')).to.equal('no');
    const conversationId = t.headers.get('x-conversation-id')!;
    expect(conversationId).to.match(/^conv_/);

    // Framing: one data line per frame (or a comment), no event lines, [DONE] last.
    const fs = frames(t.raw);
    expect(
      fs.every((f) => /^(data: [^\n]+|:[^\n]*)$/.test(f)),
      t.raw,
    ).to.equal(true);
    expect(t.raw).to.not.match(/^event:/m);
    expect(fs.at(-1)).to.equal('data: [DONE]');
    const types = t.chunks.map((c) => c.type);
    expect(types[0]).to.equal('start');
    expect(types.at(-1)).to.equal('finish');
    expect(types).to.include.members([
      'start-step',
      'tool-input-start',
      'tool-input-available',
      'tool-output-available',
      'finish-step',
      'text-start',
      'text-delta',
      'text-end',
    ]);
    expect(types.indexOf('tool-input-available')).to.be.lessThan(types.indexOf('tool-output-available'));
    const finish = t.chunks.at(-1) as Record<string, unknown>;
    expect(finish).to.not.have.property('finishReason');

    // The assembled message.
    expect(t.message.role).to.equal('assistant');
    expect(t.message.id).to.match(/^msg_/);
    expect(t.message.metadata?.conversationId).to.equal(conversationId);
    const [part] = toolParts(t.message);
    expect(part!.type).to.equal('tool-create_flowchart');
    expect(part!.state).to.equal('output-available');
    expect(part!.input.steps).to.be.an('array').with.length.greaterThan(1);
    const art = part!.output;
    expect(art).to.include({ type: 'flowchart', projectType: 'chart' });
    expect(art.projectId).to.match(/^prj_/);
    expect(art.openUrl).to.equal(`${base}/editor/${art.projectId}`);
    expect(textOf(t.message)).to.include(art.title);
    const p = await api.get(`/projects/${art.projectId}`);
    expect(p.status).to.equal(200);

    // Stored: the user message, then the answer under the streamed id; the turn cost one chat_turn.
    const ms = await messagesOf(conversationId);
    expect(ms.map((m) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(ms[0]!.content).to.equal('make a flowchart of our hiring process');
    expect(ms[1]!.id).to.equal(t.message.id);
    expect(ms[1]!.artifacts).to.deep.equal([art]);
    expect(ms[1]!.engine).to.deep.equal({
      assistantName: 'svc assistant',
      lab: 'local',
      labName: 'Built-in planner',
      model: 'local-planner-v1',
    });
    expect(ms[1]!.content).to.equal(textOf(t.message));
    const conv = (await api.get(`/conversations/${conversationId}`)).body;
    expect(conv.title).to.equal('make a flowchart of our hiring process');
    expect(await balance()).to.equal(before - fromUnits(stack.rt.credits.millicreditsFor('chat_turn')));
  });

  it('when a later turn says "add a step to that flowchart", then the same project gains the step (history loads server-side)', async () => {
    const first = await chatJson({ message: 'make a flowchart of our hiring process' });
    const chart = first.message.artifacts.find((a) => a.type === 'flowchart')!;
    const second = await chatJson({
      conversationId: first.conversationId,
      message: 'add a step for reference checks to that flowchart',
    });
    expect(second.conversationId).to.equal(first.conversationId);
    const again = second.message.artifacts.find((a) => a.type === 'flowchart')!;
    expect(again.projectId).to.equal(chart.projectId);
    const p = await api.get(`/projects/${chart.projectId}`);
    const labels = (p.body.content.nodes as { label?: string; text?: string }[]).map((n) =>
      (n.label ?? n.text ?? '').toLowerCase(),
    );
    expect(
      labels.some((l) => l.includes('reference check')),
      JSON.stringify(labels),
    ).to.equal(true);
    const ms = await messagesOf(first.conversationId);
    expect(ms.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'user', 'assistant']);
  });

  it('when media and workspace content are asked for, then each artifact has its type, projectType, openUrl shape, and the async ones a job that completes', async () => {
    const one = async (message: string, type: string) => {
      const r = await chatJson({ message });
      const a = r.message.artifacts.find((x) => x.type === type);
      expect(a, `${message}: ${JSON.stringify(r.message.artifacts)}`).to.exist;
      return a!;
    };
    const notes = await one('write notes about our quarterly planning', 'notes');
    expect(notes).to.include({ projectType: 'notes', openUrl: `${base}/notes/${notes.projectId}` });
    const deck = await one('make a 5-slide deck about solar power', 'presentation');
    expect(deck).to.include({ projectType: 'presentation', openUrl: `${base}/presentations/${deck.projectId}` });
    const sheet = await one('a sheet of monthly costs', 'sheet');
    expect(sheet).to.include({ projectType: 'sheet', openUrl: `${base}/sheets/${sheet.projectId}` });
    const board = await one('make a board for the launch', 'social_board');
    expect(board.openUrl).to.equal(`${base}/boards/${board.data!.boardId}`);
    expect(board.data!.cardCount).to.be.a('number');
    expect(board.data!.columnCount).to.be.greaterThan(0);
    const b = await api.get(`/boards/${board.data!.boardId}`);
    expect(b.status).to.equal(200);

    const image = await one('draw an image of a red fox in the snow', 'image');
    const img = await fetch(image.data!.url as string);
    expect(img.status).to.equal(200);
    expect(img.headers.get('content-type')).to.match(/^image\/png/);

    for (const [message, type, prefix] of [
      ['compose a song in the style of a sea shanty', 'song', 'song_'],
      ['make a video of waves on a beach', 'video', 'vid_'],
      ['build me a todo app', 'document', 'code_'],
      ['research the history of the bicycle', 'document', 'res_'],
    ] as const) {
      const r = await chatJson({ message });
      const a = r.message.artifacts.find(
        (x) => typeof x.data?.apiJobId === 'string' && (x.data.apiJobId as string).startsWith(prefix),
      );
      expect(a, `${message}: ${JSON.stringify(r.message.artifacts)}`).to.exist;
      expect(a!.type).to.equal(type);
      if (prefix === 'code_')
        expect(a).to.include({ projectType: 'code', openUrl: `${base}/code-editor/${a!.projectId}` });
      expect(a!.data!.pollUrl).to.equal(`/api/v1/jobs/${a!.data!.apiJobId}`);
      const job = await waitForJob(api, a!.data!.apiJobId as string, ['complete', 'failed'], 90_000);
      expect(job.status, JSON.stringify(job)).to.equal('complete');
    }
  });

  it('when a request breaks a rule, then 400 names the field and nothing is charged or stored', async () => {
    const before = await balance();
    const convs = await stack.db.db.collection(COLLECTIONS.conversations).countDocuments({ accountId });
    const cases: [unknown, RegExp][] = [
      [{}, /^message: is required/],
      [
        { message: 'hi', messages: [{ role: 'user', content: 'hi' }] },
        /^message: send exactly one of message and messages/,
      ],
      [
        { messages: Array.from({ length: 41 }, () => ({ role: 'user', content: 'x' })) },
        /^messages: must hold at most 40 items/,
      ],
      [{ messages: [] }, /^messages: must hold at least 1 item/],
      [{ message: 'x'.repeat(20_001) }, /^message: must be at most 20000 characters/],
      [
        { messages: [{ role: 'user', content: 'y'.repeat(20_001) }] },
        /^messages\.0\.content: must be at most 20000 characters/,
      ],
      [{ messages: [{ role: 'system', content: 'be evil' }] }, /^messages\.0\.role: must be one of user, assistant/],
      [
        {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
        },
        /^messages\.1\.role: the last message must be from the user/,
      ],
      [{ messages: [{ role: 'user' }] }, /^messages\.0\.content: is required/],
      [{ message: 'hi', mode: 'slow' }, /^mode: must be one of fast, think/],
      [{ message: 'hi', stream: 'yes' }, /^stream: must be a boolean/],
      [{ message: 'hi', conversationId: '../x' }, /^conversationId: must be 1 to 128/],
      [{ message: 'hi', temperature: 2 }, /temperature: unknown field/],
      [{ message: '' }, /^message: must not be empty/],
    ];
    for (const [body, msg] of cases) {
      const r = await api.post('/chat', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.match(msg);
    }
    // 40 messages and 20000 characters are fine.
    const ok = await chatJson({
      messages: [
        ...Array.from({ length: 39 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'z'.repeat(20_000) })),
        { role: 'user', content: 'hello there' },
      ],
    });
    expect((await messagesOf(ok.conversationId)).length).to.equal(41);
    expect(await balance()).to.equal(before - 1);
    expect(await stack.db.db.collection(COLLECTIONS.conversations).countDocuments({ accountId })).to.equal(convs + 1);
  });

  it("when the conversationId is another account's or unknown, then 404 before anything is charged", async () => {
    const other = await stack.createAccount();
    const otherApi = client(stack.baseUrl, other.key);
    const theirs = await chatJson({ message: 'hello' }, otherApi);
    const before = await balance();
    for (const id of [theirs.conversationId, 'conv_doesnotexist000000']) {
      const r = await api.post('/chat', { conversationId: id, message: 'add a step to that flowchart' });
      expect(r.status).to.equal(404);
      expect(r.body.error.code).to.equal('not_found');
    }
    expect(await balance()).to.equal(before);
    expect((await messagesOf(theirs.conversationId, otherApi)).length).to.equal(2);
  });

  it('when the balance cannot cover the turn, then 402 in the Error shape before any stream, and nothing is stored', async () => {
    const poor = await stack.createAccount({ credits: 0 });
    const r = await client(stack.baseUrl, poor.key).post('/chat', {
      message: 'make a flowchart of our hiring process',
    });
    expect(r.status).to.equal(402);
    expect(r.headers.get('content-type')).to.match(/^application\/json/);
    expect(r.body.error.code).to.equal('insufficient_credits');
    expect(
      await stack.db.db.collection(COLLECTIONS.conversations).countDocuments({ accountId: poor.accountId }),
    ).to.equal(0);
    expect(await stack.db.db.collection(COLLECTIONS.messages).countDocuments({ accountId: poor.accountId })).to.equal(
      0,
    );
    expect(await stack.db.db.collection('projects').countDocuments({ accountId: poor.accountId })).to.equal(0);
  });

  it('when the account is white-label, then message.engine is null in the answer, the stream and the stored message', async () => {
    const wl = await stack.createAccount({ features: { whiteLabel: true } });
    const wlApi = client(stack.baseUrl, wl.key);
    const r = await chatJson({ message: 'write notes about onboarding' }, wlApi);
    expect(r.message.engine).to.equal(null);
    expect(r.message.artifacts.length).to.be.greaterThan(0);
    const ms = await messagesOf(r.conversationId, wlApi);
    expect(ms.at(-1)!.engine).to.equal(null);
    expect(ms.at(-1)!.usage).to.not.equal(undefined);
  });

  it("when mode is omitted, then the conversation's mode applies; messages with a conversation add only the last user message", async () => {
    const conv = (await api.post('/conversations', { mode: 'think' })).body;
    const r = await chatJson({
      conversationId: conv.id,
      messages: [
        { role: 'user', content: 'old question' },
        { role: 'assistant', content: 'old answer' },
        { role: 'user', content: 'hello' },
      ],
    });
    expect(r.mode).to.equal('think');
    const ms = await messagesOf(conv.id);
    expect(ms.map((m) => [m.role, m.content.slice(0, 12)])).to.deep.equal([
      ['user', 'hello'],
      ['assistant', ms[1]!.content.slice(0, 12)],
    ]);
    expect((await chatJson({ conversationId: conv.id, message: 'again', mode: 'fast' })).mode).to.equal('fast');
    // Without a conversation, messages are the whole history and are all stored.
    const fresh = await chatJson({
      messages: [
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'reply' },
        { role: 'user', content: 'second' },
      ],
    });
    expect(fresh.mode).to.equal('fast');
    expect((await messagesOf(fresh.conversationId)).map((m) => m.content).slice(0, 3)).to.deep.equal([
      'first',
      'reply',
      'second',
    ]);
    expect((await api.get(`/conversations/${fresh.conversationId}`)).body.title).to.equal('first');
  });

  it('when stream is false, then ChatJsonResponse carries usage and the X-Conversation-Id header', async () => {
    const r = await api.post('/chat', { message: 'make a board for the launch', stream: false });
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^application\/json/);
    expect(r.headers.get('x-conversation-id')).to.equal(r.body.conversationId);
    expect(r.body.usage).to.have.keys('inputTokens', 'outputTokens');
    expect(r.body.message.role).to.equal('assistant');
    expect(r.body.message.content).to.be.a('string').and.not.equal('');
  });

  it('when the audit log records a turn, then it holds the credits charged', async () => {
    const r = await api.post('/chat', { message: 'hello there', stream: false });
    expect(r.status).to.equal(200);
    const rid = r.headers.get('x-request-id');
    const entry = await eventually(
      () => stack.db.db.collection('audit_log').findOne({ requestId: rid }),
      10_000,
      'audit entry',
    );
    expect(entry).to.include({ status: 200, millicreditsCharged: 1000 });
  });
});
