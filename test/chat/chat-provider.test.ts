import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/mongo';
import { client, eventually, type Client } from '../helpers/http';
import { startStack, type Stack } from '../helpers/stack';
import { fakeOpenAi } from './fake-openai';
import { frames, streamChat } from './ui-client';

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
      env: { CHAT_ENGINE: 'openai', CHAT_MODEL: 'fake-chat-1', OPENAI_BASE_URL: provider.url, OPENAI_API_KEY: 'sk-test', IMAGE_ENGINE: 'openai', CHAT_KEEPALIVE_MS: '100', CHAT_TIMEOUT_MS: '5000' },
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
    const entries = await stack.rt.db.ledger.find({ accountId, operation } as never).toArray();
    return entries.reduce((s, e) => s + ((e as { kind: string }).kind === 'refund' ? -1 : 1) * (e as { amount: number }).amount, 0);
  };

  it('when the provider streams text and a tool call split across chunks, then the turn runs the tool and the engine is reported', async () => {
    provider.script((_body, n) => (n === 0 ? { text: 'Let me draw that.', toolCalls: [{ name: 'create_notes', args: { title: 'Launch notes', markdown: '# Launch\n- date' } }] } : { text: 'I made the notes "Launch notes".' }));
    const t = await streamChat(stack.baseUrl, key, { message: 'notes please' });
    const tool = t.message.parts.find((p) => p.type === 'tool-create_notes') as { state: string; output: { type: string; title: string } };
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
    expect((t.chunks.find((c) => c.type === 'error') as { errorText: string }).errorText).to.be.a('string').and.not.match(/sk-test/);
    expect(frames(t.raw).at(-1)).to.equal('data: [DONE]');
    expect(await balance()).to.equal(before);
    expect(await stack.rt.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })).to.equal(0); // settled, not left to the scheduler
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
    provider.script((_b, n) => (n === 0 ? { toolCalls: [{ name: 'generate_image', args: { prompt: 'a red fox' } }] } : { text: 'Here is your fox.' }));
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
    const img = t.message.parts.find((p) => p.type === 'tool-generate_image') as { output: { type: string; data: { url: string } } };
    expect(img.output.type).to.equal('image');
    expect(img.output.data.url).to.match(/^http/);
  });

  it('when the client disconnects while a tool works, then the turn is not charged, later tools do not run, and only what finished is kept', async () => {
    provider.holdImages();
    provider.script((_b, n) => (n === 0 ? { toolCalls: [{ name: 'generate_image', args: { prompt: 'a slow fox' } }, { name: 'create_notes', args: { title: 'Never written', markdown: 'x' } }] } : { text: 'done' }));
    const before = await balance();
    const chatBefore = await net('chat_turn');
    const imageBefore = await net('image');
    const abort = new AbortController();
    let conversationId: string | null = null;
    const read = streamChat(stack.baseUrl, key, { message: 'draw a fox then write notes' }, { signal: abort.signal }).catch((err: Error) => err);
    await provider.imageRequested;
    const notesBefore = await stack.rt.db.db.collection(COLLECTIONS.projects).countDocuments({ accountId, name: 'Never written' });
    abort.abort();
    expect(await read).to.be.instanceOf(Error);
    // The turn's hold is given back once the route saw the close.
    await eventually(async () => (await net('chat_turn')) === chatBefore, 10_000, 'the chat_turn hold released');
    provider.releaseImages();
    // The image in flight cannot stop mid-render: it finishes and its own service charges it; the notes never start.
    await eventually(async () => (await net('image')) === imageBefore + stack.rt.credits.price('image') && (await stack.rt.db.db.collection(COLLECTIONS.creditHolds).countDocuments({ accountId })) === 0, 10_000, 'the image charged');
    await new Promise((r) => setTimeout(r, 300));
    expect(await stack.rt.db.db.collection(COLLECTIONS.projects).countDocuments({ accountId, name: 'Never written' })).to.equal(notesBefore);
    expect(provider.chatCalls).to.equal(1);
    expect(before - (await balance())).to.equal(stack.rt.credits.price('image'));
    const conv = await stack.rt.db.db.collection(COLLECTIONS.conversations).find({ accountId }).sort({ createdAt: -1 }).limit(1).next();
    conversationId = conv!._id as unknown as string;
    // What finished is kept: the image that was in flight, without the turn's reply.
    const ms = await eventually(async () => {
      const data = (await api.get(`/conversations/${conversationId}/messages`)).body.data;
      return data.length === 2 ? data : null;
    }, 10_000, 'the partial answer stored');
    expect(ms.map((m: { role: string }) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(ms[1].artifacts.map((a: { type: string }) => a.type)).to.deep.equal(['image']);
    expect(ms[1].usage).to.equal(null);
  });
});
