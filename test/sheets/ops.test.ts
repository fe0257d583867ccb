import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import type { Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, newSheet } from './helpers';

describe('sheets: POST /sheets/{id}/ops', () => {
  let stack: Stack;
  let api: Client;
  before(async () => {
    stack = await startStack({ scheduler: false, workers: false });
    api = (await account(stack)).api;
  });
  after(() => stack.stop());

  const ops = (id: string, list: unknown[], extra: Record<string, unknown> = {}, headers?: Record<string, string>) =>
    api.post(`/sheets/${id}/ops`, { ops: list, ...extra }, headers);
  const rowsOf = async (id: string) => (await api.get(`/sheets/${id}?rowLimit=1000`)).body.rows;

  it('when cells are set by A1 and by row and column, then the commit is merged with a cell diff and the grid shows it', async () => {
    const s = await newSheet(api);
    const r = await ops(
      s.id,
      [
        { op: 'set', cell: 'b2', value: 2.5 },
        { op: 'set', row: 4, column: 'qty', value: 7 },
        { op: 'set', row: 1, column: 'E', value: 'closed' },
      ],
      { summary: 'price fix' },
    );
    expect(r.status).to.equal(200);
    expect(r.headers.get('etag')).to.equal('"2"');
    expect(r.body).to.include({ version: 2, rowCount: 4 });
    const c = r.body.commit;
    expect(c).to.include({
      status: 'merged',
      seq: 2,
      summary: 'price fix',
      source: 'ops',
      parentId: s.headCommitId,
      changedCells: 3,
      rebased: false,
    });
    expect(c.author.keyId).to.match(/^key_/);
    expect(c.ops).to.have.length(3);
    expect(c.diff.cells).to.deep.equal([
      { cell: 'B2', row: 2, column: 'Price', before: 2, after: 2.5 },
      { cell: 'C4', row: 4, column: 'Qty', before: null, after: 7 },
      { cell: 'E1', row: 1, column: 'Status', before: 'open', after: 'closed' },
    ]);
    const rows = await rowsOf(s.id);
    expect(rows[1][1]).to.equal(2.5);
    expect(rows[3][2]).to.equal(7);
    expect(rows[0][4]).to.equal('closed');
    const got = await api.get(`/sheets/${s.id}/commits/${c.id}`);
    expect(got.body.diff).to.deep.equal(c.diff);
  });

  it('when rows are inserted, appended and deleted (by number and by condition), then the grid and the structural diff follow', async () => {
    const s = await newSheet(api);
    const r = await ops(s.id, [
      { op: 'insertRows', at: 2, rows: [['Kiwi', 4, 1, '2024-05-01', 'open']] },
      { op: 'insertRows', at: 1, count: 2 },
      {
        op: 'appendRows',
        rows: [
          ['Lime', 1, 1],
          ['Date', 9, 9, '2024-06-01', 'done'],
        ],
      },
      { op: 'deleteRows', rows: [1, 2] },
      { op: 'deleteRows', where: { column: 'Status', value: 'DONE' } },
    ]);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.rowCount).to.equal(4);
    expect((await rowsOf(s.id)).map((row: unknown[]) => row[0])).to.deep.equal(['Apple', 'Kiwi', 'Plum', 'Lime']);
    const structure = r.body.commit.diff.structure;
    expect(structure.map((x: { op: string }) => x.op)).to.deep.equal([
      'insertRows',
      'insertRows',
      'appendRows',
      'deleteRows',
      'deleteRows',
    ]);
    expect(structure[0]).to.deep.include({
      description: 'inserted 1 row at row 2',
      rows: [{ row: 2, values: ['Kiwi', 4, 1, '2024-05-01', 'open'] }],
    });
    expect(structure[2].description).to.equal('appended 2 rows (rows 8 to 9)');
    expect(structure[4].description).to.equal('deleted 3 rows (3, 5, 7)');
    expect(structure[4].rows.map((x: { values: unknown[] }) => x.values[0])).to.deep.equal(['Pear', 'Fig', 'Date']);
  });

  it('when columns are inserted (with a value or an expression), renamed, retyped and deleted, then cells follow their columns', async () => {
    const s = await newSheet(api);
    const r = await ops(s.id, [
      { op: 'insertColumn', name: 'Total', type: 'number', expression: 'Price * Qty' },
      { op: 'insertColumn', name: 'Owner', type: 'string', before: 'B', value: 'ann' },
      { op: 'renameColumn', column: 'Status', name: 'State' },
      { op: 'retypeColumn', column: 'Qty', type: 'string' },
      { op: 'deleteColumn', column: 'Date' },
      { op: 'insertColumn', name: 'Ratio', type: 'number', expression: '([Total] + 1) / Price' },
    ]);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).to.deep.equal([
      'Item:string',
      'Owner:string',
      'Price:number',
      'Qty:string',
      'State:string',
      'Total:number',
      'Ratio:number',
    ]);
    const rows = await rowsOf(s.id);
    expect(rows[0]).to.deep.equal(['Apple', 'ann', 1.1, '3', 'open', 3.3, 3.90909090909091]);
    expect(rows[3]).to.deep.equal(['Fig', 'ann', 3, null, 'done', null, null]);
    const cells = r.body.commit.diff.cells;
    expect(cells).to.deep.include({ cell: 'F1', row: 1, column: 'Total', before: null, after: 3.3 });
    expect(cells).to.deep.include({ cell: 'D2', row: 2, column: 'Qty', before: 5, after: '5' });
  });

  it('when a column is retyped, then convertible cells convert and the first that does not is named', async () => {
    const s = await newSheet(api, { columns: [{ name: 'v', type: 'string' }], rows: [['3.5'], ['yes'], [''], [null]] });
    const bad = await ops(s.id, [{ op: 'retypeColumn', column: 'v', type: 'number' }]);
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.equal('ops.0.type: cell A2 ("yes") does not convert to number');
    const ok = await ops(s.id, [
      { op: 'set', cell: 'A2', value: '1,000' },
      { op: 'retypeColumn', column: 'v', type: 'number' },
    ]);
    expect(ok.status, ok.text).to.equal(200);
    expect((await rowsOf(s.id)).map((x: unknown[]) => x[0])).to.deep.equal([3.5, 1000, null, null]);
    const toBool = await ops(s.id, [{ op: 'retypeColumn', column: 'v', type: 'boolean' }]);
    expect(toBool.body.error.message).to.equal('ops.0.type: cell A1 (3.5) does not convert to boolean');
  });

  it('when sorting, then rows order by the column (stable, empty last, text ignoring case) in either direction', async () => {
    const s = await newSheet(api, {
      columns: [
        { name: 'n', type: 'string' },
        { name: 'q', type: 'number' },
      ],
      rows: [
        ['b', 2],
        ['A', null],
        ['c', 1],
        ['a', 2],
      ],
    });
    await ops(s.id, [{ op: 'sort', column: 'q', direction: 'desc' }]);
    expect((await rowsOf(s.id)).map((x: unknown[]) => x[0])).to.deep.equal(['b', 'a', 'c', 'A']);
    const r = await ops(s.id, [{ op: 'sort', column: 'n' }]);
    expect((await rowsOf(s.id)).map((x: unknown[]) => x[0])).to.deep.equal(['a', 'A', 'b', 'c']);
    expect(r.body.commit.diff.structure[0].description).to.equal('sorted 4 rows by A "n" ascending');
    expect(r.body.commit.changedCells).to.equal(0);
  });

  it('when rows are updated where a condition holds, with values or expressions, then only matching rows change', async () => {
    const s = await newSheet(api);
    const r = await ops(s.id, [
      {
        op: 'update',
        where: { column: 'Qty', cmp: 'gte', value: 5 },
        set: [
          { column: 'Status', value: 'bulk' },
          { column: 'Price', expression: 'Price * 2' },
        ],
      },
      { op: 'update', where: { column: 'Qty', cmp: 'empty' }, set: [{ column: 'Qty', value: 0 }] },
      {
        op: 'update',
        where: { column: 'Item', cmp: 'contains', value: 'PL' },
        set: [{ column: 'Date', value: '2025-01-01' }],
      },
    ]);
    expect(r.status, r.text).to.equal(200);
    expect(await rowsOf(s.id)).to.deep.equal([
      ['Apple', 1.1, 3, '2025-01-01', 'open'],
      ['Pear', 4, 5, '2024-01-15', 'bulk'],
      ['Plum', 1, 10, '2025-01-01', 'bulk'],
      ['Fig', 3, 0, '2024-04-20', 'done'],
    ]);
  });

  it('when an op is invalid, then 400 names the op index and field, and no op of the request is applied', async () => {
    const s = await newSheet(api);
    const bad = async (list: unknown[], re: RegExp, extra: Record<string, unknown> = {}) => {
      const r = await ops(s.id, list, extra);
      expect(r.status, JSON.stringify(list)).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.match(re);
    };
    const first = { op: 'set', cell: 'A1', value: 'changed' };
    await bad([first, { op: 'set', row: 1, column: 'Cost', value: 1 }], /^ops\.1\.column: names no column "Cost"/);
    await bad(
      [first, first, { op: 'set', cell: 'B1', value: 'x' }],
      /^ops\.2\.value: must be a finite number \(column "Price" is number\)/,
    );
    await bad([{ op: 'set', cell: 'F1', value: 1 }], /^ops\.0\.cell: column F is beyond the last column \(E\)/);
    await bad([{ op: 'set', cell: 'A9', value: 'x' }], /^ops\.0\.cell: row 9 is beyond the last row \(4\)/);
    await bad([{ op: 'set', cell: 'A1:B2', value: 'x' }], /^ops\.0\.cell: must be a cell in A1 notation/);
    await bad([{ op: 'set', row: 1, value: 'x' }], /^ops\.0\.column: is required \(or give cell, e\.g\. B3\)/);
    await bad(
      [{ op: 'set', cell: 'A1', row: 1, value: 'x' }],
      /^ops\.0\.cell: give either cell, or row and column, not both/,
    );
    await bad([{ op: 'set', cell: 'D1', value: '01/02/2024' }], /^ops\.0\.value: must be a date YYYY-MM-DD/);
    await bad([{ op: 'set', cell: 'A1' }], /^ops\.0\.value: is required/);
    await bad([{ op: 'paint', cell: 'A1' }], /^ops\.0(\.op)?: /);
    await bad(
      [{ op: 'set', cell: 'A1', value: 'x', colour: 'red' }],
      /ops\.0.*colour: unknown field|colour: unknown field/,
    );
    await bad([], /^ops: must have at least one op/);
    await bad(
      Array.from({ length: 101 }, () => first),
      /^ops: must have at most 100 ops/,
    );
    await bad([{ op: 'insertRows', at: 7, count: 1 }], /^ops\.0\.at: must be at most 5 \(rowCount \+ 1\)/);
    await bad([{ op: 'insertRows', at: 1 }], /^ops\.0\.rows: give rows or count \(one of them\)/);
    await bad(
      [{ op: 'appendRows', rows: [['a', 1, 1, null, 'x', 'y']] }],
      /^ops\.0\.rows\.0: has 6 values; the sheet has 5 columns/,
    );
    await bad([{ op: 'appendRows', rows: [['a', 'one']] }], /^ops\.0\.rows\.0\.1: must be a finite number/);
    await bad([{ op: 'deleteRows', rows: [2, 9] }], /^ops\.0\.rows\.1: row 9 is beyond the last row \(4\)/);
    await bad(
      [{ op: 'deleteRows', rows: [1], where: { column: 'Item', value: 'x' } }],
      /^ops\.0\.rows: give rows or where \(one of them\)/,
    );
    await bad([{ op: 'deleteRows', where: { column: 'Qty', cmp: 'gt' } }], /^ops\.0\.where\.value: is required for gt/);
    await bad(
      [{ op: 'deleteRows', where: { column: 'Qty', cmp: 'gt', value: 'many' } }],
      /^ops\.0\.where\.value: must be a finite number/,
    );
    await bad(
      [{ op: 'deleteRows', where: { column: 'Qty', cmp: 'near', value: 1 } }],
      /^ops\.0\.where\.cmp: must be one of eq, ne/,
    );
    await bad(
      [{ op: 'insertColumn', name: 'price', type: 'number' }],
      /^ops\.0\.name: a column named "price" exists already/,
    );
    await bad(
      [{ op: 'insertColumn', name: 'T', type: 'string', expression: 'Price * Qty' }],
      /^ops\.0\.type: must be number when an expression computes the values/,
    );
    await bad(
      [{ op: 'insertColumn', name: 'T', type: 'number', expression: 'Price * Item' }],
      /^ops\.0\.expression: column "Item" is string; expressions use number columns/,
    );
    await bad(
      [{ op: 'insertColumn', name: 'T', type: 'number', expression: 'Price * (Qty' }],
      /^ops\.0\.expression: a parenthesis is not closed/,
    );
    await bad(
      [{ op: 'insertColumn', name: 'T', type: 'number', expression: 'Price ^ 2' }],
      /^ops\.0\.expression: cannot read/,
    );
    await bad([{ op: 'insertColumn', name: 'T', type: 'number', before: 'Z' }], /^ops\.0\.before: names no column "Z"/);
    await bad([{ op: 'renameColumn', column: 'A', name: 'Qty' }], /^ops\.0\.name: a column named "Qty" exists already/);
    await bad(
      [{ op: 'update', set: [{ column: 'Qty' }] }],
      /^ops\.0\.set\.0: give value or expression \(one of them\)/,
    );
    await bad(
      [{ op: 'update', set: [{ column: 'Item', expression: 'Qty + 1' }] }],
      /^ops\.0\.set\.0\.expression: column "Item" is string; expressions give numbers/,
    );
    await bad([{ op: 'sort', column: 'Nope' }], /^ops\.0\.column: names no column "Nope"/);
    await bad([{ op: 'sort', column: 'Qty', direction: 'up' }], /^ops\.0\.direction: must be asc or desc/);
    await bad([first], /^summary: must not contain control characters/, { summary: 'a\nb' });
    await bad([first], /^propose: must be a boolean/, { propose: 'yes' });
    const one = await ops(s.id, [
      { op: 'deleteColumn', column: 'A' },
      { op: 'deleteColumn', column: 'A' },
      { op: 'deleteColumn', column: 'A' },
      { op: 'deleteColumn', column: 'A' },
      { op: 'deleteColumn', column: 'A' },
    ]);
    expect(one.body.error.message).to.equal('ops.4.column: a sheet keeps at least one column');
    // Nothing of any refused request was applied.
    const now = await api.get(`/sheets/${s.id}`);
    expect(now.body.version).to.equal(1);
    expect(now.body.rows[0][0]).to.equal('Apple');
    const commits = await api.get(`/sheets/${s.id}/commits`);
    expect(commits.body.total).to.equal(1);
  });

  it('when ops would outgrow the sheet limits, then 400 names the op', async () => {
    const s = await newSheet(api, {
      columns: [{ name: 'a', type: 'number' }],
      rows: Array.from({ length: 19_999 }, (_, i) => [i]),
    });
    const r = await ops(s.id, [{ op: 'appendRows', rows: [[1], [2]] }]);
    expect(r.body.error.message).to.equal('ops.0.rows: the sheet would have 20001 rows; at most 20000');
    const wide = await newSheet(api, {
      columns: Array.from({ length: 50 }, (_, i) => ({ name: `c${i}`, type: 'string' })),
      rows: [],
    });
    expect((await ops(wide.id, [{ op: 'insertColumn', name: 'more', type: 'string' }])).body.error.message).to.equal(
      'ops.0.name: the sheet would have 51 columns; at most 50',
    );
  });

  it('when one cell of a 600-row sheet changes, then one block of at most 256 rows is written and the other blocks are shared with the previous commit', async () => {
    const rows = Array.from({ length: 600 }, (_, i) => [`r${i + 1}`, i, i, null, null]);
    const s = await newSheet(api, { rows });
    const col = stack.db.db.collection(COLLECTIONS.sheetCommits);
    const blocks = stack.db.db.collection(COLLECTIONS.sheetBlocks);
    const before = await blocks.countDocuments({ sheetId: s.id });
    const r = await ops(s.id, [{ op: 'set', cell: 'B300', value: -1 }]);
    expect(r.status).to.equal(200);
    expect(await blocks.countDocuments({ sheetId: s.id })).to.equal(before + 1);
    const [c1, c2] = await Promise.all([
      col.findOne({ _id: s.headCommitId } as never),
      col.findOne({ _id: r.body.commit.id } as never),
    ]);
    const ids1 = JSON.parse(c1!.tree).blocks.map((b: { id: string }) => b.id);
    const ids2 = JSON.parse(c2!.tree).blocks.map((b: { id: string }) => b.id);
    expect(ids2[0]).to.equal(ids1[0]);
    expect(ids2[1]).to.not.equal(ids1[1]);
    expect(ids2[2]).to.equal(ids1[2]);
    expect((await api.get(`/sheets/${s.id}/range?range=B299:B301`)).body.rows).to.deep.equal([[298], [-1], [300]]);
  });

  it('when If-Match names the current version, then the ops apply; an older one is 412 precondition_failed', async () => {
    const s = await newSheet(api);
    const ok = await ops(s.id, [{ op: 'set', cell: 'A1', value: 'one' }], {}, { 'if-match': '"1"' });
    expect(ok.status).to.equal(200);
    const stale = await ops(s.id, [{ op: 'set', cell: 'A1', value: 'two' }], {}, { 'if-match': '"1"' });
    expect(stale.status).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    expect(stale.body.error.message).to.match(/sheet is at version 2, not 1/);
    expect((await ops(s.id, [{ op: 'set', cell: 'A1', value: 'x' }], {}, { 'if-match': 'nope' })).status).to.equal(400);
  });
});
