import { expect } from 'chai';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { example, servedOperations, type Operation } from '../fuzz/operations';
import { createAgentsRepository } from '../../platform/agents/agents.repository';

/**
 * The tenant walk: account A makes one of everything through the API; account B (every scope,
 * plenty of credits) then calls EVERY served operation that names a resource in its path with
 * A's ids and a body that would be valid for its own resource, and must get 404 not_found with
 * nothing of A's in the answer; B's lists show none of A's ids. A's resources are read back
 * unchanged afterwards. The operations come from the served OpenAPI document, so a route added
 * later without a fixture here fails the coverage check instead of going unwalked.
 */
const SECRET = 'A-secret-7f3c';

/** Operations whose path ids are not tenant-owned (templates are built-in, shared by everyone). */
const GLOBAL = new Set(['useTemplate']);

/** A body valid for B's own resource of the same kind, so the walk reaches the ownership check. */
const BODIES: Record<string, (ids: Ids) => unknown> = {
  updateProject: () => ({ name: 'renamed by B' }),
  shareProject: () => ({ email: 'b@example.com', role: 'editor' }),
  applySheetOps: () => ({ ops: [{ op: 'set', cell: 'A1', value: 'B was here' }] }),
  editSheet: () => ({ instruction: 'sort by Name descending' }),
  resolveSheetCommit: () => ({ action: 'merge' }),
  rollbackSheet: (ids) => ({ commitId: ids.commitId }),
  updateBoard: () => ({ name: 'renamed by B' }),
  duplicateBoard: () => ({}),
  createCard: () => ({ title: 'card by B' }),
  updateCard: () => ({ title: 'renamed by B' }),
  updateConversation: () => ({ title: 'renamed by B' }),
  updateWebhook: () => ({ name: 'renamed by B' }),
  updateDriveFile: () => ({ name: 'renamed-by-b.md' }),
  updateDriveFolder: () => ({ name: 'renamed by B' }),
  messageAgent: () => ({ message: 'hello from B' }),
  runAgent: () => ({ instruction: 'work for B' }),
  approveAgentRun: () => ({ decision: 'approve', reviewToken: 'c'.repeat(64) }),
  updatePersona: () => ({ name: 'renamed by B' }),
  createPersonaDeployment: () => ({ channel: 'api' }),
  startPersonaConversation: (ids) => ({ deploymentId: ids.personaDeployment }),
};

/** Required query parameters, valid for B's own resource. */
const QUERIES: Record<string, string> = {
  getSheetRange: '?range=A1:A2',
};

interface Ids {
  project: string;
  sheet: string;
  commitId: string;
  board: string;
  card: string;
  conversation: string;
  webhook: string;
  job: string;
  research: string;
  driveFile: string;
  driveFolder: string;
  agent: string;
  agentRun: string;
  persona: string;
  personaDeployment: string;
  personaConversation: string;
}

/** A's id for each path parameter of an operation, by the resource its path names. */
function fill(op: Operation, ids: Ids): string | null {
  const byPrefix: [RegExp, Record<string, string>][] = [
    [/^\/projects\/\{id\}/, { id: ids.project }],
    [/^\/sheets\/\{id\}/, { id: ids.sheet, commitId: ids.commitId }],
    [/^\/boards\/\{id\}/, { id: ids.board, cardId: ids.card }],
    [/^\/conversations\/\{id\}/, { id: ids.conversation }],
    [/^\/webhooks\/\{id\}/, { id: ids.webhook }],
    [/^\/jobs\/\{id\}/, { id: ids.job }],
    [/^\/research\/\{jobId\}/, { jobId: ids.research }],
    [/^\/drive\/files\/\{id\}/, { id: ids.driveFile }],
    [/^\/drive\/folders\/\{id\}/, { id: ids.driveFolder }],
    [/^\/agents\/\{id\}/, { id: ids.agent, runId: ids.agentRun }],
    [/^\/personas\/\{id\}/, { id: ids.persona, cid: ids.personaConversation }],
  ];
  const hit = byPrefix.find(([re]) => re.test(op.path));
  if (!hit) return null;
  const values = hit[1];
  let missing = false;
  const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    const v = values[name];
    if (!v) missing = true;
    return v ?? '';
  });
  return missing ? null : path;
}

