import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { client as httpClient, eventually, type Client as Http } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { call, mcpClient, mcpUrl, rawPost, textOf } from './helpers';
import { fromUnits, toUnits } from '../../platform/credits/credits';

const ALL_TOOLS = [
  'create_flowchart',
  'create_notes',
  'create_whiteboard',
  'create_presentation',
  'generate_image',
  'start_video',
  'start_song',
  'start_code_build',
  'start_research',
  'get_job',
  'list_projects',
  'get_project',
  'drive_list_files',
  'drive_read_file',
  'drive_search',
];
const DRIVE_TOOLS = ['drive_list_files', 'drive_read_file', 'drive_search'];

describe('MCP server (Streamable HTTP, SDK client)', () => {
  let stack: Stack;
  let acct: { accountId: string; key: string; keyId: string };
  let api: Http;
  let mcp: Client;
  const balance = async () => (await api.get('/account/credits')).body.balance as number;

  before(async () => {
    stack = await startStack();
    acct = await stack.createAccount({ credits: 1000 });
    api = httpClient(stack.baseUrl, acct.key);
    mcp = await mcpClient(stack, acct.key);
  });
  after(async () => {
    await mcp?.close();
    await stack.stop();
  });

  it('when a full-scope key lists tools, then every tool is there with an object input schema from the contract', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).to.have.members(ALL_TOOLS);
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).to.equal('object');
      expect(t.description, t.name).to.match(/Scope: /);
    }
    const notes = tools.find((t) => t.name === 'create_notes')!;
    expect(notes.inputSchema.required).to.deep.equal(['name']);
    expect(Object.keys(notes.inputSchema.properties ?? {})).to.include.members(['name', 'markdown', 'tags']);
    const song = tools.find((t) => t.name === 'start_song')!;
    expect(Object.keys(song.inputSchema.properties ?? {})).to.include.members(['style', 'tier']);
    expect(tools.find((t) => t.name === 'get_job')!.inputSchema.required).to.deep.equal(['id']);
  });

  it('when create_notes and create_flowchart are called, then the projects exist and list_projects and get_project return them', async () => {
    const notes = await call(mcp, 'create_notes', { name: 'MCP notes', markdown: '# hello from mcp' });
    expect(notes.isError, textOf(notes)).to.not.equal(true);
    expect(notes.structuredContent).to.include({ name: 'MCP notes', kind: 'notes' });
    const flow = await call(mcp, 'create_flowchart', {
      name: 'MCP flow',
      nodes: [
        { id: 'a', label: 'Start', shape: 'start' },
        { id: 'b', label: 'End', shape: 'end' },
      ],
      edges: [{ from: 'a', to: 'b' }],
    });
    expect(flow.isError, textOf(flow)).to.not.equal(true);
    const board = await call(mcp, 'create_whiteboard', { name: 'MCP board', elements: [] });
    expect(board.isError, textOf(board)).to.not.equal(true);

    const listed = await call(mcp, 'list_projects', { limit: 10 });
    expect(listed.isError, textOf(listed)).to.not.equal(true);
    expect(listed.structuredContent.data.map((p: { id: string }) => p.id)).to.include.members([
      notes.structuredContent.id,
      flow.structuredContent.id,
      board.structuredContent.id,
    ]);

    const got = await call(mcp, 'get_project', { id: notes.structuredContent.id });
    expect(got.structuredContent).to.include({ id: notes.structuredContent.id, name: 'MCP notes' });
    // The same project over REST: one service behind both.
    const rest = await api.get(`/projects/${notes.structuredContent.id}`);
    expect(rest.status).to.equal(200);
    expect(rest.body.content).to.deep.equal(got.structuredContent.content);
    expect(JSON.parse(textOf(got))).to.deep.equal(got.structuredContent);
  });

  it('when generate_image is called, then it answers the image and charges exactly what POST /images charges', async () => {
    const before = await balance();
    const r = await call(mcp, 'generate_image', { prompt: 'a lighthouse on a cliff at night' });
    expect(r.isError, textOf(r)).to.not.equal(true);
    expect(r.structuredContent.charged).to.be.a('number').above(0);
    const afterMcp = await balance();
    expect(before - afterMcp).to.equal(r.structuredContent.charged);

    const rest = await api.post('/images', { prompt: 'a lighthouse on a cliff at night' });
    expect(rest.status).to.equal(200);
    expect(rest.body.charged).to.equal(r.structuredContent.charged);
    const audit = await stack.db.audit.findOne({ accountId: acct.accountId, tool: 'generate_image' });
    expect(audit).to.include({
      via: 'mcp',
      status: 200,
      millicreditsCharged: toUnits(r.structuredContent.charged),
      route: '/mcp',
    });
  });

  it('when start_song is called, then a song_ job is charged, and get_job polls it to complete', async () => {
    const before = await balance();
    const r = await call(mcp, 'start_song', { style: 'upbeat synth pop', tier: 'fast' });
    expect(r.isError, textOf(r)).to.not.equal(true);
    expect(r.structuredContent).to.include({ type: 'song', status: 'queued' });
    expect(r.structuredContent.jobId).to.match(/^song_/);
    expect(before - (await balance())).to.equal(stack.config.CREDIT_PRICES.song);
    const done = await eventually(
      async () => {
        const j = await call(mcp, 'get_job', { id: r.structuredContent.jobId });
        return ['complete', 'failed'].includes(j.structuredContent?.status) ? j.structuredContent : undefined;
      },
      30_000,
      'the song job',
    );
    expect(done.status).to.equal('complete');
    expect(done.result.format).to.equal('wav');
  });

  it('when create_presentation, start_code_build and start_research are called, then each answers its job and the audit entry holds what was charged', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'create_presentation',
        {
          name: 'MCP deck',
          outline: [
            { title: 'One', bullets: ['a'] },
            { title: 'Two', bullets: ['b'] },
            { title: 'Three', bullets: ['c'] },
          ],
          slideMode: 'content',
        },
        /^deck_/,
      ],
      ['start_code_build', { prompt: 'a counter button', framework: 'html' }, /^code_/],
      ['start_research', { query: 'history of lighthouses' }, /^res_/],
    ];
    for (const [name, args, prefix] of cases) {
      const before = await balance();
      const r = await call(mcp, name, args);
      expect(r.isError, textOf(r)).to.not.equal(true);
      const jobId = name === 'create_presentation' ? r.structuredContent.job.jobId : r.structuredContent.jobId;
      expect(jobId, name).to.match(prefix);
      const entry = await stack.db.audit.findOne({ accountId: acct.accountId, tool: name });
      expect(fromUnits(entry!.millicreditsCharged), name).to.equal(before - (await balance()));
    }
  });

  it('when a tool that creates is called again with the same idempotencyKey, then it answers what the first call made, charged once; other arguments are refused; a malformed key is named', async () => {
    const { tools } = await mcp.listTools();
    const creating = [
      'create_flowchart',
      'create_notes',
      'create_whiteboard',
      'create_presentation',
      'start_video',
      'start_song',
      'start_code_build',
      'start_research',
    ];
    for (const t of tools) {
      expect(Object.keys(t.inputSchema.properties ?? {}).includes('idempotencyKey'), t.name).to.equal(
        creating.includes(t.name),
      );
    }

    const before = await balance();
    const args = { prompt: 'a timer', framework: 'html', idempotencyKey: 'mcp-retry-1' };
    const first = await call(mcp, 'start_code_build', args);
    expect(first.isError, textOf(first)).to.not.equal(true);
    const afterFirst = await balance();
    expect(afterFirst).to.be.below(before);
    // A client that lost the answer retries with the same key and arguments, over a new connection.
    const again = await mcpClient(stack, acct.key);
    try {
      const retry = await call(again, 'start_code_build', args);
      expect(retry.structuredContent.jobId).to.equal(first.structuredContent.jobId);
      expect(retry._meta).to.deep.include({ idempotentReplayed: true });
      expect(first._meta?.idempotentReplayed).to.equal(undefined);
      expect(await balance()).to.equal(afterFirst);
      const other = await call(again, 'start_code_build', { ...args, prompt: 'a clock' });
      expect(other.isError).to.equal(true);
      expect(other.structuredContent.error.code).to.equal('idempotency_key_reused');
      expect(other.structuredContent.error.message).to.match(/^idempotencyKey: /);
    } finally {
      await again.close();
    }
    expect(
      await stack.db.jobs.countDocuments({
        accountId: acct.accountId,
        type: 'code',
        'input.prompt': { $in: ['a timer', 'a clock'] },
      }),
    ).to.equal(1);

    // Projects too: the same notes project, not a second one.
    const n1 = await call(mcp, 'create_notes', {
      name: 'Retried notes',
      markdown: '# once',
      idempotencyKey: 'mcp-notes-1',
    });
    const n2 = await call(mcp, 'create_notes', {
      name: 'Retried notes',
      markdown: '# once',
      idempotencyKey: 'mcp-notes-1',
    });
    expect(n2.structuredContent.id).to.equal(n1.structuredContent.id);
    expect(
      await stack.db.db.collection('projects').countDocuments({ accountId: acct.accountId, name: 'Retried notes' }),
    ).to.equal(1);

    // null, as tool-calling models send for an optional argument, is no key: a new project each time.
    const nulls = await Promise.all(
      [0, 1].map(() => call(mcp, 'create_notes', { name: 'Null key notes', idempotencyKey: null })),
    );
    expect(nulls[0]!.structuredContent.id).to.not.equal(nulls[1]!.structuredContent.id);

    const bad = await call(mcp, 'start_song', { idempotencyKey: 'has a space' });
    expect(bad.isError).to.equal(true);
    expect(textOf(bad)).to.match(/^validation_error: idempotencyKey: /);
    // A tool that reads takes no such argument: get_job's strict arguments refuse it as unknown.
    const read = await call(mcp, 'get_job', { id: first.structuredContent.jobId, idempotencyKey: 'x' });
    expect(textOf(read)).to.match(/idempotencyKey: unknown field/);
  });

  it('when a start_* tool is given a schema violation, then a tool error names the field and nothing is charged', async () => {
    const before = await balance();
    const r = await call(mcp, 'start_song', { style: 42, tier: 'loud' });
    expect(r.isError).to.equal(true);
    expect(textOf(r))
      .to.match(/^validation_error: /)
      .and.match(/style/)
      .and.match(/tier/);
    expect(r.structuredContent.error.code).to.equal('validation_error');
    const unknownField = await call(mcp, 'create_notes', { name: 'x', colour: 'red' });
    expect(textOf(unknownField)).to.match(/colour: unknown field/);
    expect(await balance()).to.equal(before);
    const audit = await stack.db.audit.findOne({ accountId: acct.accountId, tool: 'start_song', status: 400 });
    expect(audit).to.include({ millicreditsCharged: 0 });
  });

  it('when a tool is called with a distinctive value, then the audit entry has the tool and argument names and no value anywhere', async () => {
    const secret = 'zq-audit-canary-7731';
    const r = await call(mcp, 'create_notes', { name: secret, markdown: `body ${secret}`, tags: [secret] });
    expect(r.isError, textOf(r)).to.not.equal(true);
    const entry = await stack.db.audit.findOne({
      accountId: acct.accountId,
      tool: 'create_notes',
      argNames: { $all: ['name', 'markdown', 'tags'] },
    });
    expect(entry).to.not.equal(null);
    expect(entry!.argNames).to.have.members(['name', 'markdown', 'tags']);
    expect(entry).to.include({
      via: 'mcp',
      route: '/mcp',
      method: 'POST',
      status: 201,
      keyId: acct.keyId,
      millicreditsCharged: 0,
    });
    expect(entry!.durationMs).to.be.a('number');
    const all = await stack.db.audit.find({ accountId: acct.accountId }).toArray();
    expect(JSON.stringify(all)).to.not.include(secret);
  });

  it("when get_project or get_job names another account's id, then a not_found tool error", async () => {
    const other = await stack.createAccount();
    const theirs = await httpClient(stack.baseUrl, other.key).post('/notes', { name: 'not yours' });
    expect(theirs.status).to.equal(201);
    const r = await call(mcp, 'get_project', { id: theirs.body.id });
    expect(r.isError).to.equal(true);
    expect(r.structuredContent.error.code).to.equal('not_found');
    const j = await call(mcp, 'get_job', { id: 'song_doesnotexist' });
    expect(j.structuredContent.error.code).to.equal('not_found');
  });

  it('when an unknown tool is called, then a JSON-RPC invalid-params error, not a 5xx, and the call is audited by argument names', async () => {
    const canary = 'zq-unknown-tool-canary-4410';
    let err: unknown;
    try {
      await call(mcp, 'delete_everything', { confirm: canary, scope: 'all' });
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.match(/unknown tool/);
    const entry = await stack.db.audit.findOne({ accountId: acct.accountId, via: 'mcp', argNames: 'confirm' });
    expect(entry).to.not.equal(null);
    expect(entry).to.include({ route: '/mcp', method: 'POST', status: 400, keyId: acct.keyId, millicreditsCharged: 0 });
    expect(entry).to.not.have.property('tool');
    expect(entry!.argNames).to.have.members(['confirm', 'scope']);
    expect(JSON.stringify(entry)).to.not.include(canary);
  });

  describe('keys and scopes', () => {
    it('when a read-only key lists tools and calls an AI or write tool anyway, then only its tools are listed, a tool error names the missing scope and nothing runs or is charged', async () => {
      const { key } = await stack.rt.accounts
        .forAccount(acct.accountId)
        .createKey({ name: 'read only', scopes: ['read'] });
      const ro = await mcpClient(stack, key);
      try {
        const names = (await ro.listTools()).tools.map((t) => t.name);
        for (const d of DRIVE_TOOLS) expect(names).to.not.include(d);
        // tools/list shows only what the key may call (SPEC §5).
        expect(names).to.have.members(['get_job', 'list_projects', 'get_project']);
        const before = await balance();
        const r = await call(ro, 'generate_image', { prompt: 'a red kite' });
        expect(r.isError).to.equal(true);
        expect(textOf(r)).to.match(/^forbidden: .*generate_image: needs ai/);
        const w = await call(ro, 'create_notes', { name: 'nope' });
        expect(textOf(w)).to.match(/needs write/);
        // Scope before validation: a bad body without the scope still says the scope.
        expect(textOf(await call(ro, 'start_song', { style: 1 }))).to.match(/needs ai/);
        const d = await call(ro, 'drive_search', { q: 'x' });
        expect(textOf(d)).to.match(/needs drive:read/);
        expect(await balance()).to.equal(before);
        const listed = await call(ro, 'list_projects', {});
        expect(listed.isError).to.not.equal(true);
      } finally {
        await ro.close();
      }
    });

    it('when a key is revoked, then its next MCP call is refused with 401', async () => {
      const { key, doc } = await stack.rt.accounts.forAccount(acct.accountId).createKey({ name: 'to revoke' });
      const c = await mcpClient(stack, key);
      try {
        expect((await call(c, 'list_projects', {})).isError).to.not.equal(true);
        await stack.rt.accounts.forAccount(acct.accountId).revokeKey(doc._id);
        let err: unknown;
        try {
          await call(c, 'list_projects', {});
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(StreamableHTTPError);
        expect((err as StreamableHTTPError).code).to.equal(401);
      } finally {
        await c.close();
      }
    });

    it('when no key or a wrong key is sent, then 401 with WWW-Authenticate and a JSON-RPC error carrying the Error shape', async () => {
      let err: unknown;
      try {
        await mcpClient(stack);
      } catch (e) {
        err = e;
      }
      expect((err as StreamableHTTPError).code).to.equal(401);
      for (const headers of [{}, { authorization: 'Bearer svc_not_a_real_key' }] as Record<string, string>[]) {
        const r = await rawPost(stack, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), headers);
        expect(r.status).to.equal(401);
        expect(r.headers.get('www-authenticate')).to.match(/^Bearer /);
        expect(r.json).to.deep.include({ jsonrpc: '2.0', id: null });
        expect(r.json.error.code).to.be.a('number');
        expect(r.json.error.data).to.include({ code: 'unauthorized' });
        expect(r.json.error.data.requestId).to.equal(r.headers.get('x-request-id'));
      }
    });

    it('when the account is on a plan without API access, then 403 plan_required', async () => {
      const free = await stack.createAccount({ plan: 'free' });
      const r = await rawPost(stack, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
        authorization: `Bearer ${free.key}`,
      });
      expect(r.status).to.equal(403);
      expect(r.json.error.data.code).to.equal('plan_required');
    });

    it('when GET or DELETE is sent, then 405 with Allow: POST (stateless server)', async () => {
      for (const method of ['GET', 'DELETE']) {
        const res = await fetch(mcpUrl(stack), {
          method,
          headers: { authorization: `Bearer ${acct.key}`, accept: 'text/event-stream' },
        });
        expect(res.status, method).to.equal(405);
        expect(res.headers.get('allow')).to.equal('POST');
        expect(((await res.json()) as { jsonrpc: string }).jsonrpc).to.equal('2.0');
      }
    });

    it('when a request carries rate-limit headers, then they count against the same per-key budget as REST', async () => {
      const r = await rawPost(stack, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), {
        authorization: `Bearer ${acct.key}`,
      });
      expect(r.status).to.equal(200);
      expect(r.headers.get('x-ratelimit-limit')).to.equal(String(stack.config.RATE_LIMIT_MAX));
      expect(Number(r.headers.get('x-ratelimit-remaining'))).to.be.below(stack.config.RATE_LIMIT_MAX);
    });
  });

  describe('Drive tools', () => {
    let folderId: string;
    let insideId: string;
    let outsideId: string;
    before(async () => {
      const f = await api.post('/drive/folders', { name: 'mcp-pinned' });
      expect(f.status, f.text).to.equal(201);
      folderId = f.body.id;
      const inside = await api.post('/drive/files', {
        name: 'inside.md',
        content: 'The quarterly walrus report says walruses like ice.',
        folderId,
      });
      expect(inside.status, inside.text).to.equal(201);
      insideId = inside.body.id;
      const outside = await api.post('/drive/files', {
        name: 'outside.txt',
        content: 'A walrus outside the pinned folder.',
      });
      outsideId = outside.body.id;
      for (const id of [insideId, outsideId]) {
        await eventually(
          async () => (await api.get(`/drive/files/${id}/text`)).body.textStatus === 'ready',
          20_000,
          'text extraction',
        );
      }
    });

    it('when a drive-scoped key lists, reads and searches, then it gets the files and their text', async () => {
      const { key } = await stack.rt.accounts
        .forAccount(acct.accountId)
        .createKey({ name: 'drive', scopes: ['drive:read'] });
      const c = await mcpClient(stack, key);
      try {
        const names = (await c.listTools()).tools.map((t) => t.name);
        expect(names).to.include.members(DRIVE_TOOLS);
        const list = await call(c, 'drive_list_files', {});
        expect(list.isError, textOf(list)).to.not.equal(true);
        expect(list.structuredContent.data.map((f: { id: string }) => f.id)).to.include.members([insideId, outsideId]);
        const read = await call(c, 'drive_read_file', { id: insideId });
        expect(read.structuredContent.content).to.include('quarterly walrus report');
        const found = await call(c, 'drive_search', { q: 'walrus' });
        expect(found.isError, textOf(found)).to.not.equal(true);
        expect(JSON.stringify(found.structuredContent)).to.include(insideId);
      } finally {
        await c.close();
      }
    });

    it('when the key is pinned to a folder, then it sees and reads only files inside it', async () => {
      const { key } = await stack.rt.accounts.forAccount(acct.accountId).createKey({
        name: 'pinned',
        scopes: ['drive:read'],
        folderPins: [folderId],
      });
      const c = await mcpClient(stack, key);
      try {
        const list = await call(c, 'drive_list_files', {});
        expect(list.structuredContent.data.map((f: { id: string }) => f.id)).to.deep.equal([insideId]);
        const outside = await call(c, 'drive_read_file', { id: outsideId });
        expect(outside.structuredContent.error.code).to.equal('not_found');
        const found = await call(c, 'drive_search', { q: 'walrus' });
        expect(JSON.stringify(found.structuredContent)).to.include(insideId).and.not.include(outsideId);
      } finally {
        await c.close();
      }
    });
  });
});

