import { expect } from 'chai';
import { XMLValidator } from 'fast-xml-parser';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { expect400 } from './helpers';

describe('templates', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    const a = await stack.createAccount();
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
  });
  after(() => stack?.stop());

  it('when templates are listed, then each kind has at least two, with a stable id, its content and a preview a person can look at', async () => {
    const r = await api.get('/templates?limit=100');
    expect(r.status, r.text).to.equal(200);
    expect(r.body.total).to.equal(r.body.data.length);
    expect(r.body).to.not.have.property('cursor'); // SPEC 2.3: present only when more pages exist
    const kinds = r.body.data.map((t: any) => t.kind);
    for (const kind of ['flowchart', 'whiteboard', 'notes', 'sheet'])
      expect(kinds.filter((k: string) => k === kind).length, kind).to.be.at.least(2);
    expect(r.body.data.map((t: any) => t.id)).to.include.members([
      'tpl_hiring_process',
      'tpl_incident_response',
      'tpl_sprint_retrospective',
      'tpl_swot_analysis',
      'tpl_meeting_notes',
      'tpl_project_brief',
    ]);
    for (const t of r.body.data) {
      expect(t.id).to.match(/^tpl_[a-z_]+$/);
      expect(t.name).to.be.a('string').and.not.equal('');
      expect(t.description).to.be.a('string').and.not.equal('');
      expect(t.projectType).to.equal(
        { flowchart: 'chart', whiteboard: 'chart', notes: 'notes', sheet: 'sheet' }[t.kind as string],
      );
      expect(t.preview.summary).to.be.a('string').and.not.equal('');
      expect(t.preview.firstLines).to.be.an('array').that.is.not.empty;
      expect(t.preview.previewSvg).to.match(/^data:image\/svg\+xml;base64,/);
      const svg = Buffer.from(t.preview.previewSvg.split(',')[1], 'base64').toString('utf8');
      expect(svg).to.match(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      expect(XMLValidator.validate(svg), `${t.id} preview is well-formed XML`).to.equal(true);
      expect(t.content).to.be.an('object');
    }
    const hiring = r.body.data.find((t: any) => t.id === 'tpl_hiring_process');
    expect(hiring.preview.counts).to.deep.equal({ nodes: 10, edges: 10, decisions: 2 });
    expect(hiring.preview.firstLines[0]).to.equal('Role approved');
    const svg = Buffer.from(hiring.preview.previewSvg.split(',')[1], 'base64').toString('utf8');
    expect(svg).to.include('>Meets the<').and.include('>requirements?<').and.include('<polygon'); // the decision diamond, its label on two lines
    const notes = r.body.data.find((t: any) => t.id === 'tpl_meeting_notes');
    expect(notes.preview.counts.headings).to.equal(6);
    expect(notes.preview.firstLines[0]).to.equal('# Meeting notes');
    const budget = r.body.data.find((t: any) => t.id === 'tpl_budget_tracker');
    expect(budget.preview.counts).to.deep.equal({ columns: 6, rows: 5 });
    expect(budget.content.columns[2]).to.deep.equal({ name: 'Planned', type: 'number' });
  });

  it('when the list is filtered and paged, then it holds the matching templates once each, and bad queries are 400', async () => {
    const all = (await api.get('/templates?limit=100')).body.data.map((t: any) => t.id);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await api.get(`/templates?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status).to.equal(200);
      expect(r.body.data.length).to.be.at.most(2);
      expect(r.body.total).to.equal(all.length);
      seen.push(...r.body.data.map((t: any) => t.id));
      cursor = r.body.cursor ?? undefined;
    } while (cursor);
    expect(seen).to.deep.equal(all);
    const notes = await api.get('/templates?kind=notes');
    expect(notes.body.data.every((t: any) => t.kind === 'notes')).to.equal(true);
    expect(notes.body.total).to.equal(notes.body.data.length);
    const charts = await api.get('/templates?projectType=chart');
    expect(new Set(charts.body.data.map((t: any) => t.kind))).to.deep.equal(new Set(['flowchart', 'whiteboard']));
    expect400(await api.get('/templates?limit=101'), 'limit');
    expect400(await api.get('/templates?cursor=abc'), 'cursor');
    expect400(await api.get('/templates?kind=poster'), 'kind');
  });

  it("when a template is used with {}, then 201 makes a project of the account with the template's name, tags and content", async () => {
    const t = (await api.get('/templates?limit=100')).body.data.find((x: any) => x.id === 'tpl_hiring_process');
    const r = await api.post('/templates/tpl_hiring_process/use', {});
    expect(r.status, r.text).to.equal(201);
    expect(r.body).to.include({
      name: 'Hiring process',
      kind: 'flowchart',
      projectType: 'chart',
      version: 1,
      description: t.description,
    });
    expect(r.body.tags).to.deep.equal(t.tags);
    expect(r.body.content).to.deep.equal(t.content);
    expect(r.body.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/editor/${r.body.id}`);
    const stored = await stack.db.db.collection<any>(COLLECTIONS.projects).findOne({ _id: r.body.id });
    expect(stored).to.include({ accountId, kind: 'flowchart' });
    expect((await api.get('/projects')).body.data.map((p: any) => p.id)).to.include(r.body.id);
    // No body at all is the same as {}.
    const bare = await api.post('/templates/tpl_hiring_process/use');
    expect(bare.status, bare.text).to.equal(201);
    expect(bare.body).to.include({ name: 'Hiring process', kind: 'flowchart' });
  });

  it('when a template is used with a name, description and tags, then the project takes them', async () => {
    const r = await api.post('/templates/tpl_meeting_notes/use', {
      name: 'Standup 3 May',
      description: 'daily',
      tags: ['standup'],
    });
    expect(r.status).to.equal(201);
    expect(r.body).to.include({ name: 'Standup 3 May', description: 'daily', kind: 'notes' });
    expect(r.body.tags).to.deep.equal(['standup']);
    expect(r.body.content.markdown).to.match(/^# Meeting notes/);
  });

  it("when every template is used, then each project's content passes its own kind's PATCH validation unchanged", async () => {
    const all = (await api.get('/templates?limit=100')).body.data.filter((t: any) => t.kind !== 'sheet');
    for (const t of all) {
      const made = await api.post(`/templates/${t.id}/use`, {});
      expect(made.status, `${t.id}: ${made.text}`).to.equal(201);
      const back = await api.patch(`/projects/${made.body.id}`, { content: made.body.content });
      expect(back.status, `${t.id}: ${back.text}`).to.equal(200);
      expect(back.body.content).to.deep.equal(made.body.content);
    }
  });

  it('when a sheet template is used, then 201 makes a sheet project whose grid holds the template columns and rows', async () => {
    const t = (await api.get('/templates?kind=sheet')).body.data.find((x: any) => x.id === 'tpl_budget_tracker');
    const r = await api.post('/templates/tpl_budget_tracker/use', { name: 'Budget 2027' });
    expect(r.status, r.text).to.equal(201);
    expect(r.body).to.include({ name: 'Budget 2027', kind: 'sheet', projectType: 'sheet', version: 1 });
    expect(r.body.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/sheets/${r.body.id}`);
    const sheet = await api.get(`/sheets/${r.body.id}`);
    expect(sheet.status, sheet.text).to.equal(200);
    expect(JSON.stringify(sheet.body)).to.include('Planned').and.include('Office rent');
    const range = await api.get(`/sheets/${r.body.id}/range?range=${encodeURIComponent('A1:F5')}`);
    expect(range.status, range.text).to.equal(200);
    expect(JSON.stringify(range.body)).to.include('Conference tickets');
    expect(t.content.rows).to.have.length(5);
  });

  it('when a sheet template use is retried with its Idempotency-Key after the first attempt died before storing the project, then the retry completes that sheet instead of 409', async () => {
    const h = { 'idempotency-key': 'tpl-sheet-crash' };
    const first = await api.post('/templates/tpl_budget_tracker/use', { name: 'Crashy' }, h);
    expect(first.status, first.text).to.equal(201);
    // As if the process had died after the grid, its creation commit and head, before the project
    // and the answer: the project goes, the key's record is in flight with its lease run out.
    await stack.db.db.collection<any>(COLLECTIONS.projects).deleteOne({ _id: first.body.id });
    const rec = await stack.db.idempotency.updateOne(
      { accountId, key: 'tpl-sheet-crash' },
      { $set: { state: 'in_flight', response: null, lockedUntil: new Date(0) } },
    );
    expect(rec.modifiedCount).to.equal(1);
    expect((await api.get('/sheets')).body.data.map((s: any) => s.id)).to.not.include(first.body.id);

    const retry = await api.post('/templates/tpl_budget_tracker/use', { name: 'Crashy' }, h);
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body).to.include({ id: first.body.id, name: 'Crashy', kind: 'sheet' });
    const sheet = await api.get(`/sheets/${first.body.id}`);
    expect(sheet.status).to.equal(200);
    expect(sheet.body).to.include({
      version: 1,
      headCommitId: (
        await stack.db.db.collection<any>(COLLECTIONS.sheetCommits).findOne({ sheetId: first.body.id, seq: 1 })
      )._id,
    });
    expect(JSON.stringify(sheet.body.rows)).to.include('Office rent');
    expect(await stack.db.db.collection(COLLECTIONS.sheetCommits).countDocuments({ sheetId: first.body.id })).to.equal(
      1,
    );
    expect(await stack.db.db.collection(COLLECTIONS.sheets).countDocuments({ _id: first.body.id })).to.equal(1);
    // The blocks of the retry's own grid were dropped: only the first attempt's remain.
    const tree = JSON.parse(
      (await stack.db.db.collection<any>(COLLECTIONS.sheets).findOne({ _id: first.body.id })).tree,
    );
    expect(await stack.db.db.collection(COLLECTIONS.sheetBlocks).countDocuments({ sheetId: first.body.id })).to.equal(
      tree.blocks.length,
    );
  });

  it('when the template is unknown or the body is wrong, then 404 or 400 naming the field', async () => {
    const r = await api.post('/templates/tpl_nope/use', {});
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal('not_found');
    expect400(await api.post('/templates/tpl..x/use', {}), 'id');
    expect400(await api.post('/templates/tpl_meeting_notes/use', { title: 'x' }), 'title: unknown field');
    expect400(await api.post('/templates/tpl_meeting_notes/use', { name: 'n'.repeat(256) }), 'name');
    expect400(await api.post('/templates/tpl_meeting_notes/use', { name: '' }), 'name: must not be empty');
    expect400(await api.post('/templates/tpl_meeting_notes/use', { tags: Array(21).fill('t') }), 'tags');
  });
});