describe('tenant walk: another account reaches nothing of yours on any route', function () {
  this.timeout(120_000);
  let stack: Stack;
  let a: Client;
  let b: Client;
  let ids: Ids;
  let doc: any;
  let ops: Operation[];

  before(async () => {
    stack = await startStack({
      env: { WORKER_POOLS: 'code,research,sheet', ALLOW_LOOPBACK_URLS: 'true', RATE_LIMIT_MAX: '100000' },
    });
    const accA = await stack.createAccount({ credits: 1000 });
    const accountA = accA.accountId;
    a = client(stack.baseUrl, accA.key);
    b = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
    doc = (await a.get('/openapi')).body;
    ops = servedOperations(doc);

    const ok = <T>(r: { status: number; text: string; body: T }, what: string) => {
      expect(r.status, `${what}: ${r.text.slice(0, 300)}`).to.be.oneOf([200, 201, 202]);
      return r.body as any;
    };
    const project = ok(
      await a.post('/flowcharts', {
        name: `${SECRET} flow`,
        nodes: [
          { id: 'a', label: SECRET },
          { id: 'b', label: 'Done' },
        ],
        edges: [{ from: 'a', to: 'b' }],
      }),
      'flowchart',
    );
    const sheet = ok(
      await a.post('/sheets', {
        name: `${SECRET} sheet`,
        columns: [{ name: 'Name', type: 'string' }],
        rows: [[SECRET], ['other']],
      }),
      'sheet',
    );
    const commit = ok(
      await a.post(`/sheets/${sheet.id}/ops`, {
        ops: [{ op: 'set', cell: 'A2', value: `${SECRET} 2` }],
        propose: true,
      }),
      'sheet ops',
    );
    const board = ok(await a.post('/boards', { name: `${SECRET} board` }), 'board');
    const card = ok(await a.post(`/boards/${board.id}/cards`, { title: `${SECRET} card` }), 'card');
    const conversation = ok(await a.post('/conversations', { title: `${SECRET} chat` }), 'conversation');
    const webhook = ok(
      await a.post('/webhooks', {
        name: `${SECRET} hook`,
        url: 'https://127.0.0.1:9/hook',
        events: ['code_build.completed'],
      }),
      'webhook',
    );
    const job = ok(await a.post('/code-builds', { prompt: `${SECRET} todo app` }), 'code build');
    const research = ok(await a.post('/research', { query: `${SECRET} findings` }), 'research');
    const driveFolder = ok(await a.post('/drive/folders', { name: `${SECRET} folder` }), 'drive folder');
    const driveFile = ok(
      await a.post('/drive/files', { name: `${SECRET}.md`, content: `# ${SECRET}`, folderId: driveFolder.id }),
      'drive file',
    );
    // Agents are defined by script (no create route); the run stays queued (no agent pool here).
    const agent = await createAgentsRepository(stack.rt.store)
      .forAccount(accountA)
      .upsert({
        name: `${SECRET} agent`,
        instructions: SECRET,
        tools: ['create_notes'],
        creditBudget: 50,
      });
    const agentRun = ok(
      await a.post(`/agents/${agent._id}/messages`, { message: `${SECRET} message` }),
      'agent message',
    );
    const persona = ok(
      await a.post('/personas', {
        name: `${SECRET} persona`,
        instructions: SECRET,
        greeting: SECRET,
        faceId: 'aurora',
      }),
      'persona',
    );
    ok(await a.post(`/personas/${persona.id}/publish`), 'persona publish');
    const personaDeployment = ok(
      await a.post(`/personas/${persona.id}/deployments`, { channel: 'api', name: `${SECRET} deployment` }),
      'persona deployment',
    );
    const personaConversation = ok(
      await a.post(`/personas/${persona.id}/conversations`, { deploymentId: personaDeployment.id }),
      'persona conversation',
    );
    await waitForJob(a, job.jobId);
    ids = {
      project: project.id,
      sheet: sheet.id,
      commitId: commit.commit?.id ?? commit.id,
      board: board.id,
      card: card.id,
      conversation: conversation.id,
      webhook: webhook.id,
      job: job.jobId,
      research: research.jobId,
      driveFile: driveFile.id,
      driveFolder: driveFolder.id,
      agent: agent._id,
      agentRun: agentRun.runId,
      persona: persona.id,
      personaDeployment: personaDeployment.id,
      personaConversation: personaConversation.id,
    };
    expect(ids.commitId, 'a commit id').to.be.a('string');
  });
  after(() => stack?.stop());

  it("when B calls every served operation with A's ids, then each answers 404 not_found and shows nothing of A", async () => {
    const walked: string[] = [];
    const unwalked: string[] = [];
    const leaks: string[] = [];
    for (const op of ops.filter((o) => o.pathParams.length && !GLOBAL.has(o.id))) {
      const path = fill(op, ids);
      if (!path) {
        unwalked.push(`${op.id} ${op.path}`);
        continue;
      }
      const body = op.body ? (BODIES[op.id]?.(ids) ?? example(doc, op.body)) : undefined;
      const r = await b.call(op.method, path + (QUERIES[op.id] ?? ''), body);
      walked.push(op.id);
      if (r.status !== 404 || r.body?.error?.code !== 'not_found' || r.text.includes(SECRET))
        leaks.push(`${op.method} ${path} → ${r.status} ${r.text.slice(0, 200)}`);
    }
    // POST /chat names its conversation in the body, not the path.
    const chat = await b.post('/chat', {
      conversationId: ids.conversation,
      message: 'add a step to that flowchart',
      stream: false,
    });
    walked.push('chat');
    if (chat.status !== 404 || chat.body?.error?.code !== 'not_found' || chat.text.includes(SECRET))
      leaks.push(`POST /chat {conversationId: A's} → ${chat.status} ${chat.text.slice(0, 200)}`);
    expect(unwalked, 'operations with path ids the walk has no fixture for').to.deep.equal([]);
    expect(leaks).to.deep.equal([]);
    expect(walked.length).to.be.at.least(30);
  });

  it("when B lists every collection, then none of A's resources appear", async () => {
    const lists = ops.filter(
      (o) =>
        o.method === 'GET' &&
        !o.pathParams.length &&
        /^\/(projects|sheets|boards|conversations|webhooks|templates|drive\/files|drive\/folders|personas)$/.test(
          o.path,
        ),
    );
    expect(lists.map((o) => o.path)).to.include.members([
      '/projects',
      '/sheets',
      '/boards',
      '/conversations',
      '/webhooks',
      '/drive/files',
      '/drive/folders',
      '/personas',
    ]);
    for (const op of lists) {
      const r = await b.get(op.path);
      expect(r.status, op.path).to.equal(200);
      expect(r.text, op.path).to.not.include(SECRET);
      for (const id of Object.values(ids)) expect(r.text, `${op.path} lists ${id}`).to.not.include(id);
    }
    const search = await b.get(`/drive/search?q=${encodeURIComponent(SECRET)}`);
    expect(search.status, search.text).to.equal(200);
    expect(search.body.data).to.deep.equal([]);
  });

  it("when the walk is over, then A's resources are unchanged", async () => {
    const project = await a.get(`/projects/${ids.project}`);
    expect(project.body).to.include({ name: `${SECRET} flow`, version: 1 });
    expect(project.body.shares ?? []).to.deep.equal([]);
    const board = await a.get(`/boards/${ids.board}`);
    expect(board.body).to.include({ name: `${SECRET} board`, version: 1 });
    const card = (await a.get(`/boards/${ids.board}/cards`)).body.data;
    expect(card.map((c: any) => c.title)).to.deep.equal([`${SECRET} card`]);
    const conversation = await a.get(`/conversations/${ids.conversation}`);
    expect(conversation.body).to.include({ title: `${SECRET} chat`, version: 1, messageCount: 0 });
    const webhook = await a.get(`/webhooks/${ids.webhook}`);
    expect(webhook.body.name).to.equal(`${SECRET} hook`);
    const commit = await a.get(`/sheets/${ids.sheet}/commits/${ids.commitId}`);
    expect(commit.body.status).to.equal('proposed');
    const file = await a.get(`/drive/files/${ids.driveFile}`);
    expect(file.body).to.include({ name: `${SECRET}.md`, folderId: ids.driveFolder, trashedAt: null });
    const persona = await a.get(`/personas/${ids.persona}`);
    expect(persona.body).to.include({
      name: `${SECRET} persona`,
      status: 'published',
      publishedVersion: 1,
      version: 2,
    });
    expect((await a.get(`/personas/${ids.persona}/deployments`)).body.total).to.equal(1);
    const events = await a.get(`/personas/${ids.persona}/conversations/${ids.personaConversation}/events`);
    expect(events.body.data.map((e: any) => e.type)).to.deep.equal(['started']);
    const run = await a.get(`/agents/${ids.agent}/runs/${ids.agentRun}/result`);
    expect(run.body).to.include({ status: 'queued', pendingApproval: null });
    expect((await a.get(`/agents/${ids.agent}/runs`)).body.total).to.equal(1);
    const rows = await a.get(`/sheets/${ids.sheet}/range?range=A1:A2`);
    expect(JSON.stringify(rows.body)).to.include(SECRET).and.not.include('B was here');
  });
});
