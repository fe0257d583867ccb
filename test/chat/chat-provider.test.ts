import { expect } from 'chai';
import { connect as tcpConnect } from 'node:net';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, eventually, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeOpenAi } from './fake-openai';
import { frames, streamChat } from './ui-client';
import { fromUnits } from '../../platform/credits/credits';

/**
 * POST /chat with CHAT_ENGINE=openai against a local fake provider that speaks the real
 * chat-completions SSE (and the images API, which the image tool's renderer calls): provider
 * failures, client disconnects and keepalives, with a tool held "working" by the fake.
 */
describe('POST /chat with the OpenAI-compatible engine against a fake provider', function () {
  this.timeout(120_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeOpenAi>>;
  let api: Client;
  let key: string;
  let accountId: string;
  before(async () => {
    provider = await fakeOpenAi();
    stack = await startStack({
      scheduler: false,
      env: {
        CHAT_ENGINE: 'openai',
        CHAT_MODEL: 'fake-chat-1',
        OPENAI_BASE_URL: provider.url,
        OPENAI_API_KEY: 'sk-test',
        IMAGE_ENGINE: 'openai',
        CHAT_KEEPALIVE_MS: '100',
        CHAT_TIMEOUT_MS: '5000',
      },
    });
    const a = await stack.createAccount({ credits: 100 });
    key = a.key;
    accountId = a.accountId;
    api = client(stack.baseUrl, key);
  });
  after(async () => {
    provider.releaseImages();
    await stack.stop();
    await provider.close();
  });
  afterEach(() => provider.releaseImages());

  const balance = async () => (await api.get('/account/credits')).body.balance as number;
  /** Net credits of one operation for the account: charges minus refunds in the ledger. */
  const net = async (operation: string) => {
    const entries = await stack.db.ledger.find({ accountId, operation } as never).toArray();
    return entries.reduce(
      (s, e) =>
        s +
        ((e as { kind: string }).kind === 'refund' ? -1 : 1) * fromUnits((e as { millicredits: number }).millicredits),
      0,
    );
  };

  it('when the provider streams text and a tool call split across chunks, then the turn runs the tool and the engine is reported', async () => {
    provider.script((_body, n) =>
      n === 0
        ? {
            text: 'Let me draw that.',
            toolCalls: [{ name: 'create_notes', args: { title: 'Launch notes', markdown: '# Launch\n- date' } }],
          }
        : { text: 'I made the notes "Launch notes".' },
    );
    const t = await streamChat(stack.baseUrl, key, { message: 'notes please' });
    const tool = t.message.parts.find((p) => p.type === 'tool-create_notes') as {
      state: string;
      output: { type: string; title: string };
    };
    expect(tool.state).to.equal('output-available');
    expect(tool.output).to.include({ type: 'notes', title: 'Launch notes' });
    expect(t.message.metadata?.usage).to.deep.equal({ inputTokens: 84, outputTokens: 14 });
    const ms = (await api.get(`/conversations/${t.headers.get('x-conversation-id')}/messages`)).body.data;
    expect(ms[1].engine).to.include({ lab: 'openai-compatible', model: 'fake-chat-1' });
    // The provider saw the tool result on the second call.
    const second = JSON.parse(provider.requests.filter((r) => r.url.endsWith('/chat/completions')).at(-1)!.body);
    expect(second.messages.some((m: { role: string }) => m.role === 'tool')).to.equal(true);
  });

  it('when the provider answers 500, then the stream carries an error chunk, then finish and [DONE], and the turn is refunded', async () => {
    provider.script(() => ({ status: 500 }));
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'hello' });
    expect(t.status).to.equal(200);
    const types = t.chunks.map((c) => c.type);
    expect(types.slice(-2)).to.deep.equal(['error', 'finish']);
    expect((t.chunks.find((c) => c.type === 'error') as { errorText: string }).errorText)
      .to.be.a('string')
      .and.not.match(/sk-test/);
    expect(frames(t.raw).at(-1)).to.equal('data: [DONE]');
    expect(await balance()).to.equal(before);
    expect(await stack.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })).to.equal(0); // settled, not left to the scheduler
    const ms = (await api.get(`/conversations/${t.headers.get('x-conversation-id')}/messages`)).body.data;
    expect(ms.at(-1).artifacts.at(-1).type).to.equal('error');
  });

  it('when the provider cuts the stream after some text, then the text arrives, then an error chunk, finish and [DONE], and the turn is refunded', async () => {
    provider.script(() => ({ text: 'Half an answer', cut: true }));
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'hello' });
    const types = t.chunks.map((c) => c.type);
    expect(types).to.include('text-delta');
    expect(types.indexOf('text-delta')).to.be.lessThan(types.indexOf('error'));
    expect(types.at(-1)).to.equal('finish');
    expect(frames(t.raw).at(-1)).to.equal('data: [DONE]');
    expect(await balance()).to.equal(before);
  });

  it('when the provider fails with stream false, then an Error (5xx) that says nothing was charged', async () => {
    provider.script(() => ({ status: 503 }));
    const before = await balance();
    const r = await api.post('/chat', { message: 'hello', stream: false });
    expect(r.status).to.be.oneOf([503, 504]);
    expect(r.body.error.message).to.match(/nothing was charged/);
    expect(r.headers.get('x-conversation-id')).to.match(/^conv_/);
    expect(await balance()).to.equal(before);
  });

  it('when a tool works for a while, then keepalive comments arrive, and the artifact follows when it is done', async () => {
    provider.holdImages();
    provider.script((_b, n) =>
      n === 0
        ? { toolCalls: [{ name: 'generate_image', args: { prompt: 'a red fox' } }] }
        : { text: 'Here is your fox.' },
    );
    let commentsWhileWaiting = 0;
    const done = streamChat(stack.baseUrl, key, { message: 'draw a fox' });
    await provider.imageRequested;
    await new Promise((r) => setTimeout(r, 450));
    provider.releaseImages();
    const t = await done;
    const fs = frames(t.raw);
    const firstOutput = fs.findIndex((f) => f.includes('"tool-output-available"'));
    const lastInput = fs.findIndex((f) => f.includes('"tool-input-available"'));
    commentsWhileWaiting = fs.slice(lastInput, firstOutput).filter((f) => f.startsWith(':')).length;
    expect(commentsWhileWaiting, t.raw).to.be.greaterThanOrEqual(3);
    expect(fs.filter((f) => f.startsWith(':')).every((f) => f === ': keepalive')).to.equal(true);
    const img = t.message.parts.find((p) => p.type === 'tool-generate_image') as {
      output: { type: string; data: { url: string } };
    };
    expect(img.output.type).to.equal('image');
    expect(img.output.data.url).to.match(/^http/);
  });

  it('when the client disconnects while a tool works, then the turn is not charged, later tools do not run, and only what finished is kept', async () => {
    provider.holdImages();
    provider.script((_b, n) =>
      n === 0
        ? {
            toolCalls: [
              { name: 'generate_image', args: { prompt: 'a slow fox' } },
              { name: 'create_notes', args: { title: 'Never written', markdown: 'x' } },
            ],
          }
        : { text: 'done' },
    );
    const before = await balance();
    const chatBefore = await net('chat_turn');
    const imageBefore = await net('image');
    const abort = new AbortController();
    let conversationId: string | null = null;
    const read = streamChat(
      stack.baseUrl,
      key,
      { message: 'draw a fox then write notes' },
      { signal: abort.signal },
    ).catch((err: Error) => err);
    await provider.imageRequested;
    const notesBefore = await stack.db.db
      .collection(COLLECTIONS.projects)
      .countDocuments({ accountId, name: 'Never written' });
    abort.abort();
    expect(await read).to.be.instanceOf(Error);
    // The turn's hold is given back once the route saw the close.
    await eventually(async () => (await net('chat_turn')) === chatBefore, 10_000, 'the chat_turn hold released');
    provider.releaseImages();
    // The image in flight cannot stop mid-render: it finishes and its own service charges it; the notes never start.
    await eventually(
      async () =>
        (await net('image')) === imageBefore + fromUnits(stack.rt.credits.millicreditsFor('image')) &&
        (await stack.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })) === 0,
      10_000,
      'the image charged',
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(
      await stack.db.db.collection(COLLECTIONS.projects).countDocuments({ accountId, name: 'Never written' }),
    ).to.equal(notesBefore);
    expect(provider.chatCalls).to.equal(1);
    expect(before - (await balance())).to.equal(fromUnits(stack.rt.credits.millicreditsFor('image')));
    const conv = await stack.db.db
      .collection(COLLECTIONS.conversations)
      .find({ accountId })
      .sort({ createdAt: -1 })
      .limit(1)
      .next();
    conversationId = conv!._id as unknown as string;
    // What finished is kept: the image that was in flight, without the turn's reply.
    const ms = await eventually(
      async () => {
        const data = (await api.get(`/conversations/${conversationId}/messages`)).body.data;
        return data.length === 2 ? data : null;
      },
      10_000,
      'the partial answer stored',
    );
    expect(ms.map((m: { role: string }) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(ms[1].artifacts.map((a: { type: string }) => a.type)).to.deep.equal(['image']);
    expect(ms[1].usage).to.equal(null);
  });
  it('when the provider reuses call ids from step to step, then each step makes its own project and the UI tool parts have distinct ids', async () => {
    provider.script((_b, n) =>
      n < 2
        ? {
            toolCalls: [{ name: 'create_notes', args: { title: `Reused ${n}`, markdown: `# Step ${n}` } }],
            reuseIds: true,
          }
        : { text: 'Both made.' },
    );
    const t = await streamChat(stack.baseUrl, key, { message: 'two notes, one after the other', mode: 'think' });
    const parts = t.message.parts.filter((p) => p.type === 'tool-create_notes') as {
      toolCallId: string;
      state: string;
      output: { title: string; projectId: string };
    }[];
    expect(parts.map((p) => p.state)).to.deep.equal(['output-available', 'output-available']);
    expect(parts.map((p) => p.output.title)).to.deep.equal(['Reused 0', 'Reused 1']);
    expect(new Set(parts.map((p) => p.toolCallId)).size).to.equal(2);
    expect(parts[0]!.output.projectId).to.not.equal(parts[1]!.output.projectId);
    const second = await api.get(`/projects/${parts[1]!.output.projectId}`);
    expect(second.body.name).to.equal('Reused 1');
  });

  it('when the provider fails after a tool call started, then the tool part is closed with an error before the error chunk, and nothing is charged', async () => {
    provider.script(() => ({
      toolCalls: [{ name: 'create_notes', args: { title: 'x', markdown: 'y' } }],
      cutAfterCallStart: true,
    }));
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'notes please' });
    const types = t.chunks.map((c) => c.type);
    expect(types).to.include('tool-input-start');
    expect(types.indexOf('tool-output-error')).to.be.greaterThan(types.indexOf('tool-input-start'));
    expect(types.indexOf('tool-output-error')).to.be.lessThan(types.indexOf('error'));
    const part = t.message.parts.find((p) => p.type === 'tool-create_notes') as { state: string };
    expect(part.state).to.equal('output-error');
    expect(types.at(-1)).to.equal('finish');
    expect(await balance()).to.equal(before);
  });

  it('when one step asks for more than 8 tools, then 8 run, the rest answer tool_call_limit error artifacts, and the answer is stored and charged', async () => {
    const calls = Array.from({ length: 60 }, (_, i) => ({ name: 'brand_theme', args: { brand: `Brand ${i}` } }));
    provider.script((_b, n) => (n === 0 ? { toolCalls: calls } : { text: 'Themes made.' }));
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'sixty themes' });
    const outputs = t.chunks.filter((c) => c.type === 'tool-output-available') as {
      output: { type: string; data: { code?: string } };
    }[];
    expect(outputs).to.have.length(60);
    expect(outputs.filter((o) => o.output.type === 'brand_theme')).to.have.length(8);
    expect(
      outputs.slice(8).every((o) => o.output.type === 'error' && o.output.data.code === 'tool_call_limit'),
    ).to.equal(true);
    expect(t.chunks.some((c) => c.type === 'error')).to.equal(false);
    const ms = (await api.get(`/conversations/${t.headers.get('x-conversation-id')}/messages`)).body.data;
    expect(ms).to.have.length(2);
    expect(ms[1].artifacts.length).to.be.at.most(50);
    expect(before - (await balance())).to.equal(fromUnits(stack.rt.credits.millicreditsFor('chat_turn')));
  });

  it('when the answer cannot be stored, then the stream carries an error chunk before finish and the turn is not charged, at once', async () => {
    provider.script(() => ({ text: 'x'.repeat(200_001) }));
    const before = await balance();
    const t = await streamChat(stack.baseUrl, key, { message: 'a very long answer please' });
    const types = t.chunks.map((c) => c.type);
    expect(types.slice(-2)).to.deep.equal(['error', 'finish']);
    expect((t.chunks.find((c) => c.type === 'error') as { errorText: string }).errorText).to.match(
      /could not be stored; nothing was charged/,
    );
    expect(await balance()).to.equal(before);
    expect(await stack.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })).to.equal(0);
  });

  it('when messages come with a conversationId, then the provider sees the stored history and the new user message once, not the client copy besides', async () => {
    provider.script(() => ({ text: 'First answer.' }));
    const first = await api.post('/chat', { message: 'first question', stream: false });
    expect(first.status, first.text).to.equal(200);
    provider.script(() => ({ text: 'Second answer.' }));
    const r = await api.post('/chat', {
      conversationId: first.body.conversationId,
      stream: false,
      messages: [
        { role: 'user', content: 'first question' },
        { role: 'assistant', content: 'First answer.' },
        { role: 'user', content: 'second question' },
      ],
    });
    expect(r.status, r.text).to.equal(200);
    const sent = JSON.parse(provider.requests.filter((x) => x.url.endsWith('/chat/completions')).at(-1)!.body) as {
      messages: { role: string; content: string }[];
    };
    const users = sent.messages.filter((m) => m.role === 'user').map((m) => m.content);
    expect(users).to.deep.equal(['first question', 'second question']);
  });

  it('when the client goes away right after sending, then no turn runs, nothing is charged, and the audit log still records the request', async () => {
    provider.script(() => ({ text: 'nobody reads this' }));
    const before = await balance();
    const callsBefore = provider.chatCalls;
    const convsBefore = await stack.db.db.collection(COLLECTIONS.conversations).countDocuments({ accountId });
    const url = new URL(`${stack.baseUrl}/chat`);
    const body = JSON.stringify({ message: 'hello' });
    const rid = `req-gone-${Date.now()}`;
    await new Promise<void>((resolve, reject) => {
      const sock = tcpConnect(Number(url.port), url.hostname, () => {
        sock.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nX-Request-Id: ${rid}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          () => {
            sock.destroy();
            resolve();
          },
        );
      });
      sock.on('error', reject);
    });
    const entry = await eventually(
      () => stack.db.db.collection('audit_log').findOne({ requestId: rid }),
      10_000,
      'audit entry of the abandoned request',
    );
    expect(entry).to.include({ accountId, millicreditsCharged: 0 });
    await new Promise((r) => setTimeout(r, 500));
    expect(await balance()).to.equal(before);
    expect(await stack.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })).to.equal(0);
    expect(provider.chatCalls).to.equal(callsBefore);
    expect(await stack.db.db.collection(COLLECTIONS.conversations).countDocuments({ accountId })).to.equal(convsBefore);
  });
});