describe('MCP server: rate limit', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { RATE_LIMIT_MAX: '4', RATE_LIMIT_WINDOW_SECONDS: '3600' },
    });
  });
  after(() => stack.stop());

  it('when REST and MCP calls of one key pass the limit together, then the MCP call is refused 429 and still audited by names', async () => {
    const { accountId, key } = await stack.createAccount();
    const api = httpClient(stack.baseUrl, key);
    const listCall = (id: number) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'list_projects', arguments: { limit: 2 } },
      });
    expect((await api.get('/projects')).status).to.equal(200);
    expect((await api.get('/projects')).status).to.equal(200);
    expect((await rawPost(stack, listCall(1), { authorization: `Bearer ${key}` })).status).to.equal(200);
    expect((await rawPost(stack, listCall(2), { authorization: `Bearer ${key}` })).status).to.equal(200);
    const refused = await rawPost(stack, listCall(3), { authorization: `Bearer ${key}` });
    expect(refused.status).to.equal(429);
    expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
    expect(refused.json.error.data.code).to.equal('rate_limited');
    const entry = await stack.db.audit.findOne({ accountId, status: 429, via: 'mcp' });
    expect(entry).to.include({ tool: 'list_projects' });
    expect(entry!.argNames).to.deep.equal(['limit']);
  });
});

