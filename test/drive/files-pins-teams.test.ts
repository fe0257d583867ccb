import { expect } from 'chai';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { SCOPES } from '../../contracts/registry';
import { putDriveBlob } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc, DriveFolderDoc } from '../../platform/drive/drive.types';
import { createTeams } from '../../platform/drive/teams.repository';
import { newId } from '../../platform/infra/ids';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const ids = (r: { body: { data: { id: string }[] } }) => r.body.data.map((f) => f.id).sort();

describe('Drive pinned keys and team drives', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
  });
  after(() => stack.stop());

  describe('a key pinned to folders', () => {
    let full: Client;
    let pinned: Client;
    const f: Record<string, string> = {};
    before(async () => {
      const a = await stack.createAccount();
      full = client(stack.baseUrl, a.key);
      const mk = async (name: string, parentFolderId?: string) =>
        (await full.post('/drive/folders', { name, ...(parentFolderId ? { parentFolderId } : {}) })).body.id as string;
      f.shared = await mk('Shared');
      f.inner = await mk('Inner', f.shared);
      f.private = await mk('Private');
      const up = async (name: string, folderId?: string) =>
        (await full.post('/drive/files', { name, content: name, ...(folderId ? { folderId } : {}) })).body.id as string;
      f.inShared = await up('in-shared.txt', f.shared);
      f.inInner = await up('in-inner.txt', f.inner);
      f.inPrivate = await up('in-private.txt', f.private);
      f.atRoot = await up('at-root.txt');
      const { key } = await stack.rt.accounts.forAccount(a.accountId).createKey({
        name: 'pinned',
        scopes: [...SCOPES],
        folderPins: [f.shared],
      });
      pinned = client(stack.baseUrl, key);
    });

    it('when it lists, then it sees only files and folders inside its pins, no storage meter, and the root or other folders are 404', async () => {
      const all = await pinned.get('/drive/files');
      expect(all.status).to.equal(200);
      expect(ids(all)).to.deep.equal([f.inShared, f.inInner].sort());
      expect(all.body.total).to.equal(2);
      expect(all.body.storage).to.equal(null);
      expect(all.body.folders.map((x: { id: string }) => x.id)).to.deep.equal([f.shared, f.inner]);
      expect(ids(await pinned.get(`/drive/files?folderId=${f.inner}`))).to.deep.equal([f.inInner]);
      expect((await pinned.get('/drive/files?folderId=root')).status).to.equal(404);
      expect((await pinned.get(`/drive/files?folderId=${f.private}`)).status).to.equal(404);
      const tree = await pinned.get('/drive/folders');
      expect(tree.body.data.map((x: { id: string }) => x.id)).to.deep.equal([f.shared, f.inner]);
      expect(tree.body.rootFileCount).to.equal(0);
      // The unpinned key of the same account still sees everything.
      expect((await full.get('/drive/files')).body.total).to.equal(4);
    });

    it('when it reads or writes outside its pins, then 404 (bulk: not_found per file), and inside works', async () => {
      expect((await pinned.get(`/drive/files/${f.inInner}`)).status).to.equal(200);
      for (const id of [f.inPrivate, f.atRoot]) {
        expect((await pinned.get(`/drive/files/${id}`)).status, id).to.equal(404);
        expect((await pinned.patch(`/drive/files/${id}`, { isStarred: true })).status, id).to.equal(404);
      }
      expect((await pinned.patch(`/drive/files/${f.inShared}`, { folderId: f.private })).status).to.equal(404);
      expect((await pinned.patch(`/drive/files/${f.inShared}`, { folderId: 'root' })).status).to.equal(404);
      expect((await pinned.patch(`/drive/folders/${f.private}`, { name: 'x' })).status).to.equal(404);
      expect((await pinned.patch(`/drive/folders/${f.inner}`, { parentFolderId: 'root' })).status).to.equal(404);
      expect((await pinned.post('/drive/folders', { name: 'top' })).status).to.equal(404);
      expect((await pinned.post('/drive/files', { name: 'root.txt', content: 'x' })).status).to.equal(404);
      expect((await pinned.post('/drive/files', { name: 'p.txt', content: 'x', folderId: f.private })).status).to.equal(
        404,
      );

      const star = await pinned.post('/drive/files/bulk', {
        fileIds: [f.inShared, f.inPrivate, f.atRoot, f.inInner],
        action: 'star',
      });
      expect(star.body.succeeded).to.deep.equal([f.inShared, f.inInner]);
      expect(star.body.failed).to.deep.equal([
        { fileId: f.inPrivate, reason: 'not_found' },
        { fileId: f.atRoot, reason: 'not_found' },
      ]);
      const move = await pinned.post('/drive/files/bulk', {
        fileIds: [f.inShared],
        action: 'move',
        folderId: f.private,
      });
      expect(move.body.failed).to.deep.equal([{ fileId: f.inShared, reason: 'folder_not_found' }]);
      const toRoot = await pinned.post('/drive/files/bulk', {
        fileIds: [f.inShared],
        action: 'move',
        folderId: 'root',
      });
      expect(toRoot.body.failed).to.deep.equal([{ fileId: f.inShared, reason: 'folder_not_found' }]);

      const sub = await pinned.post('/drive/folders', { name: 'Made by pinned', parentFolderId: f.inner });
      expect(sub.status).to.equal(201);
      const up = await pinned.post('/drive/files', { name: 'new.txt', content: 'x', folderId: sub.body.id });
      expect(up.status).to.equal(201);
      const inward = await pinned.post('/drive/files/bulk', {
        fileIds: [f.inShared],
        action: 'move',
        folderId: f.inner,
      });
      expect(inward.body.succeeded).to.deep.equal([f.inShared]);
      expect((await full.get(`/drive/files/${f.inPrivate}`)).body.isStarred).to.equal(false);
    });

    it('when a file leaves the pins between the bulk read and its update, then it is not changed and fails as not_found', async () => {
      const moving = (await full.post('/drive/files', { name: 'moving.txt', content: 'm', folderId: f.shared })).body
        .id as string;
      const staying = (await full.post('/drive/files', { name: 'staying.txt', content: 's', folderId: f.shared })).body
        .id as string;
      const files = stack.db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
      const original = Collection.prototype.updateOne;
      let moved = false;
      const stub = sinon.stub(Collection.prototype, 'updateOne').callsFake(async function (
        this: Collection,
        filter,
        update,
        opts,
      ) {
        if (!moved && this.collectionName === COLLECTIONS.driveFiles && (filter as { _id?: string })._id === moving) {
          moved = true; // the full key moves it to a folder outside the pins, right before the bulk's update
          await original.call(files, { _id: moving }, { $set: { folderId: f.private } });
        }
        return original.call(this, filter, update, opts);
      });
      try {
        const r = await pinned.post('/drive/files/bulk', { fileIds: [moving, staying], action: 'trash' });
        expect(r.body.succeeded).to.deep.equal([staying]);
        expect(r.body.failed).to.deep.equal([{ fileId: moving, reason: 'not_found' }]);
      } finally {
        stub.restore();
      }
      const doc = (await files.findOne({ _id: moving }))!;
      expect(doc.trashedAt).to.equal(null);
      expect(doc.folderId).to.equal(f.private);
    });

    it('when one file of a bulk fails unexpectedly, then it is reported as internal_error and the others still change', async () => {
      const ids = [];
      for (let i = 0; i < 5; i++)
        ids.push((await full.post('/drive/files', { name: `err-${i}.txt`, content: 'e' })).body.id as string);
      const victim = ids[2]!;
      const original = Collection.prototype.updateOne;
      const stub = sinon.stub(Collection.prototype, 'updateOne').callsFake(async function (
        this: Collection,
        filter,
        update,
        opts,
      ) {
        if (this.collectionName === COLLECTIONS.driveFiles && (filter as { _id?: string })._id === victim)
          throw new Error('connection reset');
        return original.call(this, filter, update, opts);
      });
      try {
        const r = await full.post('/drive/files/bulk', { fileIds: ids, action: 'star' });
        expect(r.status).to.equal(200);
        expect(r.body.succeeded).to.deep.equal(ids.filter((id) => id !== victim));
        expect(r.body.failed).to.deep.equal([{ fileId: victim, reason: 'internal_error' }]);
      } finally {
        stub.restore();
      }
    });
  });

  describe('team drives', () => {
    let owner: { api: Client; accountId: string };
    let member: { api: Client; accountId: string };
    let outsider: Client;
    let teamId: string;
    let teamFolder: string;
    let teamFile: string;
    before(async () => {
      const mk = async () => {
        const a = await stack.createAccount();
        return { api: client(stack.baseUrl, a.key), accountId: a.accountId };
      };
      owner = await mk();
      member = await mk();
      outsider = (await mk()).api;
      const teams = createTeams(stack.rt.store);
      const team = await teams.createTeam({ name: 'Design', ownerAccountId: owner.accountId });
      teamId = team._id;
      await teams.addMember(teamId, member.accountId, 'editor');
      const now = new Date();
      teamFolder = newId('dfo');
      await stack.db.db.collection<DriveFolderDoc>(COLLECTIONS.driveFolders).insertOne({
        _id: teamFolder,
        accountId: owner.accountId,
        teamId,
        name: 'Brand',
        nameKey: 'brand',
        parentFolderId: null,
        path: [],
        color: null,
        sticker: null,
        version: 1,
        createdAt: now,
        updatedAt: now,
      });
      teamFile = newId('dfl');
      const bytes = Buffer.from('team guidelines');
      const blob = await putDriveBlob(stack.rt.store, bytes, {
        accountId: owner.accountId,
        contentType: 'text/plain',
        filename: 'guide.txt',
        fileId: teamFile,
      });
      await stack.db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles).insertOne({
        _id: teamFile,
        accountId: owner.accountId,
        teamId,
        name: 'guide.txt',
        nameKey: 'guide.txt',
        ext: 'txt',
        kind: 'text',
        mimeType: 'text/plain',
        sizeBytes: bytes.length,
        folderId: teamFolder,
        isStarred: false,
        tags: [],
        description: '',
        blobId: blob.blobId,
        sha256: blob.sha256,
        trashedAt: null,
        lastAccessedAt: null,
        text: { status: 'pending', chars: 0, truncated: false, engine: null, error: null, at: null },
        version: 1,
        createdAt: now,
        updatedAt: now,
      });
    });

    it('when a member lists, then teams names the team, and with teamId the team drive is browsable: files, folders, scope', async () => {
      const mine = await member.api.get('/drive/files');
      expect(mine.body.teams).to.deep.equal([{ id: teamId, name: 'Design', role: 'editor' }]);
      expect(mine.body.total).to.equal(0);
      const team = await member.api.get(`/drive/files?teamId=${teamId}`);
      expect(team.status).to.equal(200);
      expect(ids(team)).to.deep.equal([teamFile]);
      expect(team.body.scope).to.deep.equal({ type: 'team', id: teamId, name: 'Design', role: 'editor' });
      expect(team.body.folders.map((x: { id: string; fileCount: number }) => [x.id, x.fileCount])).to.deep.equal([
        [teamFolder, 1],
      ]);
      expect(team.body.data[0]).to.include({ teamId, folderId: teamFolder });
      const tree = await member.api.get(`/drive/folders?teamId=${teamId}`);
      expect(tree.body.data.map((x: { id: string }) => x.id)).to.deep.equal([teamFolder]);
      const handle = await member.api.get(`/drive/files/${teamFile}`);
      expect(handle.status).to.equal(200);
      expect(handle.body.downloadUrl).to.be.a('string');
      expect((await owner.api.get('/drive/files')).body.teams).to.deep.equal([
        { id: teamId, name: 'Design', role: 'owner' },
      ]);
      expect((await owner.api.get('/drive/files')).body.total).to.equal(0); // team files are not in the personal drive
    });

    it('when a member writes to the team drive, then every write is 403 team_drive_read_only (bulk: per file)', async () => {
      const own = (await member.api.post('/drive/files', { name: 'own.txt', content: 'x' })).body.id;
      const writes = [
        await member.api.patch(`/drive/files/${teamFile}`, { isStarred: true }),
        await member.api.post('/drive/files', { name: 'x.txt', content: 'x', folderId: teamFolder }),
        await member.api.post('/drive/folders', { name: 'x', parentFolderId: teamFolder }),
        await member.api.patch(`/drive/folders/${teamFolder}`, { name: 'renamed' }),
        await member.api.patch(`/drive/files/${own}`, { folderId: teamFolder }),
      ];
      for (const w of writes) {
        expect(w.status, w.text).to.equal(403);
        expect(w.body.error.code).to.equal('team_drive_read_only');
      }
      for (const action of ['star', 'trash']) {
        const r = await member.api.post('/drive/files/bulk', { fileIds: [teamFile], action });
        expect(r.body.failed).to.deep.equal([{ fileId: teamFile, reason: 'team_drive_read_only' }]);
      }
      const move = await member.api.post('/drive/files/bulk', { fileIds: [own], action: 'move', folderId: teamFolder });
      expect(move.body.failed).to.deep.equal([{ fileId: own, reason: 'team_drive_read_only' }]);
      const stored = await stack.db.db.collection(COLLECTIONS.driveFiles).findOne({ _id: teamFile as never });
      expect(stored).to.include({ isStarred: false, trashedAt: null, version: 1 });
    });

    it('when someone outside the team asks, then the team and its files are 404', async () => {
      expect((await outsider.get(`/drive/files?teamId=${teamId}`)).status).to.equal(404);
      expect((await outsider.get(`/drive/folders?teamId=${teamId}`)).status).to.equal(404);
      expect((await outsider.get(`/drive/files/${teamFile}`)).status).to.equal(404);
      expect((await outsider.patch(`/drive/files/${teamFile}`, { isStarred: true })).status).to.equal(404);
      expect((await outsider.patch(`/drive/folders/${teamFolder}`, { name: 'x' })).status).to.equal(404);
      expect(
        (await outsider.post('/drive/files/bulk', { fileIds: [teamFile], action: 'star' })).body.failed,
      ).to.deep.equal([{ fileId: teamFile, reason: 'not_found' }]);
      expect((await outsider.get('/drive/files')).body.teams).to.deep.equal([]);
    });
  });
});
