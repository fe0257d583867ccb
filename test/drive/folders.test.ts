import { expect } from 'chai';
import { isSingleEmoji } from '../../contracts/drive';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('Drive folders', () => {
  let stack: Stack;
  let api: Client;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    api = client(stack.baseUrl, (await stack.createAccount()).key);
  });
  after(() => stack.stop());

  const folder = async (name: string, extra: Record<string, unknown> = {}, c = api) => {
    const r = await c.post('/drive/folders', { name, ...extra });
    expect(r.status, r.text).to.equal(201);
    return r.body as { id: string; name: string; path: string[]; parentFolderId: string | null; version: number };
  };
  const stored = (id: string) => stack.db.db.collection(COLLECTIONS.driveFolders).findOne({ _id: id as never });

  it('when folders are created, then 201 answers id, parent, path, colour (normalised) and sticker; the tree lists parents first with file counts', async () => {
    const c = client(stack.baseUrl, (await stack.createAccount()).key);
    const work = await folder('Work', { color: '#3A7', sticker: '📁' }, c);
    expect(work).to.include({
      name: 'Work',
      parentFolderId: null,
      color: '#33aa77',
      sticker: '📁',
      fileCount: 0,
      version: 1,
      teamId: null,
    });
    expect(work.id).to.match(/^dfo_/);
    expect(work.path).to.deep.equal([]);
    const zeta = await folder('zeta', { parentFolderId: work.id, color: '#AABBCC' }, c);
    const alpha = await folder('alpha', { parentFolderId: work.id, sticker: '👩🏽‍💻' }, c);
    const deep = await folder('deep', { parentFolderId: alpha.id }, c);
    expect(deep.path).to.deep.equal([work.id, alpha.id]);
    const home = await folder('Home', { parentFolderId: 'root', sticker: '🇫🇷' }, c);
    expect(home.parentFolderId).to.equal(null);
    await c.post('/drive/files', { name: 'a.txt', content: 'a', folderId: alpha.id });
    await c.post('/drive/files', { name: 'b.txt', content: 'b', folderId: alpha.id });
    await c.post('/drive/files', { name: 'c.txt', content: 'c' });
    const t = await c.get('/drive/folders');
    expect(t.status).to.equal(200);
    expect(t.body.data.map((f: { name: string; fileCount: number }) => `${f.name}:${f.fileCount}`)).to.deep.equal([
      'Home:0',
      'Work:0',
      'alpha:2',
      'deep:0',
      'zeta:0',
    ]);
    expect(t.body).to.include({ total: 5, rootFileCount: 1 });
    expect(t.body.scope.type).to.equal('personal');
    expect(zeta).to.include({ color: '#aabbcc' });
  });

  it('when a folder body breaks a rule, then 400 names the field; a sibling with the same name is 409; a missing parent 404', async () => {
    const parent = await folder('Rules');
    const cases: [Record<string, unknown>, RegExp][] = [
      [{}, /^name: /],
      [{ name: '' }, /^name: /],
      [{ name: 'a/b' }, /^name: /],
      [{ name: 'x'.repeat(256) }, /^name: /],
      [{ name: 'ok', color: 'red' }, /^color: /],
      [{ name: 'ok', color: '#12345' }, /^color: /],
      [{ name: 'ok', sticker: 'ab' }, /^sticker: /],
      [{ name: 'ok', sticker: '👍👍' }, /^sticker: /],
      [{ name: 'ok', sticker: '' }, /^sticker: /],
      [{ name: 'ok', parentFolderId: '../x' }, /^parentFolderId: /],
      [{ name: 'ok', extra: true }, /extra/],
    ];
    for (const [body, message] of cases) {
      const r = await api.post('/drive/folders', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error.message, JSON.stringify(body)).to.match(message);
    }
    await folder('Child', { parentFolderId: parent.id });
    const dup = await api.post('/drive/folders', { name: 'CHILD', parentFolderId: parent.id });
    expect(dup.status).to.equal(409);
    expect(dup.body.error.code).to.equal('conflict');
    await folder('Child'); // another parent: fine
    const missing = await api.post('/drive/folders', { name: 'x', parentFolderId: 'dfo_missing' });
    expect(missing.status).to.equal(404);
    expect(missing.body.error.message).to.match(/^parentFolderId: /);
  });

  it('when a sticker is checked, then exactly one emoji grapheme passes', () => {
    for (const ok of ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇯🇵', '❤️', '1️⃣', '🏳️‍🌈']) expect(isSingleEmoji(ok), ok).to.equal(true);
    for (const bad of ['a', '😀😀', '😀 ', 'ab', '1', '#', '']) expect(isSingleEmoji(bad), bad).to.equal(false);
  });

  it('when a folder is patched, then it is renamed, recoloured, its sticker cleared, only those fields change, and If-Match guards it', async () => {
    const f = await folder('Patch me', { color: '#000000', sticker: '⭐' });
    const r = await api.patch(`/drive/folders/${f.id}`, { name: 'Patched', color: '#fff' });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ name: 'Patched', color: '#ffffff', sticker: '⭐', version: 2 });
    expect(r.headers.get('etag')).to.equal('"2"');
    const cleared = await api.patch(`/drive/folders/${f.id}`, { sticker: null, color: null }, { 'if-match': '"2"' });
    expect(cleared.body).to.include({ sticker: null, color: null, name: 'Patched', version: 3 });
    const stale = await api.patch(`/drive/folders/${f.id}`, { name: 'Lost' }, { 'if-match': '"2"' });
    expect(stale.status).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    expect((await api.patch(`/drive/folders/${f.id}`, {})).status).to.equal(400);
    expect((await api.patch(`/drive/folders/${f.id}`, { color: 'blue' })).body.error.message).to.match(/^color: /);
    expect((await api.patch('/drive/folders/dfo_missing', { name: 'x' })).status).to.equal(404);
  });

  it('when a folder moves, then it and every folder under it get the new path; into itself or its subtree is 409 folder_cycle', async () => {
    const a = await folder('A');
    const b = await folder('B', { parentFolderId: a.id });
    const c = await folder('C', { parentFolderId: b.id });
    const d = await folder('D', { parentFolderId: c.id });
    const x = await folder('X');
    for (const target of [a.id, b.id, d.id]) {
      const r = await api.patch(`/drive/folders/${a.id}`, { parentFolderId: target });
      expect(r.status, target).to.equal(409);
      expect(r.body.error.code).to.equal('folder_cycle');
      expect(r.body.error.message).to.match(/^parentFolderId: /);
    }
    const moved = await api.patch(`/drive/folders/${b.id}`, { parentFolderId: x.id });
    expect(moved.status).to.equal(200);
    expect(moved.body).to.include({ parentFolderId: x.id });
    expect(moved.body.path).to.deep.equal([x.id]);
    expect((await stored(c.id))!.path).to.deep.equal([x.id, b.id]);
    expect((await stored(d.id))!.path).to.deep.equal([x.id, b.id, c.id]);
    // Now A is empty; moving X under D would put X under itself.
    const cycle = await api.patch(`/drive/folders/${x.id}`, { parentFolderId: d.id });
    expect(cycle.body.error.code).to.equal('folder_cycle');
    const toRoot = await api.patch(`/drive/folders/${c.id}`, { parentFolderId: 'root' });
    expect(toRoot.body).to.include({ parentFolderId: null });
    expect((await stored(d.id))!.path).to.deep.equal([c.id]);
    const missing = await api.patch(`/drive/folders/${c.id}`, { parentFolderId: 'dfo_missing' });
    expect(missing.status).to.equal(404);
  });

  it('when two moves race to put two folders under each other, then one wins and no cycle is stored', async () => {
    const p = await folder('P');
    const q = await folder('Q');
    const [r1, r2] = await Promise.all([
      api.patch(`/drive/folders/${p.id}`, { parentFolderId: q.id }),
      api.patch(`/drive/folders/${q.id}`, { parentFolderId: p.id }),
    ]);
    expect([r1.status, r2.status].sort()).to.deep.equal([200, 409]);
    const sp = (await stored(p.id))!;
    const sq = (await stored(q.id))!;
    expect(sp.path.includes(q.id) && sq.path.includes(p.id)).to.equal(false);
  });

  it('when a move would nest deeper than 20 levels, then 409 limit_exceeded', async () => {
    let parent: string | undefined;
    const chain: string[] = [];
    for (let i = 0; i < 20; i++) {
      const f = await folder(`L${i}`, parent ? { parentFolderId: parent } : {});
      chain.push(f.id);
      parent = f.id;
    }
    const tooDeep = await api.post('/drive/folders', { name: 'L20', parentFolderId: parent });
    expect(tooDeep.status).to.equal(409);
    expect(tooDeep.body.error.code).to.equal('limit_exceeded');
    const side = await folder('Side');
    await folder('SideChild', { parentFolderId: side.id });
    const r = await api.patch(`/drive/folders/${side.id}`, { parentFolderId: chain[18] });
    expect(r.status).to.equal(409);
    expect(r.body.error.code).to.equal('limit_exceeded');
  });
});