describe('MCP server: one rate limit with REST, no batches', () => {
  let stack: Stack;
  before(async () => {
    // A limit of 100 leases 5 units at a time: two limiters in one process would each hold their own share.
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { RATE_LIMIT_MAX: '100', RATE_LIMIT_WINDOW_SECONDS: '3600' },
    });
  });
  after(() => stack.stop());

  const notesCall = (id: number) => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'create_notes', arguments: { name: `batched ${id}` } },
  });

  it('when REST and MCP calls of one key alternate, then X-RateLimit-Remaining goes down by one on every call, REST or MCP', async () => {
    const { key } = await stack.createAccount();
    const api = httpClient(stack.baseUrl, key);
    const seen: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const rest = await api.get('/projects');
      expect(rest.status).to.equal(200);
      seen.push(Number(rest.headers.get('x-ratelimit-remaining')));
      const mcp = await rawPost(stack, JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list' }), {
        authorization: `Bearer ${key}`,
      });
      expect(mcp.status).to.equal(200);
      seen.push(Number(mcp.headers.get('x-ratelimit-remaining')));
    }
    expect(seen).to.deep.equal([99, 98, 97, 96, 95, 94]);
  });

  it('when a JSON-RPC batch is posted, then 400 Invalid Request with the Error shape, no message in it runs, and it costs no rate-limit unit', async () => {
    const { key } = await stack.createAccount();
    const api = httpClient(stack.baseUrl, key);
    const r = await rawPost(stack, JSON.stringify([notesCall(1), notesCall(2), notesCall(3)]), {
      authorization: `Bearer ${key}`,
    });
    expect(r.status, r.text).to.equal(400);
    expect(r.json).to.deep.include({ jsonrpc: '2.0', id: null });
    expect(r.json.error.code).to.equal(-32600);
    expect(r.json.error.message).to.equal('JSON-RPC batches are not supported: send one message per POST');
    expect(r.json.error.data).to.include({
      code: 'bad_request',
      message: r.json.error.message,
      requestId: r.headers.get('x-request-id'),
    });
    expect(r.headers.get('x-ratelimit-remaining')).to.equal(null);
    const listed = await api.get('/projects');
    expect(listed.body.data).to.deep.equal([]);
    expect(listed.headers.get('x-ratelimit-remaining')).to.equal('99');
  });

  it('when an empty or single-message array is posted, then it is refused as a batch too', async () => {
    const { key } = await stack.createAccount();
    for (const body of [[], [notesCall(1)]]) {
      const r = await rawPost(stack, JSON.stringify(body), { authorization: `Bearer ${key}` });
      expect(r.status, r.text).to.equal(400);
      expect(r.json.error.code).to.equal(-32600);
    }
  });
});
