import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { SCOPES } from '../../contracts/registry';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { driveBlobCollections } from '../../platform/drive/blobs.repository';
import type {
  DriveFileDoc,
  DriveFolderDoc,
  DriveReservationDoc,
  DriveUsageDoc,
} from '../../platform/drive/drive.types';
import { DRIVE_PATHS_GRACE_MS } from '../../platform/drive/repair';
import {
  DRIVE_RESERVATION_CLAIM_MS,
  DRIVE_RESERVATION_GRACE_MS,
  driveUploadSteps,
  settleDriveReservation,
} from '../../platform/drive/reservations.repository';
import { client, eventually, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('Drive crash repair (drive.repair)', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;

  const db = () => stack.db;
  const files = () => db().db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  const folders = () => db().db.collection<DriveFolderDoc>(COLLECTIONS.driveFolders);
  const reservations = () => db().db.collection<DriveReservationDoc>(COLLECTIONS.driveReservations);
  const usageDocs = () => db().db.collection<DriveUsageDoc>(COLLECTIONS.driveUsage);
  const usage = async (id = accountId) => (await usageDocs().findOne({ _id: id }))!;
  const repair = (now = new Date()) => stack.scheduler!.tasks.repairDrive(now);
  /** A moment past every reservation's grace and every path mark's. */
  const later = () => new Date(Date.now() + DRIVE_RESERVATION_GRACE_MS + 1000);

  const blobs = () => driveBlobCollections(stack.rt.store);
  const blobState = async (blobId: string) => ({
    files: await blobs().files.countDocuments({ _id: blobId }),
    chunks: await blobs().chunks.countDocuments({ files_id: blobId }),
  });
  const orphanChunks = async () => {
    const ids = new Set(
      (
        await blobs()
          .files.find({}, { projection: { _id: 1 } })
          .toArray()
      ).map((d) => d._id),
    );
    return (
      await blobs()
        .chunks.find({}, { projection: { files_id: 1 } })
        .toArray()
    ).filter((c) => !ids.has(c.files_id)).length;
  };
  const meter = async () => {
    const u = await usage();
    return { bytesUsed: u.bytesUsed, fileCount: u.fileCount, reservedRefs: u.reservedRefs ?? [] };
  };
  const upload = (name: string, size: number, c = api) =>
    c.post('/drive/files', { name, contentBase64: randomBytes(size).toString('base64') });

  /**
   * An upload whose process "dies" when `step` is reached: the step throws and the upload's own
   * cleanup (abort) does not run, so what is stored is exactly what a crash there leaves.
   */
  const crashAt = async (step: 'reserve' | 'bytes' | 'commit', name: string, size: number) => {
    sinon.stub(driveUploadSteps, step).rejects(new Error(`crash at ${step}`));
    sinon.stub(driveUploadSteps, 'abort').resolves();
    const r = await upload(name, size);
    sinon.restore();
    expect(r.status, r.text).to.equal(500);
    const res = await reservations().findOne({ accountId }, { sort: { createdAt: -1 } });
    expect(res, 'the reservation the crash left').to.not.equal(null);
    return res!;
  };

  before(async () => {
    stack = await startStack({
      workers: false,
      env: { DRIVE_QUOTA_BYTES: '{"free":0,"pro":4000000,"teams":20000000}' },
    });
    const acc = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    accountId = acc.accountId;
    api = client(stack.baseUrl, acc.key);
    // The meter exists from here on (the baseline of every test).
    expect((await upload('first.bin', 10)).status).to.equal(201);
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  describe('uploads', () => {
    it('when an upload succeeds, then it leaves no reservation and no marker behind, and the meter counts it once', async () => {
      const before = await meter();
      const r = await upload('ok.bin', 4000);
      expect(r.status, r.text).to.equal(201);
      expect(await reservations().countDocuments({ accountId })).to.equal(0);
      expect(await meter()).to.deep.equal({
        bytesUsed: before.bytesUsed + 4000,
        fileCount: before.fileCount + 1,
        reservedRefs: [],
      });
      const f = (await files().findOne({ _id: r.body.id }))!;
      expect(await blobState(f.blobId)).to.deep.equal({ files: 1, chunks: 1 });
    });

    it('when the upload fails after its bytes (the record insert throws, the process lives), then it removes the bytes, gives the meter back and drops the reservation at once', async () => {
      const before = await meter();
      const insertOne = Collection.prototype.insertOne;
      sinon.stub(Collection.prototype, 'insertOne').callsFake(function (this: Collection, ...args: unknown[]) {
        if (this.collectionName === COLLECTIONS.driveFiles) return Promise.reject(new Error('connection reset'));
        return (insertOne as (...a: unknown[]) => unknown).apply(this, args);
      } as never);
      const r = await upload('fails.bin', 300_000);
      sinon.restore();
      expect(r.status).to.equal(500);
      expect(await reservations().countDocuments({ accountId })).to.equal(0);
      expect(await meter()).to.deep.equal(before);
      expect(
        await blobs().files.countDocuments({ 'metadata.accountId': accountId, filename: 'fails.bin' } as never),
      ).to.equal(0);
      expect(await orphanChunks()).to.equal(0);
    });

    it('when the quota refuses an upload (413), then no reservation stays and the meter does not move', async () => {
      const before = await meter();
      const r = await upload('huge.bin', 4_000_001 - before.bytesUsed);
      expect(r.status).to.equal(413);
      expect(await reservations().countDocuments({ accountId })).to.equal(0);
      expect(await meter()).to.deep.equal(before);
    });

    it('when the process dies after the reservation document, before the meter moved, then the repair drops it and gives nothing back', async () => {
      const before = await meter();
      const res = await crashAt('reserve', 'no-meter.bin', 5000);
      expect(await meter()).to.deep.equal(before);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 1, failed: 0 } });
      expect(await meter()).to.deep.equal(before);
      expect(await reservations().countDocuments({ _id: res._id })).to.equal(0);
    });

    it('when the process dies after the reservation (meter moved, no bytes yet), then the repair gives the meter back once after the grace period; a second run changes nothing', async () => {
      const before = await meter();
      const res = await crashAt('bytes', 'reserved.bin', 7000);
      expect(await meter()).to.deep.equal({
        bytesUsed: before.bytesUsed + 7000,
        fileCount: before.fileCount + 1,
        reservedRefs: [res._id],
      });
      expect(await blobState(res.blobId)).to.deep.equal({ files: 0, chunks: 0 });
      // Within its grace the upload may still be running: left alone.
      expect(await repair()).to.deep.include({ reservations: { kept: 0, released: 0, failed: 0 } });
      expect(await reservations().countDocuments({ _id: res._id })).to.equal(1);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 1, failed: 0 } });
      expect(await meter()).to.deep.equal(before);
      expect(await reservations().countDocuments({ _id: res._id })).to.equal(0);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 0, failed: 0 } });
      expect(await meter()).to.deep.equal(before);
    });

    it('when the process dies after the bytes, before the record, then the repair deletes the blob (chunks and files document) and gives the meter back once', async () => {
      const before = await meter();
      const res = await crashAt('commit', 'orphan.bin', 600_000);
      const stored = await blobState(res.blobId);
      expect(stored.files).to.equal(1);
      expect(stored.chunks).to.be.greaterThan(1);
      expect(await files().countDocuments({ _id: res.fileId })).to.equal(0);
      expect((await meter()).bytesUsed).to.equal(before.bytesUsed + 600_000);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 1, failed: 0 } });
      expect(await blobState(res.blobId)).to.deep.equal({ files: 0, chunks: 0 });
      expect(await orphanChunks()).to.equal(0);
      expect(await meter()).to.deep.equal(before);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 0, failed: 0 } });
      expect(await meter()).to.deep.equal(before);
    });

    it('when the process dies after the record, before dropping the reservation, then the repair keeps the file, its bytes and its meter share and only drops the reservation', async () => {
      sinon.stub(driveUploadSteps, 'close').resolves();
      const before = await meter();
      const r = await upload('recorded.bin', 9000);
      sinon.restore();
      expect(r.status, r.text).to.equal(201);
      const res = (await reservations().findOne({ fileId: r.body.id }))!;
      const after = { bytesUsed: before.bytesUsed + 9000, fileCount: before.fileCount + 1 };
      expect(await meter()).to.deep.equal({ ...after, reservedRefs: [res._id] });
      expect(await repair(later())).to.deep.include({ reservations: { kept: 1, released: 0, failed: 0 } });
      expect(await meter()).to.deep.equal({ ...after, reservedRefs: [] });
      expect(await reservations().countDocuments({ _id: res._id })).to.equal(0);
      expect(await blobState(res.blobId)).to.deep.equal({ files: 1, chunks: 1 });
      expect((await api.get(`/drive/files/${r.body.id}`)).status).to.equal(200);
      expect(await repair(later())).to.deep.include({ reservations: { kept: 0, released: 0, failed: 0 } });
      expect(await meter()).to.deep.equal({ ...after, reservedRefs: [] });
    });

    it('when two repairs run at once (two schedulers), then each reservation is settled once and the meter moves back once', async () => {
      const before = await meter();
      const left = [
        await crashAt('commit', 'race-1.bin', 1000),
        await crashAt('commit', 'race-2.bin', 2000),
        await crashAt('bytes', 'race-3.bin', 3000),
      ];
      expect((await meter()).bytesUsed).to.equal(before.bytesUsed + 6000);
      const now = later();
      const runs = await Promise.all([repair(now), repair(now)]);
      expect(runs.reduce((n, r) => n + r.reservations.released, 0)).to.equal(3);
      expect(runs.every((r) => r.reservations.failed === 0)).to.equal(true);
      expect(await meter()).to.deep.equal(before);
      for (const res of left) expect(await blobState(res.blobId)).to.deep.equal({ files: 0, chunks: 0 });
      expect(await reservations().countDocuments({ accountId })).to.equal(0);
    });

    it('when a settler died half-way (bytes deleted, meter given back, reservation still there) and its claim expired, then the next run finishes it without giving the meter back twice', async () => {
      const before = await meter();
      const res = await crashAt('commit', 'half.bin', 4000);
      // What a settler that claimed it at `t` leaves when it dies right before its last step.
      const t = later();
      await settleDriveReservation(stack.rt.store, res._id, { expiredBefore: t });
      expect(await meter()).to.deep.equal(before);
      await reservations().insertOne({ ...res, settlingAt: t });
      expect(await repair(t)).to.deep.include({ reservations: { kept: 0, released: 0, failed: 0 } }); // claimed: left to its settler
      expect(await repair(new Date(t.getTime() + DRIVE_RESERVATION_CLAIM_MS + 1000))).to.deep.include({
        reservations: { kept: 0, released: 1, failed: 0 },
      });
      expect(await meter()).to.deep.equal(before);
      expect(await reservations().countDocuments({ _id: res._id })).to.equal(0);
    });

    it('when an upload stalled past its grace and a settler took its reservation over, then the upload does not record the file and answers 409', async () => {
      const before = await meter();
      const commit = driveUploadSteps.commit;
      sinon.stub(driveUploadSteps, 'commit').callsFake(async (d, res) => {
        // The scheduler settles the reservation while the upload is stalled right before its record.
        expect(await settleDriveReservation(d, res._id)).to.equal('released');
        return commit.call(driveUploadSteps, d, res);
      });
      const r = await upload('stalled.bin', 3000);
      expect(r.status, r.text).to.equal(409);
      expect(await files().countDocuments({ accountId, name: 'stalled.bin' })).to.equal(0);
      expect(await meter()).to.deep.equal(before);
      expect(await orphanChunks()).to.equal(0);
    });
  });

  describe('folder moves', () => {
    /** Make a folder over the API (of the main account). */
    const folder = async (name: string, parentFolderId?: string) => {
      const r = await api.post('/drive/folders', { name, ...(parentFolderId ? { parentFolderId } : {}) });
      expect(r.status, r.text).to.equal(201);
      return r.body.id as string;
    };
    const pathOf = async (id: string) => (await folders().findOne({ _id: id }))!.path;
    /** A move whose rewrite of the descendants' paths throws (after the folder itself moved). */
    const failingMove = async (id: string, parentFolderId: string) => {
      const bulkWrite = Collection.prototype.bulkWrite;
      const stub = sinon.stub(Collection.prototype, 'bulkWrite').callsFake(function (
        this: Collection,
        ...args: unknown[]
      ) {
        if (this.collectionName === COLLECTIONS.driveFolders) return Promise.reject(new Error('connection reset'));
        return (bulkWrite as (...a: unknown[]) => unknown).apply(this, args);
      } as never);
      const r = await api.patch(`/drive/folders/${id}`, { parentFolderId });
      stub.restore();
      return r;
    };

    it('when a move succeeds, then the drive is not left marked', async () => {
      const a = await folder('Plain A');
      const b = await folder('Plain B');
      await folder('Plain child', a);
      expect((await api.patch(`/drive/folders/${a}`, { parentFolderId: b })).status).to.equal(200);
      expect((await usage()).pathsDirtyAt ?? null).to.equal(null);
    });

    it('when a move fails while rewriting the descendants, then their paths stay stale (a pinned key misses them) until the repair recomputes them; a second run changes nothing', async () => {
      const a = await folder('Old home');
      const c = await folder('Moving', a);
      const d = await folder('Deep', c);
      const b = await folder('New home');
      const inDeep = await api.post('/drive/files', { name: 'deep.txt', content: 'deep down', folderId: d });
      expect(inDeep.status).to.equal(201);
      const { key } = await stack.rt.accounts.forAccount(accountId).createKey({
        name: 'pinned to new home',
        scopes: [...SCOPES],
        folderPins: [b],
      });
      const pinned = client(stack.baseUrl, key);

      const r = await failingMove(c, b);
      expect(r.status).to.equal(500);
      expect(await pathOf(c)).to.deep.equal([b]);
      expect(await pathOf(d), 'stale').to.deep.equal([a, c]);
      expect((await usage()).pathsDirtyAt).to.be.instanceOf(Date);
      const seen = async () => ((await pinned.get('/drive/folders')).body.data as { id: string }[]).map((f) => f.id);
      expect(await seen()).to.deep.equal([b, c]);
      expect((await pinned.get(`/drive/files/${inDeep.body.id}`)).status).to.equal(404);

      // A fresh mark may belong to a move still running: left alone.
      expect(await repair()).to.deep.include({ paths: { repaired: 0, failed: 0 } });
      expect(await pathOf(d)).to.deep.equal([a, c]);

      expect(await repair(new Date(Date.now() + DRIVE_PATHS_GRACE_MS + 1000))).to.deep.include({
        paths: { repaired: 1, failed: 0 },
      });
      expect(await pathOf(d)).to.deep.equal([b, c]);
      expect((await usage()).pathsDirtyAt).to.equal(null);
      expect(await seen()).to.deep.equal([b, c, d]);
      expect((await pinned.get(`/drive/files/${inDeep.body.id}`)).status).to.equal(200);
      const list = await pinned.get(`/drive/files?folderId=${d}`);
      expect(list.body.data.map((f: { id: string }) => f.id)).to.deep.equal([inDeep.body.id]);

      const version = (await folders().findOne({ _id: d }))!.version;
      expect(await repair(new Date(Date.now() + DRIVE_PATHS_GRACE_MS + 1000))).to.deep.include({
        paths: { repaired: 0, failed: 0 },
      });
      expect((await folders().findOne({ _id: d }))!.version).to.equal(version);
    });

    it('when the next folder move comes before the repair, then it recomputes the stale paths first, so its cycle check sees the real tree', async () => {
      const x = await folder('X');
      const y = await folder('Y', x);
      const z = await folder('Z', y);
      const w = await folder('W');
      expect((await failingMove(y, w)).status).to.equal(500);
      expect(await pathOf(z), 'stale').to.deep.equal([x, y]);
      // W now holds Y and Z: moving W under Z is a cycle, which the stale path of Z would hide.
      const cycle = await api.patch(`/drive/folders/${w}`, { parentFolderId: z });
      expect(cycle.status).to.equal(409);
      expect(cycle.body.error.code).to.equal('folder_cycle');
      expect(await pathOf(z)).to.deep.equal([w, y]);
      expect((await usage()).pathsDirtyAt).to.equal(null);
    });

    it('when a move marks the drive again while a repair runs (the repair lost its lock), then the repair does not clear the new mark', async () => {
      const p = await folder('P');
      const q = await folder('Q', p);
      await folder('R', q);
      const s = await folder('S');
      expect((await failingMove(q, s)).status).to.equal(500);
      const bulkWrite = Collection.prototype.bulkWrite;
      const remark = new Date();
      sinon.stub(Collection.prototype, 'bulkWrite').callsFake(async function (this: Collection, ...args: unknown[]) {
        const out = await (bulkWrite as (...a: unknown[]) => Promise<unknown>).apply(this, args);
        // Meanwhile another process takes the (expired) lock and marks the drive for its own move.
        if (this.collectionName === COLLECTIONS.driveFolders)
          await usageDocs().updateOne(
            { _id: accountId },
            { $set: { folderLockToken: 'another', pathsDirtyAt: remark } },
          );
        return out;
      } as never);
      await repair(new Date(Date.now() + DRIVE_PATHS_GRACE_MS + 1000));
      sinon.restore();
      expect((await usage()).pathsDirtyAt).to.deep.equal(remark);
      await usageDocs().updateOne({ _id: accountId }, { $set: { folderLockToken: null, folderLockUntil: null } });
      expect(await repair(new Date(Date.now() + DRIVE_PATHS_GRACE_MS + 1000))).to.deep.include({
        paths: { repaired: 1, failed: 0 },
      });
      expect((await usage()).pathsDirtyAt).to.equal(null);
    });
  });

  it('when the scheduler runs, then Agenda keeps the drive.repair task every minute', async () => {
    const docs = await eventually(async () => {
      const d = await db().db.collection('scheduler_jobs').find({ name: 'drive.repair' }).toArray();
      return d.length ? d : null;
    });
    expect(docs[0]!.repeatInterval).to.equal('1 minute');
  });
});
