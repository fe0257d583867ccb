import { expect } from 'chai';
import { PROJECT_LIMITS } from '../../contracts/projects';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { listenToEvents } from '../helpers/events';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { createWebhook, startReceiver, verifySignature, type Receiver } from '../webhooks/helpers';
import { expect400, flowchartBody, make } from './helpers';

describe('project sharing and project events', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  let bus: Awaited<ReturnType<typeof listenToEvents>>;
  let rcv: Receiver | undefined;
  before(async () => {
    // Only the webhook pool: project events go through the events exchange to subscriptions.
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'webhook', ALLOW_LOOPBACK_URLS: 'true' } });
    const a = await stack.createAccount();
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
    bus = await listenToEvents(stack.config, 'project.*');
  });
  after(async () => {
    await bus?.close();
    await rcv?.close();
    await stack?.stop();
  });
  const ofProject = (name: string, id: string) => (e: { routingKey: string; body: any }) =>
    e.routingKey === name && e.body.data.projectId === id;

  describe('POST /projects/{id}/share', () => {
    it('when a project is shared, then 200 answers it with the share, the version goes up, and re-sharing the same email changes the role instead of adding one', async () => {
      const p = await make(api, '/notes', { name: 'shared notes' });
      const r = await api.post(`/projects/${p.id}/share`, { email: 'Ann@Example.com', role: 'viewer' });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.version).to.equal(2);
      expect(r.headers.get('etag')).to.equal('"2"');
      expect(r.body.shares).to.have.length(1);
      expect(r.body.shares[0]).to.include({ email: 'ann@example.com', role: 'viewer' });
      const sharedAt = r.body.shares[0].sharedAt;
      expect(sharedAt).to.match(/^\d{4}-\d{2}-\d{2}T/);

      const again = await api.post(`/projects/${p.id}/share`, { email: 'ANN@example.com', role: 'editor' });
      expect(again.status).to.equal(200);
      expect(again.body.shares).to.deep.equal([{ email: 'ann@example.com', role: 'editor', sharedAt }]);
      expect(again.body.version).to.equal(3);

      const same = await api.post(`/projects/${p.id}/share`, { email: 'ann@example.com', role: 'editor' });
      expect(same.status).to.equal(200);
      expect(same.body.version).to.equal(3); // nothing changed

      const two = await api.post(`/projects/${p.id}/share`, { email: 'bob@example.com', role: 'commenter' });
      expect(two.body.shares.map((s: any) => [s.email, s.role])).to.deep.equal([
        ['ann@example.com', 'editor'],
        ['bob@example.com', 'commenter'],
      ]);
      expect((await api.get(`/projects/${p.id}`)).body.shares).to.deep.equal(two.body.shares);
      const stored = await stack.db.db.collection<any>(COLLECTIONS.projects).findOne({ _id: p.id });
      expect(stored.shares.map((s: any) => s.email)).to.deep.equal(['ann@example.com', 'bob@example.com']);
      expect(stored.shares[0].sharedAt).to.be.an.instanceOf(Date);
    });

    it('when the project is shared with the most people allowed, then a new email is 409 limit_exceeded while a role change still works', async () => {
      const p = await make(api, '/notes', { name: 'popular' });
      const shares = Array.from({ length: PROJECT_LIMITS.sharesMax }, (_, i) => ({
        email: `p${i}@example.com`,
        role: 'viewer',
        sharedAt: new Date(),
      }));
      await stack.db.db.collection<any>(COLLECTIONS.projects).updateOne({ _id: p.id }, { $set: { shares } });
      const over = await api.post(`/projects/${p.id}/share`, { email: 'one-more@example.com', role: 'viewer' });
      expect(over.status).to.equal(409);
      expect(over.body.error.code).to.equal('limit_exceeded');
      expect(over.body.error.message).to.include('50');
      const change = await api.post(`/projects/${p.id}/share`, { email: 'p7@example.com', role: 'editor' });
      expect(change.status).to.equal(200);
      expect(change.body.shares).to.have.length(PROJECT_LIMITS.sharesMax);
      expect(change.body.shares[7]).to.include({ email: 'p7@example.com', role: 'editor' });
    });

    it('when ten people are shared with at once, then every one of them is listed once', async () => {
      const p = await make(api, '/notes', { name: 'busy' });
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          api.post(`/projects/${p.id}/share`, { email: `c${i}@example.com`, role: 'viewer' }),
        ),
      );
      expect(rs.map((r) => r.status)).to.deep.equal(Array(10).fill(200));
      const got = (await api.get(`/projects/${p.id}`)).body;
      expect(got.shares.map((s: any) => s.email).sort()).to.deep.equal(
        Array.from({ length: 10 }, (_, i) => `c${i}@example.com`).sort(),
      );
      expect(got.version).to.equal(11);
    });

    it('when the share body is wrong or If-Match is stale, then 400 naming the field or 412, and nothing changes', async () => {
      const p = await make(api, '/notes', { name: 'n' });
      expect400(
        await api.post(`/projects/${p.id}/share`, { email: 'not-an-email', role: 'viewer' }),
        'email: must be an email address',
      );
      expect400(
        await api.post(`/projects/${p.id}/share`, { email: 'a@example.com', role: 'owner' }),
        'role: must be one of viewer, commenter, editor',
      );
      expect400(await api.post(`/projects/${p.id}/share`, { email: 'a@example.com' }), 'role');
      expect400(await api.post(`/projects/${p.id}/share`, { role: 'viewer' }), 'email: is required');
      expect400(
        await api.post(`/projects/${p.id}/share`, { email: 'a@example.com', role: 'viewer', note: 'hi' }),
        'note: unknown field',
      );
      const stale = await api.post(
        `/projects/${p.id}/share`,
        { email: 'a@example.com', role: 'viewer' },
        { 'if-match': '"7"' },
      );
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      expect(
        (await api.post('/projects/prj_aaaaaaaaaaaaaaaaaaaa/share', { email: 'a@example.com', role: 'viewer' })).status,
      ).to.equal(404);
      const now = (await api.get(`/projects/${p.id}`)).body;
      expect(now.shares).to.deep.equal([]);
      expect(now.version).to.equal(1);
      const ok = await api.post(
        `/projects/${p.id}/share`,
        { email: 'a@example.com', role: 'viewer' },
        { 'if-match': '"1"' },
      );
      expect(ok.status).to.equal(200);
    });
  });

  describe('events', () => {
    it('when projects of every kind are created, patched, shared and deleted, then project.created, .updated, .shared and .deleted reach the events exchange with their data', async () => {
      const f = await make(api, '/flowcharts', flowchartBody());
      const created = await bus.waitFor(ofProject('project.created', f.id));
      expect(created.body).to.include({ event: 'project.created', accountId });
      expect(created.body.data).to.deep.equal({
        projectId: f.id,
        kind: 'flowchart',
        projectType: 'chart',
        name: 'Deploy',
        openUrl: f.openUrl,
      });
      const fromTemplate = await api.post('/templates/tpl_swot_analysis/use', {});
      expect((await bus.waitFor(ofProject('project.created', fromTemplate.body.id))).body.data).to.include({
        kind: 'whiteboard',
      });

      await api.patch(`/projects/${f.id}`, { name: 'Deploy v2', isStarred: true });
      const updated = await bus.waitFor(ofProject('project.updated', f.id));
      expect(updated.body.data).to.deep.equal({
        projectId: f.id,
        kind: 'flowchart',
        projectType: 'chart',
        changedFields: ['name', 'isStarred'],
        version: 2,
      });

      await api.post(`/projects/${f.id}/share`, { email: 'dana@example.com', role: 'commenter' });
      const shared = await bus.waitFor(ofProject('project.shared', f.id));
      expect(shared.body.data).to.deep.equal({
        projectId: f.id,
        kind: 'flowchart',
        projectType: 'chart',
        email: 'dana@example.com',
        role: 'commenter',
        previousRole: null,
        version: 3,
      });
      await api.post(`/projects/${f.id}/share`, { email: 'dana@example.com', role: 'editor' });
      const reshared = await bus.waitFor((e) => ofProject('project.shared', f.id)(e) && e.body.data.role === 'editor');
      expect(reshared.body.data).to.include({ previousRole: 'commenter', version: 4 });

      expect((await api.delete(`/projects/${f.id}`)).status).to.equal(204);
      const deleted = await bus.waitFor(ofProject('project.deleted', f.id));
      expect(deleted.body.data).to.deep.equal({
        projectId: f.id,
        kind: 'flowchart',
        projectType: 'chart',
        name: 'Deploy v2',
      });
      // Each stored before it was announced: the outbox holds them, published.
      const outbox = await stack.db.db
        .collection<any>(COLLECTIONS.eventOutbox)
        .find({ 'event.data.projectId': f.id })
        .toArray();
      expect(outbox.map((o) => o.event.event).sort()).to.deep.equal([
        'project.created',
        'project.deleted',
        'project.shared',
        'project.shared',
        'project.updated',
      ]);
      expect(outbox.every((o) => o.publishedAt instanceof Date)).to.equal(true);
    });

    it('when commits merge into a sheet (ops, a merged proposal, a rollback), then each is announced as project.updated with the sheet version, and the project moves to the top of GET /projects', async () => {
      const s = (
        await api.post('/sheets', {
          name: 'Stock',
          columns: [
            { name: 'Item', type: 'string' },
            { name: 'Qty', type: 'number' },
          ],
          rows: [
            ['a', 1],
            ['b', 2],
          ],
        })
      ).body;
      await make(api, '/notes', { name: 'newer' });
      const o = await api.post(`/sheets/${s.id}/ops`, { ops: [{ op: 'set', cell: 'B1', value: 5 }] });
      expect(o.status, o.text).to.equal(200);
      const first = await bus.waitFor((e) => ofProject('project.updated', s.id)(e) && e.body.data.version === 2);
      expect(first.body.data).to.deep.equal({
        projectId: s.id,
        kind: 'sheet',
        projectType: 'sheet',
        changedFields: ['content'],
        version: 2,
        commitId: o.body.commit.id,
      });
      // One update of the project: its updatedAt is the commit's time (its own version stays).
      const project = (await api.get(`/projects/${s.id}`)).body;
      expect(project.updatedAt).to.equal(o.body.commit.createdAt);
      expect(project.version).to.equal(1);
      expect((await api.get('/projects?sort=updatedAt&limit=1')).body.data[0].id).to.equal(s.id);

      const p = await api.post(`/sheets/${s.id}/ops`, { ops: [{ op: 'set', cell: 'B2', value: 7 }], propose: true });
      const m = await api.post(`/sheets/${s.id}/commits/${p.body.commit.id}/resolve`, { action: 'merge' });
      expect(m.status, m.text).to.equal(200);
      const merged = await bus.waitFor((e) => ofProject('project.updated', s.id)(e) && e.body.data.version === 3);
      expect(merged.body.data).to.include({ commitId: p.body.commit.id });
      const back = await api.post(`/sheets/${s.id}/rollback`, { commitId: s.headCommitId });
      expect(back.status, back.text).to.equal(200);
      const rolled = await bus.waitFor((e) => ofProject('project.updated', s.id)(e) && e.body.data.version === 4);
      expect(rolled.body.data).to.include({ commitId: back.body.commit.id });
      // A proposal alone changes no grid: no event of its own.
      expect(
        bus.events
          .filter(ofProject('project.updated', s.id))
          .map((e) => e.body.data.version)
          .sort(),
      ).to.deep.equal([2, 3, 4]);
    });

    it('when a request changes nothing (400, 409, re-share of the same role), then no event is sent', async () => {
      const p = await make(api, '/notes', { name: 'quiet' });
      await api.post(`/projects/${p.id}/share`, { email: 'e@example.com', role: 'viewer' });
      await bus.waitFor(ofProject('project.shared', p.id));
      await api.post(`/projects/${p.id}/share`, { email: 'e@example.com', role: 'viewer' });
      await api.patch(`/projects/${p.id}`, { name: 'x' }, { 'if-match': '"1"' });
      await api.patch(`/projects/${p.id}`, { content: { markdown: 1 } });
      await api.patch(`/projects/${p.id}`, { name: 'last' });
      await bus.waitFor(ofProject('project.updated', p.id));
      expect(bus.events.filter(ofProject('project.shared', p.id))).to.have.length(1);
      expect(bus.events.filter(ofProject('project.updated', p.id))).to.have.length(1);
    });

    it('when a webhook subscribes to the project events, then it receives each, signed, with its data', async () => {
      rcv = await startReceiver();
      const hook = await createWebhook(api, {
        url: rcv.url,
        events: ['project.created', 'project.updated', 'project.shared', 'project.deleted'],
      });
      const p = await make(api, '/whiteboards', { name: 'Hooked', elements: [] });
      await api.patch(`/projects/${p.id}`, { tags: ['t'] });
      await api.post(`/projects/${p.id}/share`, { email: 'h@example.com', role: 'viewer' });
      await api.delete(`/projects/${p.id}`);
      const got = await rcv.waitFor(4, (r) => r.body?.data?.projectId === p.id);
      expect(got.map((r) => r.body.event).sort()).to.deep.equal([
        'project.created',
        'project.deleted',
        'project.shared',
        'project.updated',
      ]);
      for (const r of got) {
        expect(await verifySignature(hook.secret, r.raw, r.headers['x-service-signature'] as string)).to.equal(true);
        expect(r.body.data).to.include({ projectId: p.id, kind: 'whiteboard', projectType: 'chart' });
      }
      expect(got.find((r) => r.body.event === 'project.updated')!.body.data.changedFields).to.deep.equal(['tags']);
      expect(got.find((r) => r.body.event === 'project.shared')!.body.data).to.include({
        email: 'h@example.com',
        role: 'viewer',
      });
    });
  });
});
