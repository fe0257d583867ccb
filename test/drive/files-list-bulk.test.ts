import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('Drive files: list and bulk', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { DRIVE_TRASH_DAYS: '30' } });
  });
  after(() => stack.stop());

  const fresh = async () => {
    const a = await stack.createAccount();
    return { api: client(stack.baseUrl, a.key), accountId: a.accountId };
  };
  const upload = async (api: Client, name: string, extra: Record<string, unknown> = {}) => {
    const r = await api.post('/drive/files', { name, content: `content of ${name}`, ...extra });
    expect(r.status, `${name}: ${r.text}`).to.equal(201);
    return r.body as { id: string; name: string; folderId: string | null };
  };

  describe('GET /drive/files', () => {
    it('when files sit in folders, then the list filters by folder, root, kind, starred and trash, with the tree, meter, scope and teams', async () => {
      const { api, accountId } = await fresh();
      const docs = (await api.post('/drive/folders', { name: 'Docs' })).body;
      const sub = (await api.post('/drive/folders', { name: 'Sub', parentFolderId: docs.id })).body;
      const a = await upload(api, 'a.md', { folderId: docs.id });
      const b = await upload(api, 'b.csv', { folderId: docs.id });
      const c = await upload(api, 'c.txt', { folderId: sub.id });
      const d = await upload(api, 'd.txt');
      await api.patch(`/drive/files/${b.id}`, { isStarred: true });
      await api.post('/drive/files/bulk', { fileIds: [d.id], action: 'trash' });

      const all = await api.get('/drive/files');
      expect(all.status).to.equal(200);
      expect(all.body.data.map((f: { id: string }) => f.id)).to.deep.equal([c.id, b.id, a.id]); // newest first, trashed left out
      expect(all.body).to.include({ total: 3, hasMore: false, cursor: null });
      expect(all.body.scope).to.deep.equal({
        type: 'personal',
        id: accountId,
        name: all.body.scope.name,
        role: 'owner',
      });
      expect(all.body.teams).to.deep.equal([]);
      expect(all.body.storage).to.deep.include({ fileCount: 4 });
      expect(
        all.body.folders.map((f: { id: string; fileCount: number; parentFolderId: string | null }) => [
          f.id,
          f.fileCount,
          f.parentFolderId,
        ]),
      ).to.deep.equal([
        [docs.id, 2, null],
        [sub.id, 1, docs.id],
      ]);

      const ids = async (q: string) => (await api.get(`/drive/files?${q}`)).body.data.map((f: { id: string }) => f.id);
      expect(await ids(`folderId=${docs.id}`)).to.deep.equal([b.id, a.id]);
      expect(await ids('folderId=root')).to.deep.equal([]);
      expect(await ids('folderId=root&trash=true')).to.deep.equal([d.id]);
      expect(await ids('kind=spreadsheet')).to.deep.equal([b.id]);
      expect(await ids('starred=true')).to.deep.equal([b.id]);
      expect(await ids('starred=false')).to.deep.equal([c.id, a.id]);
      expect(await ids('trash=true')).to.deep.equal([d.id]);
      expect((await api.get('/drive/files?trash=true')).body.data[0].trashedAt).to.be.a('string');
    });

    it('when the list is paged, then keyset cursors walk every file once and hasMore tells the end', async () => {
      const { api } = await fresh();
      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.push((await upload(api, `p${i}.txt`)).id);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r: {
          status: number;
          body: { total: number; hasMore: boolean; cursor: string | null; data: { id: string }[] };
        } = await api.get(`/drive/files?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(r.status).to.equal(200);
        expect(r.body.total).to.equal(5);
        expect(r.body.hasMore).to.equal(r.body.cursor !== null);
        seen.push(...r.body.data.map((f: { id: string }) => f.id));
        cursor = r.body.cursor;
        pages++;
      } while (cursor);
      expect(pages).to.equal(3);
      expect(seen).to.deep.equal([...made].reverse());
    });

    it('when a query breaks a rule, then 400 names it; an unknown folder or team is 404', async () => {
      const { api } = await fresh();
      for (const [q, field] of [
        ['limit=0', 'limit'],
        ['limit=101', 'limit'],
        ['kind=movie', 'kind'],
        ['starred=yes', 'starred'],
        ['trash=1', 'trash'],
        ['folderId=a/b', 'folderId'],
        ['cursor=nonsense', 'cursor'],
        ['teamId=%00', 'teamId'],
      ]) {
        const r = await api.get(`/drive/files?${q}`);
        expect(r.status, q).to.equal(400);
        expect(r.body.error.message, q).to.match(new RegExp(`^${field}: `));
      }
      expect((await api.get('/drive/files?folderId=dfo_none')).status).to.equal(404);
      expect((await api.get('/drive/files?teamId=team_none')).status).to.equal(404);
    });
  });

  describe('POST /drive/files/bulk', () => {
    it("when 100 files are bulk-trashed with some already trashed, unknown or another account's, then each is reported and the rest are trashed", async () => {
      const { api } = await fresh();
      const other = await fresh();
      const theirs = await upload(other.api, 'theirs.txt');
      const mine: string[] = [];
      for (let i = 0; i < 95; i++) mine.push((await upload(api, `f${i}.txt`)).id);
      await api.post('/drive/files/bulk', { fileIds: mine.slice(0, 3), action: 'trash' });
      const fileIds = [...mine, 'dfl_unknown1', 'dfl_unknown2', theirs.id, 'dfl_unknown3', 'dfl_unknown4', mine[10]!];
      expect(fileIds).to.have.length(101);
      const tooMany = await api.post('/drive/files/bulk', { fileIds, action: 'trash' });
      expect(tooMany.status).to.equal(400);
      expect(tooMany.body.error.message).to.match(/^fileIds: /);
      const r = await api.post('/drive/files/bulk', {
        fileIds: fileIds.slice(0, 100).concat(mine[10]!),
        action: 'trash',
      });
      // 101 ids with a duplicate: still refused (the limit counts what is sent)
      expect(r.status).to.equal(400);
      const ok = await api.post('/drive/files/bulk', { fileIds: fileIds.slice(0, 100), action: 'trash' });
      expect(ok.status).to.equal(200);
      expect(ok.body.action).to.equal('trash');
      expect(ok.body.succeeded).to.deep.equal(mine.slice(3));
      expect(ok.body.failed).to.deep.equal([
        ...mine.slice(0, 3).map((fileId) => ({ fileId, reason: 'already_trashed' })),
        { fileId: 'dfl_unknown1', reason: 'not_found' },
        { fileId: 'dfl_unknown2', reason: 'not_found' },
        { fileId: theirs.id, reason: 'not_found' },
        { fileId: 'dfl_unknown3', reason: 'not_found' },
        { fileId: 'dfl_unknown4', reason: 'not_found' },
      ]);
      expect((await other.api.get(`/drive/files/${theirs.id}`)).body.trashedAt).to.equal(null);
      const trashed = await stack.db.db
        .collection(COLLECTIONS.driveFiles)
        .countDocuments({ _id: { $in: mine as never[] }, trashedAt: { $ne: null } });
      expect(trashed).to.equal(95);
      // A trashed file has no download link.
      expect((await api.get(`/drive/files/${mine[50]}`)).body).to.include({
        downloadUrl: null,
        downloadExpiresAt: null,
      });
    });

    it('when files are restored, then only trashed ones within the window come back, under a free name when theirs was taken', async () => {
      const { api } = await fresh();
      const a = await upload(api, 'same.txt');
      const old = await upload(api, 'old.txt');
      const active = await upload(api, 'active.txt');
      await api.post('/drive/files/bulk', { fileIds: [a.id, old.id], action: 'trash' });
      const b = await upload(api, 'same.txt'); // the name is free again while a is trashed
      expect(b.name).to.equal('same.txt');
      await stack.db.db
        .collection(COLLECTIONS.driveFiles)
        .updateOne({ _id: old.id as never }, { $set: { trashedAt: new Date(Date.now() - 31 * 86_400_000) } });
      const r = await api.post('/drive/files/bulk', { fileIds: [a.id, old.id, active.id, a.id], action: 'restore' });
      expect(r.status).to.equal(200);
      expect(r.body.succeeded).to.deep.equal([a.id]);
      expect(r.body.failed).to.deep.equal([
        { fileId: old.id, reason: 'restore_window_expired' },
        { fileId: active.id, reason: 'not_trashed' },
      ]);
      const back = await api.get(`/drive/files/${a.id}`);
      expect(back.body).to.include({ name: 'same (1).txt', trashedAt: null });
      expect(back.body.downloadUrl).to.be.a('string');
    });

    it('when files are moved, starred and unstarred, then each moves atomically, a clash takes a suffix, and a bad destination fails per file', async () => {
      const { api } = await fresh();
      const other = await fresh();
      const theirFolder = (await other.api.post('/drive/folders', { name: 'Theirs' })).body;
      const dest = (await api.post('/drive/folders', { name: 'Dest' })).body;
      await upload(api, 'clash.txt', { folderId: dest.id });
      const x = await upload(api, 'clash.txt');
      const y = await upload(api, 'y.txt');
      const z = await upload(api, 'z.txt');
      await api.post('/drive/files/bulk', { fileIds: [z.id], action: 'trash' });

      const cross = await api.post('/drive/files/bulk', {
        fileIds: [x.id, y.id],
        action: 'move',
        folderId: theirFolder.id,
      });
      expect(cross.body).to.deep.equal({
        action: 'move',
        succeeded: [],
        failed: [
          { fileId: x.id, reason: 'folder_not_found' },
          { fileId: y.id, reason: 'folder_not_found' },
        ],
      });
      const missing = await api.post('/drive/files/bulk', { fileIds: [x.id], action: 'move', folderId: 'dfo_nothing' });
      expect(missing.body.failed).to.deep.equal([{ fileId: x.id, reason: 'folder_not_found' }]);
      expect((await other.api.get(`/drive/files?folderId=${theirFolder.id}`)).body.total).to.equal(0);

      const moved = await api.post('/drive/files/bulk', {
        fileIds: [x.id, y.id, z.id],
        action: 'move',
        folderId: dest.id,
      });
      expect(moved.body.succeeded).to.deep.equal([x.id, y.id]);
      expect(moved.body.failed).to.deep.equal([{ fileId: z.id, reason: 'trashed' }]);
      expect((await api.get(`/drive/files/${x.id}`)).body).to.include({ folderId: dest.id, name: 'clash (1).txt' });
      const again = await api.post('/drive/files/bulk', { fileIds: [y.id], action: 'move', folderId: dest.id });
      expect(again.body.succeeded).to.deep.equal([y.id]);
      const home = await api.post('/drive/files/bulk', { fileIds: [y.id], action: 'move', folderId: 'root' });
      expect(home.body.succeeded).to.deep.equal([y.id]);
      expect((await api.get(`/drive/files/${y.id}`)).body.folderId).to.equal(null);

      const star = await api.post('/drive/files/bulk', { fileIds: [x.id, y.id, z.id], action: 'star' });
      expect(star.body).to.deep.equal({
        action: 'star',
        succeeded: [x.id, y.id],
        failed: [{ fileId: z.id, reason: 'trashed' }],
      });
      const v = (await api.get(`/drive/files/${x.id}`)).body.version;
      const starAgain = await api.post('/drive/files/bulk', { fileIds: [x.id], action: 'star' });
      expect(starAgain.body.succeeded).to.deep.equal([x.id]);
      expect((await api.get(`/drive/files/${x.id}`)).body.version).to.equal(v); // no change, no new version
      const unstar = await api.post('/drive/files/bulk', { fileIds: [x.id], action: 'unstar' });
      expect(unstar.body.succeeded).to.deep.equal([x.id]);
      expect((await api.get(`/drive/files/${x.id}`)).body.isStarred).to.equal(false);
    });

    it('when a bulk body breaks a rule, then 400 names the field', async () => {
      const { api } = await fresh();
      const cases: [unknown, RegExp][] = [
        [{ fileIds: [], action: 'star' }, /^fileIds: /],
        [{ fileIds: ['a/b'], action: 'star' }, /^fileIds\.0: /],
        [{ fileIds: ['dfl_a'], action: 'delete' }, /^action: /],
        [{ fileIds: ['dfl_a'], action: 'move' }, /^folderId: .*required/],
        [{ fileIds: ['dfl_a'], action: 'star', folderId: 'root' }, /^folderId: .*only for move/],
        [{ fileIds: 'dfl_a', action: 'star' }, /^fileIds: /],
      ];
      for (const [body, message] of cases) {
        const r = await api.post('/drive/files/bulk', body);
        expect(r.status, JSON.stringify(body)).to.equal(400);
        expect(r.body.error.message, JSON.stringify(body)).to.match(message);
      }
    });
  });
});
