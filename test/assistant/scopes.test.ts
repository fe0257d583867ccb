import type { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'chai';
import { fakeOpenAi } from '../chat/fake-openai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { call, mcpClient, textOf } from '../mcp/helpers';

/**
 * Tool scopes (SPEC §5) through the HTTP API: a key with only `ai` may make new things through
 * the assistant, POST /live/action and MCP, but may not list projects, read the balance, change
 * an existing flowchart or add to an existing conversation; a key with ai, read and write may.
 * The chat engine is the OpenAI-compatible one against a local fake provider, scripted per test.
 */
describe('tool scopes: /live/action, /chat and MCP refuse what the key may not do', function () {
  this.timeout(120_000);
  let stack: Stack;
  let provider: Awaited<ReturnType<typeof fakeOpenAi>>;
  let owner: Client;
  let aiOnlyKey: string;
  let aiOnly: Client;
  let fullKey: string;
  let full: Client;
  let flowId: string;
  let conversationId: string;
  const mcps: McpClient[] = [];

  before(async () => {
    provider = await fakeOpenAi();
    stack = await startStack({
      scheduler: false,
      env: {
        CHAT_ENGINE: 'openai',
        CHAT_MODEL: 'fake-chat-1',
        OPENAI_BASE_URL: provider.url,
        OPENAI_API_KEY: 'sk-test',
        CHAT_TIMEOUT_MS: '5000',
      },
    });
    const acct = await stack.createAccount({ credits: 500 });
    owner = client(stack.baseUrl, acct.key);
    aiOnlyKey = (await stack.rt.accounts.forAccount(acct.accountId).createKey({ name: 'ai only', scopes: ['ai'] })).key;
    aiOnly = client(stack.baseUrl, aiOnlyKey);
    fullKey = (
      await stack.rt.accounts
        .forAccount(acct.accountId)
        .createKey({ name: 'ai read write', scopes: ['ai', 'read', 'write'] })
    ).key;
    full = client(stack.baseUrl, fullKey);

    const flow = await owner.post('/flowcharts', {
      name: 'Secret launch plan',
      nodes: [
        { id: 'a', label: 'Draft' },
        { id: 'b', label: 'Ship' },
      ],
      edges: [{ from: 'a', to: 'b' }],
    });
    expect(flow.status, flow.text).to.equal(201);
    flowId = flow.body.id;
    provider.script(() => ({ text: 'Hello.' }));
    const chat = await owner.post('/chat', { message: 'hello', stream: false });
    expect(chat.status, chat.text).to.equal(200);
    conversationId = chat.body.conversationId;
  });
  after(async () => {
    for (const m of mcps) await m.close().catch(() => undefined);
    await stack?.stop();
    await provider?.close();
  });

  const steps = async () =>
    ((await owner.get(`/projects/${flowId}`)).body.content.nodes as { label: string }[]).map((n) => n.label);
  const messages = async () =>
    (await owner.get(`/conversations/${conversationId}/messages`)).body.data as { role: string; content: string }[];
  const balance = async () => (await owner.get('/account/credits')).body.balance as number;
  const mcp = async (key: string) => {
    const c = await mcpClient(stack, key);
    mcps.push(c);
    return c;
  };

  describe('POST /live/action', () => {
    it('when an ai-only key asks for list_projects, get_account, add_flowchart_steps or a memory tool, then 403 forbidden names the scope, and nothing is read, changed or charged', async () => {
      const before = { steps: await steps(), balance: await balance() };
      const refused: [string, Record<string, unknown>, string][] = [
        ['list_projects', {}, 'read'],
        ['get_account', {}, 'read'],
        ['add_flowchart_steps', { projectId: flowId, steps: ['Leak the plan'] }, 'write'],
        ['remember', { text: 'the door code is 1234' }, 'write'],
        ['recall', {}, 'read'],
        ['forget', { memoryId: 'mem_x' }, 'write'],
      ];
      for (const [action, params, scope] of refused) {
        const r = await aiOnly.post('/live/action', { action, params });
        expect(r.status, `${action}: ${r.text}`).to.equal(403);
        expect(r.body.error.code, action).to.equal('forbidden');
        expect(r.body.error.message, action).to.include(`needs the ${scope} scope`);
        expect(r.text, action).to.not.include('Secret launch plan');
      }
      // Scope before validation: bad params without the scope still answer the scope.
      expect(
        (await aiOnly.post('/live/action', { action: 'list_projects', params: { limit: 'many' } })).status,
      ).to.equal(403);
      expect(await steps()).to.deep.equal(before.steps);
      expect(await balance()).to.equal(before.balance);
    });

    it('when an ai-only key makes something new, then it is made as before', async () => {
      const r = await aiOnly.post('/live/action', {
        action: 'create_notes',
        params: { title: 'Fresh notes', markdown: '# Fresh' },
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.ok).to.equal(true);
      expect(r.body.artifacts[0]).to.include({ type: 'notes', title: 'Fresh notes' });
    });

    it('when a key with ai, read and write asks for the same actions, then it gets the projects, the balance and the new step', async () => {
      const listed = await full.post('/live/action', { action: 'list_projects', params: { limit: 20 } });
      expect(listed.status, listed.text).to.equal(200);
      expect(listed.body.artifacts[0].data.projects.map((p: { name: string }) => p.name)).to.include(
        'Secret launch plan',
      );
      const account = await full.post('/live/action', { action: 'get_account', params: {} });
      expect(account.status, account.text).to.equal(200);
      expect(account.body.artifacts[0].data.balance).to.be.a('number');
      const added = await full.post('/live/action', {
        action: 'add_flowchart_steps',
        params: { projectId: flowId, steps: ['Review'], after: 'Draft' },
      });
      expect(added.status, added.text).to.equal(200);
      expect(added.body.ok).to.equal(true);
      expect(await steps()).to.include('Review');
    });

    it('when an ai-only key opens a live session, then the session offers only the actions its scopes allow', async () => {
      const r = await aiOnly.post('/live/session', {});
      expect(r.status, r.text).to.equal(200);
      expect(r.body.tools).to.include.members(['create_flowchart', 'create_notes', 'generate_image', 'search_web']);
      for (const t of ['list_projects', 'get_account', 'add_flowchart_steps', 'remember', 'recall', 'forget'])
        expect(r.body.tools).to.not.include(t);
      const all = await full.post('/live/session', {});
      expect(all.body.tools).to.include.members([
        'list_projects',
        'get_account',
        'add_flowchart_steps',
        'remember',
        'recall',
        'forget',
      ]);
    });
  });

  describe('POST /chat', () => {
    it('when an ai-only key continues an existing conversation, then 403 forbidden names read and write, and no message is added', async () => {
      const before = await messages();
      const r = await aiOnly.post('/chat', { conversationId, message: 'what did we say?', stream: false });
      expect(r.status, r.text).to.equal(403);
      expect(r.body.error.code).to.equal('forbidden');
      expect(r.body.error.message).to.match(/conversationId: .*read and write/);
      expect(await messages()).to.deep.equal(before);
    });

    it("when the model of an ai-only key's turn asks to change the flowchart or list projects, then it was not offered those tools, gets tool errors, says it may not, the turn succeeds and nothing changed", async () => {
      const before = await steps();
      let offered: string[] = [];
      provider.script((body, n) => {
        if (n === 0) {
          offered = (body.tools ?? []).map((t) => t.function.name);
          return {
            toolCalls: [
              { name: 'add_flowchart_steps', args: { projectId: flowId, steps: ['Leak the plan'] } },
              { name: 'list_projects', args: {} },
            ],
          };
        }
        const errors = body.messages
          .filter((m) => m.role === 'tool')
          .map((m) => JSON.parse(String(m.content)) as { type: string; data: { message: string } });
        return { text: `I may not: ${errors.map((e) => e.data.message).join(' / ')}` };
      });
      const r = await aiOnly.post('/chat', {
        message: `add a step "Leak the plan" to ${flowId} and list my projects`,
        stream: false,
      });
      expect(r.status, r.text).to.equal(200);
      expect(offered).to.include('create_flowchart');
      expect(offered).to.not.include('add_flowchart_steps');
      const [edit, list] = r.body.message.artifacts as { type: string; data: { code: string } }[];
      expect(edit).to.deep.include({ type: 'error' });
      expect(edit!.data.code).to.equal('forbidden');
      expect(list!.type).to.equal('error');
      expect(r.body.message.content).to.match(/I may not: .*needs the write scope/);
      expect(r.text).to.not.include('Secret launch plan');
      expect(await steps()).to.deep.equal(before);
    });

    it('when a key with ai, read and write continues the conversation and the model adds a step, then the messages and the flowchart change', async () => {
      const before = await messages();
      let offered: string[] = [];
      provider.script((body, n) => {
        if (n === 0) {
          offered = (body.tools ?? []).map((t) => t.function.name);
          return { toolCalls: [{ name: 'add_flowchart_steps', args: { projectId: flowId, steps: ['Celebrate'] } }] };
        }
        return { text: 'Added.' };
      });
      const r = await full.post('/chat', { conversationId, message: 'add a step Celebrate at the end', stream: false });
      expect(r.status, r.text).to.equal(200);
      expect(offered).to.include('add_flowchart_steps');
      expect(r.body.message.artifacts[0]).to.include({ type: 'flowchart', projectId: flowId });
      expect(await steps()).to.include('Celebrate');
      const after = await messages();
      expect(after).to.have.length(before.length + 2);
      expect(after.at(-2)).to.include({ role: 'user', content: 'add a step Celebrate at the end' });
    });
  });

  describe('MCP', () => {
    it('when an ai-only key lists tools, then only its tools are listed, and a call of list_projects or get_project is refused', async () => {
      const c = await mcp(aiOnlyKey);
      const names = (await c.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['generate_image', 'start_research', 'get_job']);
      for (const t of ['list_projects', 'get_project', 'create_flowchart', 'create_notes', 'drive_search'])
        expect(names).to.not.include(t);
      const listed = await call(c, 'list_projects', {});
      expect(listed.isError).to.equal(true);
      expect(textOf(listed)).to.match(/^forbidden: .*needs read/);
      const got = await call(c, 'get_project', { id: flowId });
      expect(got.isError).to.equal(true);
      expect(textOf(got)).to.not.include('Secret launch plan');
    });

    it('when a key with ai, read and write lists tools, then it sees and can call list_projects', async () => {
      const c = await mcp(fullKey);
      const names = (await c.listTools()).tools.map((t) => t.name);
      expect(names).to.include.members(['list_projects', 'get_project', 'create_flowchart', 'generate_image']);
      expect(names).to.not.include('drive_search');
      const listed = await call(c, 'list_projects', { limit: 50 });
      expect(listed.isError, textOf(listed)).to.not.equal(true);
      expect(listed.structuredContent.data.map((p: { id: string }) => p.id)).to.include(flowId);
    });
  });
});
