import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import type { Scope } from '../../contracts/registry';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { flowchartBody, make, whiteboardBody } from './helpers';

describe('projects: tenant isolation and scopes', function () {
  this.timeout(60_000);
  let stack: Stack;
  let owner: Client;
  let ids: string[];
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    owner = client(stack.baseUrl, (await stack.createAccount()).key);
    ids = [
      (await make(owner, '/flowcharts', flowchartBody({ name: 'Secret flow' }))).id,
      (await make(owner, '/whiteboards', whiteboardBody({ name: 'Secret board' }))).id,
      (await make(owner, '/notes', { name: 'Secret notes', markdown: 'private words' })).id,
      (await owner.post('/templates/tpl_project_brief/use', { name: 'Secret brief' })).body.id,
    ];
  });
  after(() => stack?.stop());

  it("when a second account uses the first account's project ids on every route, then each is 404 and nothing of theirs shows or changes", async () => {
    const stranger = client(stack.baseUrl, (await stack.createAccount()).key);
    await make(stranger, '/notes', { name: 'mine' });
    for (const id of ids) {
      const calls = [
        await stranger.get(`/projects/${id}`),
        await stranger.patch(`/projects/${id}`, { name: 'pwned' }),
        await stranger.patch(`/projects/${id}`, { name: 'pwned' }, { 'if-match': '"1"' }),
        await stranger.delete(`/projects/${id}`),
        await stranger.delete(`/projects/${id}`, { 'if-match': '"1"' }),
        await stranger.post(`/projects/${id}/share`, { email: 'x@example.com', role: 'editor' }),
      ];
      for (const r of calls) {
        expect(r.status, r.text).to.equal(404);
        expect(r.body.error.code).to.equal('not_found');
        expect(r.text).to.not.include('Secret');
      }
    }
    const list = await stranger.get('/projects?limit=100');
    expect(list.body.total).to.equal(1);
    expect(list.body.data.map((p: any) => p.name)).to.deep.equal(['mine']);
    for (const q of ['?q=Secret', '?kind=flowchart', '?projectType=chart', '?tag=eng', '?sort=name']) {
      const r = await stranger.get(`/projects${q}`);
      expect(r.status).to.equal(200);
      expect(r.text).to.not.include('Secret');
    }
    // The owner's cursor does not open the owner's pages for the stranger.
    const ownersPage = await owner.get('/projects?limit=1');
    const follow = await stranger.get(`/projects?limit=1&cursor=${encodeURIComponent(ownersPage.body.cursor)}`);
    expect(follow.status).to.equal(200);
    expect(follow.text).to.not.include('Secret');
    // Templates are shared by everyone; what a stranger makes from one is the stranger's.
    const made = await stranger.post('/templates/tpl_project_brief/use', {});
    expect(made.status).to.equal(201);
    expect((await owner.get(`/projects/${made.body.id}`)).status).to.equal(404);

    for (const id of ids) {
      const got = await owner.get(`/projects/${id}`);
      expect(got.status).to.equal(200);
      expect(got.body.version).to.equal(1);
      expect(got.body.name).to.match(/^Secret/);
      expect(got.body.shares).to.deep.equal([]);
    }
    expect(await stack.db.db.collection(COLLECTIONS.projects).countDocuments({ _id: { $in: ids } as never })).to.equal(
      ids.length,
    );
  });

  const routes = (
    id: string,
  ): { name: string; scope: Scope; call: (c: Client) => Promise<{ status: number; text: string }> }[] => [
    { name: 'GET /projects', scope: 'read', call: (c) => c.get('/projects') },
    { name: 'GET /projects/{id}', scope: 'read', call: (c) => c.get(`/projects/${id}`) },
    { name: 'GET /templates', scope: 'read', call: (c) => c.get('/templates') },
    { name: 'PATCH /projects/{id}', scope: 'write', call: (c) => c.patch(`/projects/${id}`, { isStarred: true }) },
    {
      name: 'POST /projects/{id}/share',
      scope: 'write',
      call: (c) => c.post(`/projects/${id}/share`, { email: 's@example.com', role: 'viewer' }),
    },
    { name: 'POST /flowcharts', scope: 'write', call: (c) => c.post('/flowcharts', flowchartBody()) },
    { name: 'POST /whiteboards', scope: 'write', call: (c) => c.post('/whiteboards', whiteboardBody()) },
    { name: 'POST /notes', scope: 'write', call: (c) => c.post('/notes', { name: 'n' }) },
    { name: 'POST /templates/{id}/use', scope: 'write', call: (c) => c.post('/templates/tpl_meeting_notes/use', {}) },
    { name: 'DELETE /projects/{id}', scope: 'write', call: (c) => c.delete(`/projects/${id}`) },
  ];

  it('when a key lacks the scope of a route, then 403 forbidden; with it, the route answers', async () => {
    const keyWith = async (scopes: Scope[]) => {
      const a = await stack.createAccount({ scopes });
      return { accountId: a.accountId, c: client(stack.baseUrl, a.key) };
    };
    const readOnly = await keyWith(['read']);
    const writeOnly = await keyWith(['write']);
    const aiOnly = await keyWith(['ai', 'drive:read', 'drive:write']);
    for (const { c, accountId } of [readOnly, writeOnly, aiOnly]) {
      // A project of each key's own account, so that an allowed call finds it.
      const now = new Date();
      const id = `prj_scope${accountId.slice(-15)}`;
      await stack.db.db.collection<any>(COLLECTIONS.projects).insertOne({
        _id: id,
        accountId,
        name: 'p',
        description: '',
        kind: 'notes',
        projectType: 'notes',
        version: 1,
        content: { markdown: '' },
        shares: [],
        canvasMode: 'notes',
        tags: [],
        isStarred: false,
        createdAt: now,
        updatedAt: now,
        deletedAt: null,
      });
      const scopes = c === readOnly.c ? ['read'] : c === writeOnly.c ? ['write'] : [];
      for (const route of routes(id)) {
        const r = await route.call(c);
        if (scopes.includes(route.scope))
          expect(r.status, `${route.name} with ${scopes}: ${r.text}`).to.be.within(200, 204);
        else {
          expect(r.status, `${route.name} with ${scopes.join(',') || 'ai'}: ${r.text}`).to.equal(403);
          expect(JSON.parse(r.text).error.code).to.equal('forbidden');
        }
      }
    }
  });
});
