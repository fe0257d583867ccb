import { expect } from 'chai';
import { Conversation, Message } from '../../contracts/conversations';
import {
  createConversationsRepository,
  type ConversationsRepository,
} from '../../platform/conversations/conversations.repository';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('conversations API and appendMessage', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  let repo: ConversationsRepository;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    const a = await stack.createAccount();
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
    repo = createConversationsRepository(stack.rt.store);
  });
  after(() => stack.stop());

  const convCol = () => stack.db.db.collection<any>(COLLECTIONS.conversations);
  const msgCol = () => stack.db.db.collection<any>(COLLECTIONS.messages);
  const create = async (body: Record<string, unknown> = {}, c = api) => {
    const r = await c.post('/conversations', body);
    expect(r.status, r.text).to.equal(201);
    return r.body;
  };
  const expect400 = async (p: Promise<{ status: number; body: any; text: string }>, message: RegExp) => {
    const r = await p;
    expect(r.status, r.text).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(message);
  };
  /** Every message of a conversation, across pages. */
  const allMessages = async (id: string, limit: number, c = api) => {
    const out: any[] = [];
    let cursor: string | undefined;
    do {
      const r = await c.get(`/conversations/${id}/messages?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status, r.text).to.equal(200);
      out.push(...r.body.data);
      cursor = r.body.cursor;
    } while (cursor);
    return out;
  };

  it('when a conversation is created, then 201 answers the shape with defaults, ETag "1", and it is stored', async () => {
    const r = await api.post('/conversations', {});
    expect(r.status).to.equal(201);
    expect(() => Conversation.parse(r.body)).to.not.throw();
    expect(r.body.id).to.match(/^conv_[0-9a-z]{20}$/);
    expect(r.body).to.include({ title: null, mode: null, messageCount: 0, lastMessageAt: null, version: 1 });
    expect(r.headers.get('etag')).to.equal('"1"');
    const named = await create({ title: '  Trip planning  ', mode: 'think' });
    expect(named).to.include({ title: 'Trip planning', mode: 'think' });
    const doc = await convCol().findOne({ _id: named.id });
    expect(doc).to.include({ accountId, title: 'Trip planning', mode: 'think', messageCount: 0, version: 1 });
    expect((await create({ title: 't'.repeat(256) })).title).to.have.length(256);
  });

  it('when a conversation body breaks a rule, then 400 names the field (title of 257 characters, mode outside fast/think)', async () => {
    const cases: [unknown, RegExp][] = [
      [{ title: 't'.repeat(257) }, /^title: must be at most 256 characters/],
      [{ title: 'a\nb' }, /^title: must not contain control characters/],
      [{ title: 42 }, /^title: must be a string/],
      [{ mode: 'slow' }, /^mode: must be one of fast, think/],
      [{ mode: null }, /^mode: must be one of fast, think/],
      [{ messages: [] }, /messages: unknown field/],
    ];
    const before = await convCol().countDocuments({ accountId });
    for (const [body, message] of cases) await expect400(api.post('/conversations', body), message);
    expect(await convCol().countDocuments({ accountId })).to.equal(before); // none of them was stored
    const c = await create();
    await expect400(
      api.patch(`/conversations/${c.id}`, { title: 't'.repeat(257) }),
      /^title: must be at most 256 characters/,
    );
    await expect400(api.patch(`/conversations/${c.id}`, { mode: 'turbo' }), /^mode: must be one of fast, think/);
    await expect400(api.patch(`/conversations/${c.id}`, {}), /name a field to change: title or mode/);
    await expect400(api.patch(`/conversations/${c.id}`, { messageCount: 3 }), /messageCount: unknown field/);
    expect(await convCol().findOne({ _id: c.id })).to.include({ title: null, mode: null, version: 1 });
  });

  it('when a conversation is patched, then only the passed fields change, null clears, and a stale If-Match is 412 precondition_failed', async () => {
    const c = await create({ title: 'Old', mode: 'fast' });
    const r = await api.patch(`/conversations/${c.id}`, { title: 'New' });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ title: 'New', mode: 'fast', version: 2 });
    expect(r.headers.get('etag')).to.equal('"2"');
    const m = await api.patch(`/conversations/${c.id}`, { mode: 'think' }, { 'if-match': '"2"' });
    expect(m.body).to.include({ title: 'New', mode: 'think', version: 3 });
    const stale = await api.patch(`/conversations/${c.id}`, { title: 'lost' }, { 'if-match': '"2"' });
    expect(stale.status).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    const cleared = await api.patch(`/conversations/${c.id}`, { title: null, mode: null });
    expect(cleared.body).to.include({ title: null, mode: null, version: 4 });
    const got = await api.get(`/conversations/${c.id}`);
    expect(got.status).to.equal(200);
    expect(got.body).to.deep.equal(cleared.body);
    expect(await convCol().findOne({ _id: c.id })).to.include({ title: null, mode: null, version: 4 });
    expect((await api.patch('/conversations/conv_00000000000000000000', { title: 'x' })).status).to.equal(404);
  });

  it('when appendMessage is called, then messages get sequence numbers 1, 2, 3…, the conversation counts them atomically, and GET …/messages lists them', async () => {
    const c = await create({ title: 'Chat' });
    const artifact = {
      type: 'flowchart' as const,
      title: 'Onboarding',
      projectId: 'prj_1',
      projectType: 'chart' as const,
      openUrl: 'http://localhost/editor/prj_1',
      data: { nodes: 4 },
    };
    const m1 = await repo
      .forAccount(accountId)
      .appendMessage(c.id, { role: 'user', content: 'Draw the onboarding flow' });
    const m2 = await repo.forAccount(accountId).appendMessage(c.id, {
      role: 'assistant',
      content: 'Here it is.',
      artifacts: [artifact],
      engine: { assistantName: 'svc', lab: 'local', labName: 'Local', model: 'rule-v1' },
      usage: { inputTokens: 12, outputTokens: 30 },
    });
    expect([m1.seq, m2.seq]).to.deep.equal([1, 2]);
    expect(m1.engine).to.equal(null);
    expect(m1.usage).to.equal(null);
    expect(m1.artifacts).to.deep.equal([]);
    const got = (await api.get(`/conversations/${c.id}`)).body;
    expect(got).to.include({ messageCount: 2, lastMessageAt: m2.createdAt.toISOString(), version: 1 });
    const list = await api.get(`/conversations/${c.id}/messages`);
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(2);
    for (const m of list.body.data) expect(() => Message.parse(m)).to.not.throw();
    expect(list.body.data[0]).to.deep.equal({
      id: m1._id,
      conversationId: c.id,
      seq: 1,
      role: 'user',
      content: 'Draw the onboarding flow',
      artifacts: [],
      engine: null,
      usage: null,
      createdAt: m1.createdAt.toISOString(),
    });
    expect(list.body.data[1]).to.include({ id: m2._id, seq: 2, role: 'assistant' });
    expect(list.body.data[1].artifacts).to.deep.equal([artifact]);
    expect(list.body.data[1].usage).to.deep.equal({ inputTokens: 12, outputTokens: 30 });
    expect(list.body.data[1].id).to.match(/^msg_/);

    // Twenty at once: every one numbered once, none lost.
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        repo.forAccount(accountId).appendMessage(c.id, { role: i % 2 ? 'assistant' : 'user', content: `n${i}` }),
      ),
    );
    const docs = await msgCol().find({ conversationId: c.id }).toArray();
    expect(docs.map((d: any) => d.seq).sort((a: number, b: number) => a - b)).to.deep.equal(
      Array.from({ length: 22 }, (_, i) => i + 1),
    );
    expect(await convCol().findOne({ _id: c.id })).to.include({ messageCount: 22, lastSeq: 22 });
  });

  it('when appendMessage gets a bad message or a conversation that is not the caller’s, then it refuses and stores nothing', async () => {
    const c = await create();
    const other = await stack.createAccount();
    const bad: [unknown, RegExp][] = [
      [{ role: 'robot', content: 'x' }, /^message\.role: /],
      [{ role: 'user' }, /^message\.content: /],
      [{ role: 'user', content: 'a\u0000b' }, /^message\.content: must not contain NUL/],
      [
        { role: 'assistant', content: 'x', artifacts: [{ type: 'hologram', title: 't' }] },
        /^message\.artifacts\.0\.type: /,
      ],
      [
        { role: 'assistant', content: 'x', artifacts: [{ type: 'image', title: 't', data: { $where: 1 } }] },
        /^message\.artifacts\.0\.data: "\$where": field names must not start with \$/,
      ],
      [
        { role: 'assistant', content: 'x', usage: { inputTokens: -1, outputTokens: 0 } },
        /^message\.usage\.inputTokens: /,
      ],
      [{ role: 'user', content: 'x', extra: 1 }, /^message: unknown field extra/],
    ];
    for (const [m, message] of bad) {
      const err = await repo
        .forAccount(accountId)
        .appendMessage(c.id, m as never)
        .then(
          () => null,
          (e) => e,
        );
      expect(err, JSON.stringify(m)).to.have.property('code', 'validation_error');
      expect(err.message).to.match(message);
    }
    for (const [acc, id] of [
      [accountId, 'conv_00000000000000000000'],
      [other.accountId, c.id],
    ] as const) {
      const err = await repo
        .forAccount(acc)
        .appendMessage(id, { role: 'user', content: 'x' })
        .then(
          () => null,
          (e) => e,
        );
      expect(err).to.have.property('code', 'not_found');
    }
    expect(await msgCol().countDocuments({ conversationId: c.id })).to.equal(0);
    expect(await convCol().findOne({ _id: c.id })).to.include({ messageCount: 0, lastSeq: 0 });
  });

  it('when messages are read page by page, then they come oldest first, each once, and ones appended while paging come at the end', async () => {
    const c = await create();
    for (let i = 1; i <= 7; i++)
      await repo.forAccount(accountId).appendMessage(c.id, { role: i % 2 ? 'user' : 'assistant', content: `m${i}` });
    const first = await api.get(`/conversations/${c.id}/messages?limit=3`);
    expect(first.body.data.map((m: any) => m.content)).to.deep.equal(['m1', 'm2', 'm3']);
    expect(first.body.total).to.equal(7);
    expect(first.body.cursor).to.be.a('string');
    await repo.forAccount(accountId).appendMessage(c.id, { role: 'user', content: 'm8' });
    const rest: string[] = [];
    let cursor: string | undefined = first.body.cursor;
    while (cursor) {
      const r = await api.get(`/conversations/${c.id}/messages?limit=3&cursor=${cursor}`);
      rest.push(...r.body.data.map((m: any) => m.content));
      cursor = r.body.cursor;
    }
    expect(rest).to.deep.equal(['m4', 'm5', 'm6', 'm7', 'm8']);
    expect((await allMessages(c.id, 100)).map((m) => m.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
    await expect400(api.get(`/conversations/${c.id}/messages?limit=101`), /^limit: must be between 1 and 100/);
    await expect400(api.get(`/conversations/${c.id}/messages?cursor=abc`), /^cursor: /);
    const other = await create();
    await expect400(api.get(`/conversations/${other.id}/messages?cursor=${first.body.cursor}`), /^cursor: /);
    expect((await api.get('/conversations/conv_00000000000000000000/messages')).status).to.equal(404);
  });

  it('when conversations are listed, then the envelope pages newest activity first, and a new message moves its conversation to the top', async () => {
    const { key, accountId: acc } = await stack.createAccount();
    const own = client(stack.baseUrl, key);
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await create({ title: `c${i}` }, own));
    const titles = async (limit: number) => {
      const out: string[] = [];
      let cursor: string | undefined;
      do {
        const r = await own.get(`/conversations?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).to.equal(200);
        expect(r.body.total).to.equal(5);
        out.push(...r.body.data.map((c: any) => c.title));
        cursor = r.body.cursor;
      } while (cursor);
      return out;
    };
    expect(await titles(2)).to.deep.equal(['c4', 'c3', 'c2', 'c1', 'c0']);
    await repo.forAccount(acc).appendMessage(made[1].id, { role: 'user', content: 'hi' });
    expect(await titles(3)).to.deep.equal(['c1', 'c4', 'c3', 'c2', 'c0']);
    await own.patch(`/conversations/${made[0].id}`, { title: 'c0 renamed' }); // a rename is not activity
    expect((await titles(10)).at(-1)).to.equal('c0 renamed');
    await expect400(own.get('/conversations?limit=101'), /^limit: must be between 1 and 100/);
    await expect400(own.get('/conversations?cursor=zzz'), /^cursor: /);
  });

  it('when a conversation is deleted, then 204, its messages are gone from the collection, and it answers 404 after', async () => {
    const c = await create();
    const keep = await create();
    for (let i = 0; i < 3; i++)
      await repo.forAccount(accountId).appendMessage(c.id, { role: 'user', content: `x${i}` });
    await repo.forAccount(accountId).appendMessage(keep.id, { role: 'user', content: 'stay' });
    const r = await api.delete(`/conversations/${c.id}`);
    expect(r.status).to.equal(204);
    expect(r.text).to.equal('');
    expect(await msgCol().countDocuments({ conversationId: c.id })).to.equal(0);
    expect(await convCol().countDocuments({ _id: c.id })).to.equal(0);
    expect(await msgCol().countDocuments({ conversationId: keep.id })).to.equal(1);
    expect((await api.get(`/conversations/${c.id}`)).status).to.equal(404);
    expect((await api.get(`/conversations/${c.id}/messages`)).status).to.equal(404);
    expect((await api.delete(`/conversations/${c.id}`)).status).to.equal(404);
    const late = await repo
      .forAccount(accountId)
      .appendMessage(c.id, { role: 'user', content: 'late' })
      .then(
        () => null,
        (e) => e,
      );
    expect(late).to.have.property('code', 'not_found');
  });

  it("when a second account uses the first account's ids on every conversations route, then each answers 404 and never their data", async () => {
    const c = await create({ title: 'Secret chat' });
    await repo.forAccount(accountId).appendMessage(c.id, { role: 'user', content: 'Secret message' });
    const intruder = client(stack.baseUrl, (await stack.createAccount()).key);
    const calls: [string, Promise<{ status: number; text: string }>][] = [
      ['getConversation', intruder.get(`/conversations/${c.id}`)],
      ['updateConversation', intruder.patch(`/conversations/${c.id}`, { title: 'mine' })],
      ['listConversationMessages', intruder.get(`/conversations/${c.id}/messages`)],
      ['deleteConversation', intruder.delete(`/conversations/${c.id}`)],
    ];
    for (const [name, p] of calls) {
      const r = await p;
      expect(r.status, name).to.equal(404);
      expect(r.text, name).to.not.include('Secret');
    }
    const list = await intruder.get('/conversations');
    expect(list.body).to.deep.equal({ data: [], total: 0 });
    const still = await api.get(`/conversations/${c.id}`);
    expect(still.body).to.include({ title: 'Secret chat', version: 1, messageCount: 1 });
  });

  it('when a key lacks the scope, then GETs need read and writes need write (403)', async () => {
    const c = await create();
    const reader = client(stack.baseUrl, (await stack.createAccount({ scopes: ['read'] })).key);
    const writer = client(stack.baseUrl, (await stack.createAccount({ scopes: ['write'] })).key);
    const ai = client(stack.baseUrl, (await stack.createAccount({ scopes: ['ai'] })).key);
    for (const k of [writer, ai]) {
      for (const r of await Promise.all([
        k.get('/conversations'),
        k.get(`/conversations/${c.id}`),
        k.get(`/conversations/${c.id}/messages`),
      ]))
        expect(r.status).to.equal(403);
    }
    for (const k of [reader, ai]) {
      for (const r of await Promise.all([
        k.post('/conversations', {}),
        k.patch(`/conversations/${c.id}`, { title: 'x' }),
        k.delete(`/conversations/${c.id}`),
      ])) {
        expect(r.status).to.equal(403);
        expect(r.body.error.code).to.equal('forbidden');
      }
    }
    expect((await reader.get('/conversations')).status).to.equal(200);
    expect((await writer.post('/conversations', {})).status).to.equal(201);
  });
});
