import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { driveBlobCollections } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc, DriveUsageDoc } from '../../platform/drive/drive.types';
import { PURGE_CLAIM_MS, purgeSteps, purgeTrashedDriveFiles } from '../../platform/drive/purge';
import {
  allIndexDocuments,
  DRIVE_INDEX_LIMITS,
  indexDriveFile,
  forwardId,
  removeDriveTextIndex,
  tokenCollection,
} from '../../platform/drive/search-index.repository';
import { client, eventually, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const DAY = 86_400_000;

describe('Drive trash purge (drive.purge)', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;

  const db = () => stack.db;
  const files = () => db().db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  const usage = async () =>
    (await db().db.collection<DriveUsageDoc>(COLLECTIONS.driveUsage).findOne({ _id: accountId }))!;
  const purge = (now = new Date()) => purgeTrashedDriveFiles(stack.rt, { now });

  /** Documents of the search index that name the file (postings, pages, forward document). */
  const indexMentions = async (fileId: string) =>
    (await allIndexDocuments(stack.rt.store)).filter((d) => JSON.stringify(d).includes(fileId)).length;

  /** Upload, index its text (as the drive pool would), trash it and age the trash by `days`. */
  const trashed = async (name: string, days: number, size = 600_000) => {
    const r = await api.post('/drive/files', { name, contentBase64: randomBytes(size).toString('base64') });
    expect(r.status, r.text).to.equal(201);
    const id = r.body.id as string;
    const doc = (await files().findOne({ _id: id }))!;
    await db()
      .db.collection(COLLECTIONS.driveTexts)
      .updateOne(
        { _id: id as never },
        {
          $set: {
            accountId,
            teamId: null,
            content: 'quarterly zebra figures',
            truncated: false,
            engine: 'test',
            at: new Date(),
          },
        },
        { upsert: true },
      );
    await indexDriveFile(stack.rt.store, doc, 'quarterly zebra figures');
    expect(await indexMentions(id), 'indexed').to.be.greaterThan(1);
    const t = await api.post('/drive/files/bulk', { fileIds: [id], action: 'trash' });
    expect(t.body.succeeded).to.deep.equal([id]);
    await files().updateOne({ _id: id }, { $set: { trashedAt: new Date(Date.now() - days * DAY) } });
    return (await files().findOne({ _id: id }))!;
  };

  /** Everything the purge must remove of a file is gone, and no chunk anywhere lacks its files document. */
  const expectPurged = async (f: DriveFileDoc) => {
    const blobs = driveBlobCollections(stack.rt.store);
    expect(await files().countDocuments({ _id: f._id }), 'record').to.equal(0);
    expect(
      await db()
        .db.collection(COLLECTIONS.driveTexts)
        .countDocuments({ _id: f._id as never }),
      'text',
    ).to.equal(0);
    expect(
      await tokenCollection(stack.rt.store).countDocuments({ _id: forwardId(f._id) } as never),
      'forward index',
    ).to.equal(0);
    expect(await indexMentions(f._id), 'search postings').to.equal(0);
    expect(await blobs.files.countDocuments({ _id: f.blobId }), 'GridFS files doc').to.equal(0);
    expect(await blobs.chunks.countDocuments({ files_id: f.blobId }), 'GridFS chunks').to.equal(0);
  };
  const orphanChunks = async () => {
    const blobs = driveBlobCollections(stack.rt.store);
    const ids = new Set((await blobs.files.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    return (await blobs.chunks.find({}, { projection: { files_id: 1 } }).toArray()).filter((c) => !ids.has(c.files_id))
      .length;
  };

  before(async () => {
    stack = await startStack({ workers: false });
    // Agenda runs drive.purge once at start, then every 15 minutes: let that first run pass so
    // the runs below are the only ones.
    await eventually(
      async () =>
        (await db()
          .db.collection('scheduler_jobs')
          .findOne({ name: 'drive.purge', lastFinishedAt: { $ne: null } })) ?? null,
      15_000,
      'the first drive.purge run',
    );
    const acc = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    accountId = acc.accountId;
    api = client(stack.baseUrl, acc.key);
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  it('when a file has been in the trash past DRIVE_TRASH_DAYS, then its text, postings, bytes, meter share and record go; younger and active files stay', async () => {
    const active = await api.post('/drive/files', { name: 'keep.txt', content: 'keep me' });
    const young = await trashed('young.bin', 29);
    const old = await trashed('old.bin', 31);
    const before = await usage();
    const r = await purge();
    expect(r).to.include({ purged: 1, failed: 0 });
    await expectPurged(old);
    const after = await usage();
    expect(after.bytesUsed).to.equal(before.bytesUsed - old.sizeBytes);
    expect(after.fileCount).to.equal(before.fileCount - 1);
    expect(after.purgedRefs ?? []).to.not.include(old._id);
    expect(await files().countDocuments({ _id: { $in: [young._id, active.body.id] } })).to.equal(2);
    expect(await orphanChunks()).to.equal(0);
    // Over the API: gone for good; restore fails per file; the young one still restores.
    expect((await api.get(`/drive/files/${old._id}`)).status).to.equal(404);
    const restore = await api.post('/drive/files/bulk', { fileIds: [old._id, young._id], action: 'restore' });
    expect(restore.body.failed).to.deep.equal([{ fileId: old._id, reason: 'not_found' }]);
    expect(restore.body.succeeded).to.deep.equal([young._id]);
    expect((await api.get('/drive/files?limit=100')).body.storage).to.deep.equal({
      bytesUsed: after.bytesUsed,
      quotaBytes: (await api.get('/drive/files')).body.storage.quotaBytes,
      fileCount: after.fileCount,
    });
  });

  it('when the purge runs twice, then the second run finds nothing and changes nothing', async () => {
    const f = await trashed('twice.bin', 40, 1000);
    expect(await purge()).to.include({ purged: 1, failed: 0 });
    const meter = await usage();
    expect(await purge()).to.include({ purged: 0, failed: 0 });
    expect(await usage()).to.deep.equal(meter);
    await expectPurged(f);
  });

  for (const step of ['text', 'tokens', 'bytes', 'meter', 'record'] as const) {
    it(`when a purge fails once at step "${step}", then the next run finishes it (claimed meanwhile: no restore): meter moved once, no orphan chunks`, async () => {
      const f = await trashed(`crash-${step}.bin`, 31, 300_000);
      const before = await usage();
      sinon
        .stub(purgeSteps, step)
        .callThrough()
        .onFirstCall()
        .rejects(new Error(`crash at ${step}`));
      expect(await purge()).to.include({ purged: 0, failed: 1 });
      const mid = await files().findOne({ _id: f._id });
      expect(mid!.purgingAt).to.be.instanceOf(Date);
      const restore = await api.post('/drive/files/bulk', { fileIds: [f._id], action: 'restore' });
      expect(restore.body.succeeded).to.deep.equal([]);
      expect(await orphanChunks()).to.equal(0);
      // While the claim is fresh no run touches it; the first run after it resumes and finishes it.
      expect(await purge()).to.include({ purged: 0, failed: 0 });
      expect(await purge(new Date(Date.now() + PURGE_CLAIM_MS + 1000))).to.include({ purged: 1, failed: 0 });
      await expectPurged(f);
      const after = await usage();
      expect(after.bytesUsed).to.equal(before.bytesUsed - f.sizeBytes);
      expect(after.fileCount).to.equal(before.fileCount - 1);
      expect(await orphanChunks()).to.equal(0);
    });
  }

  it('when the process died between the chunks and the GridFS files document, then the next run removes the rest', async () => {
    const f = await trashed('half.bin', 31, 600_000);
    const blobs = driveBlobCollections(stack.rt.store);
    expect(await blobs.chunks.countDocuments({ files_id: f.blobId })).to.be.greaterThan(1);
    // What the bytes step leaves when it dies half-way: the claim, the chunks gone, the files document not yet.
    await files().updateOne({ _id: f._id }, { $set: { purgingAt: new Date() } });
    await blobs.chunks.deleteMany({ files_id: f.blobId });
    const before = await usage();
    expect(await purge(new Date(Date.now() + PURGE_CLAIM_MS + 1000))).to.include({ purged: 1, failed: 0 });
    await expectPurged(f);
    expect((await usage()).bytesUsed).to.equal(before.bytesUsed - f.sizeBytes);
  });

  it('when two runs purge at once (two schedulers), then each file is purged once and the meter moves once per file', async () => {
    const list = [
      await trashed('race-1.bin', 35, 2000),
      await trashed('race-2.bin', 35, 3000),
      await trashed('race-3.bin', 35, 4000),
    ];
    const before = await usage();
    const runs = await Promise.all([purge(), purge(), purge()]);
    expect(runs.reduce((n, r) => n + r.purged, 0)).to.equal(3);
    expect(runs.every((r) => r.failed === 0)).to.equal(true);
    for (const f of list) await expectPurged(f);
    const after = await usage();
    expect(after.bytesUsed).to.equal(before.bytesUsed - 9000);
    expect(after.fileCount).to.equal(before.fileCount - 3);
  });

  it('when many files are purged, then no meter marker is left behind (purgedRefs stays empty)', async () => {
    const list = [];
    for (let i = 0; i < 6; i++) list.push(await trashed(`many-${i}.bin`, 33, 500 + i));
    const before = await usage();
    expect(await purge()).to.include({ purged: 6, failed: 0 });
    const after = await usage();
    expect(after.purgedRefs ?? []).to.deep.equal([]);
    expect(after.bytesUsed).to.equal(before.bytesUsed - list.reduce((n, f) => n + f.sizeBytes, 0));
    expect(after.fileCount).to.equal(before.fileCount - 6);
  });

  it('when the process dies right after the meter step, then the resumed purge does not move the meter again and clears the marker', async () => {
    const f = await trashed('after-meter.bin', 31, 7000);
    const before = await usage();
    // The crash: the meter step ran, nothing after it.
    sinon.stub(purgeSteps, 'record').onFirstCall().rejects(new Error('crash after meter'));
    expect(await purge()).to.include({ purged: 0, failed: 1 });
    const mid = await usage();
    expect(mid.bytesUsed).to.equal(before.bytesUsed - 7000);
    expect(mid.purgedRefs).to.include(f._id);
    sinon.restore();
    expect(await purge(new Date(Date.now() + PURGE_CLAIM_MS + 1000))).to.include({ purged: 1, failed: 0 });
    await expectPurged(f);
    const after = await usage();
    expect(after.bytesUsed).to.equal(before.bytesUsed - 7000);
    expect(after.fileCount).to.equal(before.fileCount - 1);
    expect(after.purgedRefs ?? []).to.not.include(f._id);
  });

  it('when indexing a longer text dies before its final update, then the removal still finds every page', async () => {
    const r = await api.post('/drive/files', { name: 'pages.txt', content: 'pages' });
    const doc = (await files().findOne({ _id: r.body.id }))!;
    await indexDriveFile(stack.rt.store, doc, 'short zebra text');
    const long = Array.from({ length: 3 * DRIVE_INDEX_LIMITS.pageChars }, (_, i) =>
      i % 7 === 6 ? ' ' : 'abcdefghij'[i % 10],
    ).join('');
    // The crash: the claim and the pages are written, the final update of the forward document is not.
    const original = Collection.prototype.updateOne;
    const stub = sinon.stub(Collection.prototype, 'updateOne').callsFake(function (
      this: Collection,
      filter,
      update,
      opts,
    ) {
      const set = (update as { $set?: Record<string, unknown> }).$set;
      if ((filter as { _id?: string })._id === forwardId(doc._id) && set && !('tokens' in set))
        return Promise.reject(new Error('crash before the final update'));
      return original.call(this, filter, update, opts);
    });
    try {
      await indexDriveFile(stack.rt.store, doc, long).then(
        () => expect.fail('the indexing should have failed'),
        (err: Error) => expect(err.message).to.equal('crash before the final update'),
      );
    } finally {
      stub.restore();
    }
    const pagesOf = async () =>
      (await allIndexDocuments(stack.rt.store)).filter((d) => d._id.startsWith(`pg:${doc._id}:`)).length;
    expect(await pagesOf()).to.be.greaterThan(1);
    await removeDriveTextIndex(stack.rt.store, doc);
    expect(await pagesOf()).to.equal(0);
    expect(await indexMentions(doc._id)).to.equal(0);
  });

  it('when a run stalls past its claim and another finishes the file, then the stalled run repeating its steps changes nothing', async () => {
    const f = await trashed('stalled.bin', 31, 5000);
    const before = await usage();
    expect(await purge()).to.include({ purged: 1 });
    const meter = await usage();
    expect(meter.bytesUsed).to.equal(before.bytesUsed - 5000);
    // The stalled run wakes up and goes on from where it was.
    for (const step of ['text', 'tokens', 'bytes', 'meter', 'record', 'unmark'] as const)
      await purgeSteps[step](stack.rt.store, f);
    expect(await usage()).to.deep.equal(meter);
    await expectPurged(f);
  });

  it('when a file is restored before the purge claims it, then it is not purged', async () => {
    const f = await trashed('saved.bin', 31, 1000);
    const stub = sinon.stub(purgeSteps, 'mark').callsFake(async (d, file, cutoff, now) => {
      // The user restores it just before the claim (restore is refused once claimed).
      await files().updateOne({ _id: file._id }, { $set: { trashedAt: null } });
      return stub.wrappedMethod.call(purgeSteps, d, file, cutoff, now);
    });
    expect(await purge()).to.include({ purged: 0, failed: 0 });
    expect(await files().countDocuments({ _id: f._id })).to.equal(1);
  });

  it('when the scheduler runs, then Agenda keeps the drive.purge task', async () => {
    const docs = await eventually(async () => {
      const d = await db().db.collection('scheduler_jobs').find({ name: 'drive.purge' }).toArray();
      return d.length ? d : null;
    });
    expect(docs[0]!.repeatInterval).to.equal('15 minutes');
    expect(typeof stack.scheduler!.tasks.purgeDriveTrash).to.equal('function');
  });
});
