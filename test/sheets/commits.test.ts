import { expect } from 'chai';
import { start as startApi, type ApiServer } from '../../api/app';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, newSheet, ROWS } from './helpers';

describe('sheets: commits (propose, merge, reject, stale, rebase, rollback, concurrency)', () => {
  let stack: Stack;
  let api: Client;
  before(async () => {
    stack = await startStack({ scheduler: false, workers: false });
    api = (await account(stack)).api;
  });
  after(() => stack.stop());

  const ops = (id: string, list: unknown[], extra: Record<string, unknown> = {}) =>
    api.post(`/sheets/${id}/ops`, { ops: list, ...extra });
  const propose = (id: string, list: unknown[]) => ops(id, list, { propose: true });
  const resolve = (id: string, commitId: string, action: 'merge' | 'reject') =>
    api.post(`/sheets/${id}/commits/${commitId}/resolve`, { action });
  const rowsOf = async (id: string) => (await api.get(`/sheets/${id}?rowLimit=1000`)).body.rows;

  it('when ops are proposed, then a proposed commit is recorded with its diff and the grid does not change until it is merged', async () => {
    const s = await newSheet(api);
    const p = await propose(s.id, [{ op: 'set', cell: 'B1', value: 9 }]);
    expect(p.status).to.equal(200);
    expect(p.body.version).to.equal(1);
    expect(p.body.commit).to.include({
      status: 'proposed',
      seq: null,
      parentId: s.headCommitId,
      baseCommitId: s.headCommitId,
      resolvedAt: null,
      resolvedBy: null,
    });
    expect(p.body.commit.diff.cells).to.deep.equal([{ cell: 'B1', row: 1, column: 'Price', before: 1.1, after: 9 }]);
    expect((await rowsOf(s.id))[0][1]).to.equal(1.1);
    const listed = await api.get(`/sheets/${s.id}/commits?status=proposed`);
    expect(listed.body.data.map((c: { id: string }) => c.id)).to.deep.equal([p.body.commit.id]);

    const m = await resolve(s.id, p.body.commit.id, 'merge');
    expect(m.status).to.equal(200);
    expect(m.body.version).to.equal(2);
    expect(m.body.commit).to.include({ status: 'merged', seq: 2, rebased: false, parentId: s.headCommitId });
    expect(m.body.commit.resolvedBy.keyId).to.match(/^key_/);
    expect((await rowsOf(s.id))[0][1]).to.equal(9);
    expect((await api.get(`/sheets/${s.id}`)).body.headCommitId).to.equal(p.body.commit.id);

    const again = await resolve(s.id, p.body.commit.id, 'merge');
    expect(again.status).to.equal(409);
    expect(again.body.error.code).to.equal('conflict');
    expect(again.body.error.message).to.match(/is merged, not proposed/);
  });

  it('when a proposal is rejected, then it stays in history as rejected and can no longer be merged', async () => {
    const s = await newSheet(api);
    const p = await propose(s.id, [{ op: 'deleteRows', rows: [1] }]);
    const r = await resolve(s.id, p.body.commit.id, 'reject');
    expect(r.status).to.equal(200);
    expect(r.body.commit).to.include({ status: 'rejected', seq: null });
    expect(r.body.version).to.equal(1);
    expect(await rowsOf(s.id)).to.have.length(4);
    const m = await resolve(s.id, p.body.commit.id, 'merge');
    expect(m.status).to.equal(409);
    expect(m.body.error.message).to.match(/is rejected, not proposed/);
    expect((await resolve(s.id, s.headCommitId, 'reject')).body.error.message).to.match(/is merged, not proposed/);
    expect((await resolve(s.id, 'cmt_00000000000000000000', 'merge')).status).to.equal(404);
    expect(
      (await api.post(`/sheets/${s.id}/commits/${p.body.commit.id}/resolve`, { action: 'squash' })).body.error.message,
    ).to.match(/^action: must be merge or reject/);
  });

  it('when a later merged commit changed the cells of a proposal, then merging it is 409 stale_commit and the grid keeps the later change', async () => {
    const s = await newSheet(api);
    const cell = await propose(s.id, [{ op: 'set', cell: 'B1', value: 9 }]);
    const rowDel = await propose(s.id, [{ op: 'set', cell: 'A4', value: 'Fig!' }]);
    const retype = await propose(s.id, [{ op: 'set', cell: 'C2', value: 50 }]);
    const sorts = await propose(s.id, [{ op: 'sort', column: 'Item' }]);
    await ops(s.id, [{ op: 'set', cell: 'B1', value: 5 }]);
    await ops(s.id, [{ op: 'deleteRows', rows: [4] }]);
    await ops(s.id, [
      { op: 'retypeColumn', column: 'Qty', type: 'string' },
      { op: 'insertRows', at: 1, count: 1 },
    ]);
    const expectStale = async (id: string, re: RegExp) => {
      const r = await resolve(s.id, id, 'merge');
      expect(r.status).to.equal(409);
      expect(r.body.error.code).to.equal('stale_commit');
      expect(r.body.error.message).to.match(re);
    };
    await expectStale(cell.body.commit.id, /is stale: commit cmt_\w+ changed a cell this proposal changes/);
    await expectStale(rowDel.body.commit.id, /deleted a row this proposal changes/);
    await expectStale(retype.body.commit.id, /changed a (cell|column) this proposal changes/);
    await expectStale(sorts.body.commit.id, /changed the row order/);
    expect((await rowsOf(s.id))[1][1]).to.equal(5);
    const stored = await stack.db.db
      .collection(COLLECTIONS.sheetCommits)
      .findOne({ _id: cell.body.commit.id } as never);
    expect(stored?.status).to.equal('proposed');
  });

  it('when later commits touched other cells, then the proposal is rebased onto the current grid and merged, following its rows', async () => {
    const s = await newSheet(api);
    const p = await propose(s.id, [
      { op: 'set', cell: 'B1', value: 9 },
      { op: 'appendRows', rows: [['Mango', 2, 2, null, 'open']] },
      { op: 'renameColumn', column: 'Status', name: 'State' },
    ]);
    // Rows move (an insert and a sort), another cell changes, another row is appended.
    await ops(s.id, [
      { op: 'insertRows', at: 1, rows: [['Cherry', 7, 1, null, 'new']] },
      { op: 'set', cell: 'C2', value: 33 },
      { op: 'appendRows', rows: [['Lemon']] },
    ]);
    const m = await resolve(s.id, p.body.commit.id, 'merge');
    expect(m.status, m.text).to.equal(200);
    expect(m.body.commit).to.include({ status: 'merged', seq: 3, rebased: true });
    expect(m.body.commit.diff.cells).to.deep.equal([{ cell: 'B2', row: 2, column: 'Price', before: 1.1, after: 9 }]);
    const rows = await rowsOf(s.id);
    expect(rows.map((r: unknown[]) => r[0])).to.deep.equal([
      'Cherry',
      'Apple',
      'Pear',
      'Plum',
      'Fig',
      'Lemon',
      'Mango',
    ]);
    expect(rows[1]).to.deep.equal(['Apple', 9, 33, '2024-03-01', 'open']);
    expect(m.body.columns.map((c: { name: string }) => c.name)).to.include('State');
    // The rows kept distinct ids: a later edit of Mango touches Mango only.
    await ops(s.id, [{ op: 'set', cell: 'A7', value: 'Mango!' }]);
    expect((await rowsOf(s.id)).map((r: unknown[]) => r[0])).to.deep.equal([
      'Cherry',
      'Apple',
      'Pear',
      'Plum',
      'Fig',
      'Lemon',
      'Mango!',
    ]);
  });

  it('when the sheet is rolled back to a commit, then its grid comes back as a new commit, history is kept, and rolling forward again works', async () => {
    const s = await newSheet(api);
    const c2 = await ops(s.id, [
      { op: 'set', cell: 'A1', value: 'Apricot' },
      { op: 'deleteRows', rows: [2] },
    ]);
    await ops(s.id, [
      { op: 'insertColumn', name: 'Note', type: 'string', value: 'n' },
      { op: 'appendRows', rows: [['Kiwi']] },
      { op: 'renameColumn', column: 'Qty', name: 'Count' },
    ]);
    const back = await api.post(`/sheets/${s.id}/rollback`, { commitId: s.headCommitId });
    expect(back.status, back.text).to.equal(200);
    expect(back.body.version).to.equal(4);
    expect(back.body.commit).to.include({ status: 'merged', seq: 4, source: 'rollback', rollbackOf: s.headCommitId });
    expect(back.body.commit.summary).to.match(/^Roll back to version 1/);
    expect(await rowsOf(s.id)).to.deep.equal(ROWS.map((r) => [...r]));
    expect(back.body.columns.map((c: { name: string }) => c.name)).to.deep.equal([
      'Item',
      'Price',
      'Qty',
      'Date',
      'Status',
    ]);
    const diff = back.body.commit.diff;
    expect(diff.cells).to.deep.include({ cell: 'A1', row: 1, column: 'Item', before: 'Apricot', after: 'Apple' });
    expect(diff.structure.map((x: { op: string }) => x.op)).to.include.members([
      'rollback',
      'deleteRows',
      'insertRows',
      'deleteColumn',
      'renameColumn',
    ]);
    const chain = await api.get(`/sheets/${s.id}/commits?limit=100`);
    expect(chain.body.data.map((c: { seq: number }) => c.seq)).to.deep.equal([4, 3, 2, 1]);

    // Forward again to commit 2: its grid, not a replay.
    const fwd = await api.post(`/sheets/${s.id}/rollback`, { commitId: c2.body.commit.id, summary: 'undo the undo' });
    expect(fwd.body.commit).to.include({ seq: 5, summary: 'undo the undo' });
    expect((await rowsOf(s.id)).map((r: unknown[]) => r[0])).to.deep.equal(['Apricot', 'Plum', 'Fig']);
    // A row added after the rollback target gets a fresh id (ids are never reused).
    await ops(s.id, [{ op: 'appendRows', rows: [['New']] }]);
    expect((await rowsOf(s.id)).map((r: unknown[]) => r[0])).to.deep.equal(['Apricot', 'Plum', 'Fig', 'New']);

    const same = await api.post(`/sheets/${s.id}/rollback`, {
      commitId: (await api.get(`/sheets/${s.id}`)).body.headCommitId,
    });
    expect(same.status).to.equal(409);
    expect(same.body.error.message).to.match(/nothing to roll back/);
    const prop = await propose(s.id, [{ op: 'set', cell: 'A1', value: 'x' }]);
    const toProposal = await api.post(`/sheets/${s.id}/rollback`, { commitId: prop.body.commit.id });
    expect(toProposal.status).to.equal(409);
    expect(toProposal.body.error.message).to.match(/is proposed: only merged commits can be rolled back to/);
    expect((await api.post(`/sheets/${s.id}/rollback`, { commitId: 'cmt_00000000000000000000' })).status).to.equal(404);
    expect((await api.post(`/sheets/${s.id}/rollback`, {})).body.error.message).to.match(/^commitId: is required/);
  });

  it('when commits are listed in pages, then they come newest first with a keyset cursor, and GET shows a commit with ops and diff', async () => {
    const s = await newSheet(api);
    for (let i = 0; i < 4; i++) await ops(s.id, [{ op: 'set', cell: 'A1', value: `v${i}` }]);
    const p1 = await api.get(`/sheets/${s.id}/commits?limit=3`);
    expect(p1.body.total).to.equal(5);
    expect(p1.body.data.map((c: { seq: number }) => c.seq)).to.deep.equal([5, 4, 3]);
    expect(p1.body.data[0]).to.not.have.property('diff');
    const p2 = await api.get(`/sheets/${s.id}/commits?limit=3&cursor=${p1.body.cursor}`);
    expect(p2.body.data.map((c: { seq: number }) => c.seq)).to.deep.equal([2, 1]);
    expect(p2.body).to.not.have.property('cursor');
    const one = await api.get(`/sheets/${s.id}/commits/${p1.body.data[0].id}`);
    expect(one.body.ops).to.deep.equal([{ op: 'set', cell: 'A1', value: 'v3' }]);
    expect(one.body.diff.cells[0]).to.include({ before: 'v2', after: 'v3' });
    expect((await api.get(`/sheets/${s.id}/commits?status=open`)).body.error.message).to.match(
      /^status: must be proposed, merged or rejected/,
    );
    expect((await api.get(`/sheets/${s.id}/commits/cmt_00000000000000000000`)).status).to.equal(404);
  });

  it('when a writer died after recording its commit but before moving the head, then the next write moves the head onto that commit first: it is neither lost nor applied twice', async () => {
    const s = await newSheet(api);
    const c2 = await ops(s.id, [{ op: 'set', cell: 'A1', value: 'recorded' }]);
    // Put the head back where it was before commit 2, as if its writer had crashed between the two writes.
    const heads = stack.db.db.collection(COLLECTIONS.sheets);
    const first = await stack.db.db.collection(COLLECTIONS.sheetCommits).findOne({ _id: s.headCommitId } as never);
    await heads.updateOne({ _id: s.id } as never, {
      $set: { version: 1, headCommitId: s.headCommitId, tree: first!.tree },
    });
    expect((await rowsOf(s.id))[0][0]).to.equal('Apple');
    const next = await ops(s.id, [{ op: 'set', cell: 'A2', value: 'next' }]);
    expect(next.status).to.equal(200);
    expect(next.body.commit).to.include({ seq: 3, parentId: c2.body.commit.id });
    const rows = await rowsOf(s.id);
    expect([rows[0][0], rows[1][0]]).to.deep.equal(['recorded', 'next']);
    expect((await api.get(`/sheets/${s.id}/commits`)).body.data.map((c: { seq: number }) => c.seq)).to.deep.equal([
      3, 2, 1,
    ]);
  });

  describe('with two API processes', () => {
    let a: ApiServer;
    let b: ApiServer;
    before(async () => {
      a = await startApi(stack.config2());
      b = await startApi(stack.config2());
    });
    after(async () => {
      await Promise.allSettled([a?.stop(), b?.stop()]);
    });

    it('when 20 op requests race on one sheet, then each is a merged commit, a clear 409 or (a stale If-Match) 412, the chain has no gaps and replaying it gives the grid', async function () {
      this.timeout(60_000);
      const { key } = await account(stack);
      const apis = [client(`http://127.0.0.1:${a.port}/api/v1`, key), client(`http://127.0.0.1:${b.port}/api/v1`, key)];
      const s = await newSheet(apis[0]!);
      // 16 plain requests (each appends a row and overwrites C1) and 4 that insist on version 1.
      const bodies = Array.from({ length: 20 }, (_, i) =>
        i % 5 === 4
          ? { ops: [{ op: 'set', cell: 'A1', value: `if-match ${i}` }], ifMatch: true }
          : {
              ops: [
                { op: 'appendRows', rows: [[`r${i}`, i]] },
                { op: 'set', cell: 'C1', value: i },
              ],
            },
      );
      const results = await Promise.all(
        bodies.map((body, i) =>
          apis[i % 2]!.post(`/sheets/${s.id}/ops`, { ops: body.ops }, body.ifMatch ? { 'if-match': '"1"' } : {}),
        ),
      );
      const merged = results.filter((r) => r.status === 200);
      for (const [i, r] of results.entries()) {
        expect([200, 409, 412], r.text).to.include(r.status);
        if (r.status === 409) expect(['version_conflict', 'conflict']).to.include(r.body.error.code);
        // A stale If-Match is a failed precondition; only the requests that sent one get it.
        if (r.status === 412)
          expect([r.body.error.code, bodies[i]!.ifMatch]).to.deep.equal(['precondition_failed', true]);
      }
      expect(merged.length).to.be.at.least(16);
      expect(results.filter((r, i) => i % 5 !== 4 && r.status !== 200)).to.have.length(0);

      // The merged chain: seq 1..n, each the parent of the next, one per 200 answer.
      const docs = await stack.db.db
        .collection(COLLECTIONS.sheetCommits)
        .find({ sheetId: s.id, kind: 'commit', status: 'merged' } as never)
        .sort({ seq: 1 })
        .toArray();
      expect(docs.map((d) => d.seq)).to.deep.equal(Array.from({ length: merged.length + 1 }, (_, i) => i + 1));
      for (const [i, d] of docs.entries()) expect(d.parentId).to.equal(i === 0 ? null : docs[i - 1]!._id);
      expect(new Set(merged.map((r) => r.body.commit.id))).to.deep.equal(new Set(docs.slice(1).map((d) => d._id)));
      const final = await apis[1]!.get(`/sheets/${s.id}?rowLimit=1000`);
      expect(final.body.version).to.equal(docs.length);
      expect(final.body.headCommitId).to.equal(docs.at(-1)!._id);

      // Replay the ops of the chain in order onto the created rows.
      const grid: unknown[][] = ROWS.map((r) => [...r]);
      for (const d of docs.slice(1)) {
        for (const op of JSON.parse(d.ops) as { op: string; rows?: unknown[][]; cell?: string; value?: unknown }[]) {
          if (op.op === 'appendRows') for (const r of op.rows!) grid.push([...r, ...Array(5 - r.length).fill(null)]);
          if (op.op === 'set') grid[Number(op.cell!.slice(1)) - 1]![op.cell!.charCodeAt(0) - 65] = op.value;
        }
      }
      expect(final.body.rows).to.deep.equal(grid);
    });
  });
});
