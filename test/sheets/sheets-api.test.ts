import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, COLUMNS, newSheet, ROWS } from './helpers';

describe('sheets: create, list, read, range (SPEC 4.4)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, workers: false });
  });
  after(() => stack.stop());

  it('when a sheet is created, then it is a sheet project with its grid, a creation commit, listed in GET /sheets and GET /projects', async () => {
    const { api, accountId, keyId } = await account(stack);
    const r = await api.post('/sheets', {
      name: 'Fruit',
      description: 'stock',
      tags: ['q1'],
      columns: COLUMNS,
      rows: ROWS,
    });
    expect(r.status).to.equal(201);
    const s = r.body;
    expect(s.id).to.match(/^prj_/);
    expect(s).to.include({
      name: 'Fruit',
      description: 'stock',
      rowCount: 4,
      columnCount: 5,
      version: 1,
      startRow: 1,
      nextStartRow: null,
    });
    expect(s.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/sheets/${s.id}`);
    expect(s.tags).to.deep.equal(['q1']);
    expect(s.columns[3]).to.deep.equal({ letter: 'D', name: 'Date', type: 'date' });
    expect(s.rows).to.deep.equal(ROWS.map((row) => [...row]));
    expect(r.headers.get('etag')).to.equal('"1"');

    const project = await stack.db.db.collection(COLLECTIONS.projects).findOne({ _id: s.id } as never);
    expect(project).to.include({ kind: 'sheet', projectType: 'sheet', accountId, content: null });
    const head = await stack.db.db.collection(COLLECTIONS.sheets).findOne({ _id: s.id } as never);
    expect(head).to.include({ accountId, version: 1, headCommitId: s.headCommitId });
    const commit = await stack.db.db.collection(COLLECTIONS.sheetCommits).findOne({ _id: s.headCommitId } as never);
    expect(commit).to.include({
      sheetId: s.id,
      accountId,
      status: 'merged',
      seq: 1,
      source: 'create',
      authorKeyId: keyId,
      parentId: null,
    });

    const list = await api.get('/sheets');
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(1);
    expect(list.body.data[0]).to.include({ id: s.id, name: 'Fruit', rowCount: 4, version: 1 });
    expect(list.body.data[0]).to.not.have.property('rows');
    const projects = await api.get('/projects?kind=sheet');
    if (projects.status === 200) expect(projects.body.data.map((p: { id: string }) => p.id)).to.include(s.id);
  });

  it('when sheets are listed in pages, then the keyset cursor walks them newest first without repeats, also while one is added', async () => {
    const { api } = await account(stack);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await newSheet(api, { name: `S${i}`, rows: [] })).id);
    const p1 = await api.get('/sheets?limit=2');
    expect(p1.body.total).to.equal(5);
    expect(p1.body.data.map((s: { id: string }) => s.id)).to.deep.equal([ids[4], ids[3]]);
    await newSheet(api, { name: 'late', rows: [] });
    const p2 = await api.get(`/sheets?limit=2&cursor=${p1.body.cursor}`);
    expect(p2.body.data.map((s: { id: string }) => s.id)).to.deep.equal([ids[2], ids[1]]);
    const p3 = await api.get(`/sheets?limit=2&cursor=${p2.body.cursor}`);
    expect(p3.body.data.map((s: { id: string }) => s.id)).to.deep.equal([ids[0]]);
    expect(p3.body).to.not.have.property('cursor');
    expect((await api.get('/sheets?limit=101')).body.error.message).to.match(/^limit: must be between 1 and 100/);
    expect((await api.get('/sheets?cursor=nope')).body.error.message).to.match(/^cursor:/);
  });

  it('when the create body breaks a rule, then 400 names the field and nothing is stored', async () => {
    const { api, accountId } = await account(stack);
    const bad = async (body: Record<string, unknown>, re: RegExp) => {
      const r = await api.post('/sheets', { name: 'X', columns: COLUMNS, ...body });
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.match(re);
    };
    await bad({ name: '' }, /^name: must not be empty/);
    await bad({ columns: [] }, /^columns: must have at least one column/);
    await bad(
      { columns: Array.from({ length: 51 }, (_, i) => ({ name: `c${i}`, type: 'string' })) },
      /^columns: must have at most 50 columns/,
    );
    await bad(
      { columns: [{ name: 'a', type: 'money' }] },
      /^columns\.0\.type: must be one of string, number, boolean, date/,
    );
    await bad(
      {
        columns: [
          { name: 'a', type: 'string' },
          { name: 'A', type: 'number' },
        ],
      },
      /^columns\.1\.name: duplicates column "A"/,
    );
    await bad(
      { rows: [['Apple', 'cheap', 1, '2024-01-01', 'x']] },
      /^rows\.0\.1: must be a finite number \(column "Price" is number\)/,
    );
    await bad({ rows: [['Apple', 1, 1, '2024-02-30', 'x']] }, /^rows\.0\.3: must be a date YYYY-MM-DD/);
    await bad({ rows: [['a', 1, 1, null, 'x', 'extra']] }, /^rows\.0: has 6 values; the sheet has 5 columns/);
    await bad({ rows: [[{ nested: true }]] }, /^rows\.0\.0: must be a string/);
    await bad({ rows: [['x'.repeat(2001)]] }, /^rows\.0\.0: must be at most 2000 characters/);
    await bad({ rows: Array.from({ length: 20_001 }, () => []) }, /^rows: must have at most 20000 rows/);
    await bad({ color: 'red' }, /color: unknown field/);
    expect(await stack.db.db.collection(COLLECTIONS.sheets).countDocuments({ accountId })).to.equal(0);
    expect(await stack.db.db.collection(COLLECTIONS.projects).countDocuments({ accountId })).to.equal(0);
  });

  it('when a sheet has more cells than the limit, then 400 says how big a sheet may get', async () => {
    const { api } = await account(stack);
    const columns = Array.from({ length: 50 }, (_, i) => ({ name: `c${i}`, type: 'boolean' }));
    const r = await api.post('/sheets', { name: 'wide', columns, rows: Array.from({ length: 5_001 }, () => [true]) });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(
      /^rows: the sheet would have 250050 cells; at most 250000 \(rows × columns\)/,
    );
  });

  it('when a sheet is read in pages, then startRow and rowLimit page its rows and nextStartRow continues', async () => {
    const { api } = await account(stack);
    const rows = Array.from({ length: 600 }, (_, i) => [`r${i + 1}`, i, i * 2, null, i % 2 ? 'odd' : 'even']);
    const s = await newSheet(api, { rows });
    expect(s.rows).to.have.length(100);
    expect(s.nextStartRow).to.equal(101);
    const p = await api.get(`/sheets/${s.id}?startRow=250&rowLimit=300`);
    expect(p.status).to.equal(200);
    expect(p.body.startRow).to.equal(250);
    expect(p.body.rows).to.have.length(300);
    expect(p.body.rows[0][0]).to.equal('r250');
    expect(p.body.rows[299][0]).to.equal('r549');
    expect(p.body.nextStartRow).to.equal(550);
    const end = await api.get(`/sheets/${s.id}?startRow=550&rowLimit=1000`);
    expect(end.body.rows).to.have.length(51);
    expect(end.body.nextStartRow).to.equal(null);
    const none = await api.get(`/sheets/${s.id}?rowLimit=0`);
    expect(none.body.rows).to.deep.equal([]);
    expect(none.body.rowCount).to.equal(600);
    expect((await api.get(`/sheets/${s.id}?rowLimit=1001`)).body.error.message).to.match(
      /^rowLimit: must be between 0 and 1000/,
    );
    expect((await api.get(`/sheets/${s.id}?startRow=0`)).body.error.message).to.match(/^startRow: must be at least 1/);
    // 600 rows are stored as 3 blocks of at most 256 rows.
    const head = await stack.db.db.collection(COLLECTIONS.sheets).findOne({ _id: s.id } as never);
    expect(JSON.parse(head!.tree).blocks.map((b: { rows: number }) => b.rows)).to.deep.equal([256, 256, 88]);
  });

  it('when ranges are read in A1 notation, then cells, whole columns and whole rows come back, the end is clamped and a start outside is 400', async () => {
    const { api } = await account(stack);
    const s = await newSheet(api);
    const get = (range: string) => api.get(`/sheets/${s.id}/range?range=${encodeURIComponent(range)}`);
    const box = await get('A1:C2');
    expect(box.status).to.equal(200);
    expect(box.body).to.deep.include({
      range: 'A1:C2',
      requested: 'A1:C2',
      startRow: 1,
      rows: [
        ['Apple', 1.1, 3],
        ['Pear', 2, 5],
      ],
      truncated: false,
      nextRange: null,
      version: 1,
      rowCount: 4,
    });
    expect(box.body.columns.map((c: { name: string }) => c.name)).to.deep.equal(['Item', 'Price', 'Qty']);
    expect((await get('b3')).body).to.deep.include({ range: 'B3:B3', rows: [[0.5]] });
    expect((await get('B:B')).body).to.deep.include({ range: 'B1:B4', rows: [[1.1], [2], [0.5], [3]] });
    expect((await get('2:2')).body).to.deep.include({ range: 'A2:E2', rows: [['Pear', 2, 5, '2024-01-15', 'done']] });
    expect((await get('C3:A2')).body).to.deep.include({ range: 'A2:C3' });
    expect((await get('D3:E')).body).to.deep.include({
      range: 'D3:E4',
      rows: [
        ['2024-02-10', 'open'],
        ['2024-04-20', 'done'],
      ],
    });
    const clamped = await get('A3:Z99');
    expect(clamped.body).to.deep.include({ range: 'A3:E4', requested: 'A3:Z99' });
    for (const [range, re] of [
      ['A0', /^range: must be A1 notation/],
      ['1A', /^range: must be A1 notation/],
      ['A1:B2:C3', /^range: must be A1 notation/],
      ['A1:', /^range: must be A1 notation/],
      ['F1', /^range: column F is beyond the last column \(E\)/],
      ['A5', /^range: row 5 is beyond the last row \(4; row 1 is the first data row\)/],
    ] as const) {
      const r = await get(range);
      expect(r.status, range).to.equal(400);
      expect(r.body.error.message, range).to.match(re);
    }
    expect((await api.get(`/sheets/${s.id}/range`)).body.error.message).to.match(/^range: is required/);
  });

  it('when a range holds more than 10,000 cells, then the answer is cut at whole rows and nextRange continues', async () => {
    const { api } = await account(stack);
    const columns = Array.from({ length: 8 }, (_, i) => ({ name: `c${i}`, type: 'number' }));
    const rows = Array.from({ length: 1_400 }, (_, r) => Array.from({ length: 8 }, (_, c) => r * 8 + c));
    const s = await newSheet(api, { columns, rows });
    const r = await api.get(`/sheets/${s.id}/range?range=A:H`);
    expect(r.body).to.include({ range: 'A1:H1250', truncated: true, nextRange: 'A1251:H1400' });
    expect(r.body.rows).to.have.length(1250);
    const rest = await api.get(`/sheets/${s.id}/range?range=${r.body.nextRange}`);
    expect(rest.body).to.include({ truncated: false, nextRange: null });
    expect(rest.body.rows.at(-1)).to.deep.equal(rows.at(-1));
  });

  it('when a sheet has no rows, then whole-column ranges answer no rows and cell ranges are 400', async () => {
    const { api } = await account(stack);
    const s = await newSheet(api, { rows: [] });
    expect((await api.get(`/sheets/${s.id}/range?range=A:B`)).body).to.deep.include({
      rows: [],
      range: 'A:B',
      rowCount: 0,
    });
    expect((await api.get(`/sheets/${s.id}/range?range=A1`)).body.error.message).to.match(
      /^range: the sheet has no rows/,
    );
  });

  it('when a sheet id is malformed or unknown, then 400 or 404', async () => {
    const { api } = await account(stack);
    expect((await api.get('/sheets/..%2Fx')).status).to.equal(400);
    expect((await api.get('/sheets/prj_00000000000000000000')).status).to.equal(404);
    expect((await api.get('/sheets/prj_00000000000000000000/range?range=A1')).status).to.equal(404);
  });
});
