import { expect } from 'chai';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { createSheetsService } from '../../platform/sheets/sheets.service';
import { COLLECTIONS } from '../../platform/infra/mongo';
import type { Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, COLUMNS, newSheet, ROWS } from './helpers';

describe('sheets: consistency (stale reads, queued requests, If-Match, retried creation, list totals)', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  before(async () => {
    stack = await startStack({ scheduler: false, workers: false });
    ({ api, accountId } = await account(stack));
  });
  after(() => stack.stop());
  afterEach(() => sinon.restore());

  const ops = (
    id: string,
    list: unknown[],
    extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) => api.post(`/sheets/${id}/ops`, { ops: list, ...extra }, headers);
  const propose = (id: string, list: unknown[]) => ops(id, list, { propose: true });
  const merge = (id: string, commitId: string) =>
    api.post(`/sheets/${id}/commits/${commitId}/resolve`, { action: 'merge' });
  const rowsOf = async (id: string) => (await api.get(`/sheets/${id}?rowLimit=1000`)).body.rows;

  describe('merging a proposal whose values were computed or selected from columns a later commit wrote', () => {
    it('when a later commit changed an input column of an update expression, then the merge is 409 stale_commit and keeps the later value', async () => {
      const s = await newSheet(api);
      // Price := Qty * 2 for every row, computed on the grid as proposed.
      const p = await propose(s.id, [{ op: 'update', set: [{ column: 'Price', expression: 'Qty * 2' }] }]);
      expect(p.status, p.text).to.equal(200);
      await ops(s.id, [{ op: 'set', cell: 'C1', value: 100 }]); // Qty of Apple
      const m = await merge(s.id, p.body.commit.id);
      expect(m.status, m.text).to.equal(409);
      expect(m.body.error.code).to.equal('stale_commit');
      expect(m.body.error.message).to.match(/changed values this proposal computed from or selected rows by/);
      expect((await rowsOf(s.id))[0]).to.deep.equal(['Apple', 1.1, 100, '2024-03-01', 'open']);
    });

    it('when a later commit changed the where column of an update or a delete, then the merge is 409 stale_commit', async () => {
      const s = await newSheet(api);
      const upd = await propose(s.id, [
        { op: 'update', where: { column: 'Status', cmp: 'eq', value: 'open' }, set: [{ column: 'Qty', value: 0 }] },
      ]);
      const del = await propose(s.id, [{ op: 'deleteRows', where: { column: 'Status', cmp: 'eq', value: 'done' } }]);
      const col = await propose(s.id, [
        { op: 'insertColumn', name: 'Total', type: 'number', expression: 'Price * Qty' },
      ]);
      // Pear is open now: the update would miss it, the delete would remove a row it no longer matches.
      await ops(s.id, [{ op: 'set', cell: 'E2', value: 'open' }]);
      for (const c of [upd, del]) {
        const m = await merge(s.id, c.body.commit.id);
        expect(m.status, m.text).to.equal(409);
        expect(m.body.error.code).to.equal('stale_commit');
      }
      // The computed column read Price and Qty only: Status changing does not make it stale.
      const ok = await merge(s.id, col.body.commit.id);
      expect(ok.status, ok.text).to.equal(200);
      expect(ok.body.commit.rebased).to.equal(true);
    });

    it('when later commits wrote other columns than the proposal reads and writes, then it still rebases and merges', async () => {
      const s = await newSheet(api);
      const p = await propose(s.id, [
        {
          op: 'update',
          where: { column: 'Item', cmp: 'eq', value: 'Plum' },
          set: [{ column: 'Price', expression: 'Price * 2' }],
        },
      ]);
      await ops(s.id, [{ op: 'set', cell: 'E1', value: 'closed' }]);
      const m = await merge(s.id, p.body.commit.id);
      expect(m.status, m.text).to.equal(200);
      expect((await rowsOf(s.id))[2][1]).to.equal(1);
    });
  });

  it('when a request waited in this process behind a commit that made its ops inapplicable, then 409 conflict naming the op (as across processes), not 400', async () => {
    const s = await newSheet(api);
    // Hold the first request at the write of its commit, until the second has read the version and queued behind it.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    let queued!: () => void;
    const secondQueued = new Promise<void>((r) => (queued = r));
    const insertOne = Collection.prototype.insertOne;
    const findOne = Collection.prototype.findOne;
    let gated = false;
    sinon.stub(Collection.prototype, 'insertOne').callsFake(async function (this: Collection, ...args: unknown[]) {
      if (this.collectionName === COLLECTIONS.sheetCommits && !gated) {
        gated = true;
        held();
        await gate;
      }
      return (insertOne as (...a: unknown[]) => unknown).apply(this, args);
    } as never);
    sinon.stub(Collection.prototype, 'findOne').callsFake(function (this: Collection, ...args: unknown[]) {
      const opts = args[1] as { projection?: Record<string, unknown> } | undefined;
      const read = (findOne as (...a: unknown[]) => Promise<unknown>).apply(this, args);
      // The second request read the version it arrived at: it queues right after this.
      if (this.collectionName === COLLECTIONS.sheets && gated && opts?.projection?.version === 1)
        void read.then(() => queued());
      return read;
    } as never);

    const first = ops(s.id, [{ op: 'deleteColumn', column: 'Date' }]);
    await holding;
    const second = ops(s.id, [{ op: 'set', column: 'Date', row: 1, value: '2025-01-01' }]);
    // (Bounded: should the second not read the version, it is released anyway and the assertions say what happened.)
    await Promise.race([secondQueued, new Promise((r) => setTimeout(r, 3000))]);
    release();
    const [a, b] = await Promise.all([first, second]);
    expect(a.status, a.text).to.equal(200);
    expect(b.status, b.text).to.equal(409);
    expect(b.body.error.code).to.equal('conflict');
    expect(b.body.error.message).to.match(
      /the sheet changed while this request waited \(version 1, now 2\) and the ops no longer apply: ops\.0\.column: names no column "Date"/,
    );
    // Sent now, on the moved sheet, the same ops are the caller's mistake: 400.
    const later = await ops(s.id, [{ op: 'set', column: 'Date', row: 1, value: '2025-01-01' }]);
    expect(later.status).to.equal(400);
  });

  it('when a proposal is rejected with an If-Match naming another version, then 412 precondition_failed and it stays proposed', async () => {
    const s = await newSheet(api);
    const p = await propose(s.id, [{ op: 'set', cell: 'A1', value: 'x' }]);
    await ops(s.id, [{ op: 'set', cell: 'A2', value: 'y' }]);
    const stale = await api.post(
      `/sheets/${s.id}/commits/${p.body.commit.id}/resolve`,
      { action: 'reject' },
      { 'if-match': '"1"' },
    );
    expect(stale.status, stale.text).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    expect(stale.body.error.message).to.equal(
      'sheet is at version 2, not 1 (If-Match): someone changed it since you read it; fetch it again and re-apply your change',
    );
    expect((await api.get(`/sheets/${s.id}/commits/${p.body.commit.id}`)).body.status).to.equal('proposed');
    const ok = await api.post(
      `/sheets/${s.id}/commits/${p.body.commit.id}/resolve`,
      { action: 'reject' },
      { 'if-match': '"2"' },
    );
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.commit.status).to.equal('rejected');
  });

  it('when a creation with the same id is retried after the first died before its head or project, then the retry completes that sheet (no 409, one creation commit)', async () => {
    const sheets = createSheetsService(stack.rt);
    const id = 'prj_retriedcreation00000';
    const input = { accountId, name: 'Retried', columns: COLUMNS as never, rows: ROWS, idFor: () => id };
    await sheets.create(input);
    // As if the first attempt had died after its creation commit: no head, no project.
    await stack.db.db.collection(COLLECTIONS.sheets).deleteOne({ _id: id } as never);
    await stack.db.db.collection(COLLECTIONS.projects).deleteOne({ _id: id } as never);
    const again = await sheets.create(input);
    expect(again).to.include({ id, name: 'Retried', version: 1, rowCount: 4 });
    expect(again.rows).to.deep.equal(ROWS.map((r) => [...r]));
    // And once more with everything in place: the same sheet.
    const third = await sheets.create(input);
    expect(third.headCommitId).to.equal(again.headCommitId);
    expect(await stack.db.db.collection(COLLECTIONS.sheetCommits).countDocuments({ sheetId: id })).to.equal(1);
    expect((await api.get(`/sheets/${id}`)).status).to.equal(200);
  });

  it('when a crash left a sheet head without its project, then GET /sheets neither lists nor counts it: total and data agree', async () => {
    const { api: own } = await account(stack);
    const kept = await newSheet(own, { name: 'kept' });
    const orphan = await newSheet(own, { name: 'orphan' });
    await stack.db.db.collection(COLLECTIONS.projects).deleteOne({ _id: orphan.id } as never);
    const list = await own.get('/sheets');
    expect(list.status).to.equal(200);
    expect(list.body.data.map((x: { id: string }) => x.id)).to.deep.equal([kept.id]);
    expect(list.body.total).to.equal(1);
    expect(list.body).to.not.have.property('cursor');
  });
});
