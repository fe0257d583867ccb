import { expect } from 'chai';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, newSheet } from './helpers';

describe('sheets: tenant isolation and scopes', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'sheet' } });
  });
  after(() => stack.stop());

  /** Every sheets route, filled with one sheet, one proposed commit of it and a merged commit to roll back to. */
  const routes = (id: string, commitId: string, rollbackTo: string) =>
    [
      { method: 'get', path: '/sheets', scope: 'read' },
      {
        method: 'post',
        path: '/sheets',
        scope: 'write',
        body: { name: 'x', columns: [{ name: 'a', type: 'string' }] },
      },
      { method: 'get', path: `/sheets/${id}`, scope: 'read' },
      { method: 'get', path: `/sheets/${id}/range?range=A1`, scope: 'read' },
      {
        method: 'post',
        path: `/sheets/${id}/ops`,
        scope: 'write',
        body: { ops: [{ op: 'set', cell: 'A1', value: 'x' }] },
      },
      { method: 'post', path: `/sheets/${id}/edit`, scope: 'ai', body: { instruction: 'sort by Item' } },
      { method: 'get', path: `/sheets/${id}/commits`, scope: 'read' },
      { method: 'get', path: `/sheets/${id}/commits/${commitId}`, scope: 'read' },
      { method: 'post', path: `/sheets/${id}/commits/${commitId}/resolve`, scope: 'write', body: { action: 'reject' } },
      { method: 'post', path: `/sheets/${id}/rollback`, scope: 'write', body: { commitId: rollbackTo } },
    ] as const;

  it("when a second account uses the first account's ids on every sheets route, then each answers 404 and shows none of the data", async () => {
    const owner = await account(stack);
    const s = await newSheet(owner.api);
    const p = await owner.api.post(`/sheets/${s.id}/ops`, {
      ops: [{ op: 'set', cell: 'A1', value: 'secret' }],
      propose: true,
    });
    const other = await account(stack);
    for (const r of routes(s.id, p.body.commit.id, s.headCommitId)) {
      if (r.path === '/sheets') continue;
      const res = await other.api.call(r.method.toUpperCase(), r.path, 'body' in r ? r.body : undefined);
      expect(res.status, `${r.method} ${r.path}`).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
      expect(res.text).to.not.contain('Apple').and.not.contain('secret');
    }
    // The other account's commit id under its own sheet is 404 too (commits are scoped to their sheet).
    const mine = await newSheet(other.api);
    expect((await other.api.get(`/sheets/${mine.id}/commits/${p.body.commit.id}`)).status).to.equal(404);
    expect((await other.api.post(`/sheets/${mine.id}/rollback`, { commitId: s.headCommitId })).status).to.equal(404);
    const list = await other.api.get('/sheets');
    expect(list.body.data.map((x: { id: string }) => x.id)).to.deep.equal([mine.id]);
    // Nothing changed for the owner, and the proposal is still open.
    const after = await owner.api.get(`/sheets/${s.id}`);
    expect(after.body.version).to.equal(1);
    expect((await owner.api.get(`/sheets/${s.id}/commits/${p.body.commit.id}`)).body.status).to.equal('proposed');
  });

  it('when a key lacks the scope of a route, then 403 forbidden: GETs need read, writes need write, edit needs ai', async () => {
    const owner = await account(stack);
    const s = await newSheet(owner.api);
    const p = await owner.api.post(`/sheets/${s.id}/ops`, {
      ops: [{ op: 'set', cell: 'A1', value: 'x' }],
      propose: true,
    });
    // Same account, narrower keys: scope is checked before anything else.
    const keyOf = async (scopes: ('read' | 'write' | 'ai')[]) =>
      (await stack.rt.accounts.forAccount(owner.accountId).createKey({ scopes })).key;
    const narrow = { read: await keyOf(['read']), write: await keyOf(['write']), ai: await keyOf(['ai']) };
    for (const r of routes(s.id, p.body.commit.id, s.headCommitId)) {
      for (const [scope, key] of Object.entries(narrow)) {
        const res = await client(stack.baseUrl, key).call(
          r.method.toUpperCase(),
          r.path,
          'body' in r ? r.body : undefined,
        );
        if (scope === r.scope)
          expect(res.status, `${scope} ${r.method} ${r.path}: ${res.text}`).to.be.oneOf([200, 201]);
        else {
          expect(res.status, `${scope} ${r.method} ${r.path}`).to.equal(403);
          expect(res.body.error.code).to.equal('forbidden');
        }
      }
    }
  });
});
