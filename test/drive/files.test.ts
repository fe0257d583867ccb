import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import sharp from 'sharp';
import { Collection } from 'mongodb';
import sinon from 'sinon';
import { createDriveRepository } from '../../platform/drive/drive.repository';
import type { DriveUsageDoc } from '../../platform/drive/drive.types';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const b64 = (b: Buffer | Uint8Array) => Buffer.from(b).toString('base64');
const png = () =>
  sharp({ create: { width: 8, height: 8, channels: 3, background: '#3366cc' } })
    .png()
    .toBuffer();
async function pdf(text = 'Quarterly report') {
  const doc = await PDFDocument.create();
  const page = doc.addPage([300, 200]);
  page.drawText(text, { x: 20, y: 100, size: 14, font: await doc.embedFont(StandardFonts.Helvetica) });
  return Buffer.from(await doc.save());
}
/** The first bytes of an ELF executable (what `file-type` recognises), padded. */
const elf = () => Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0x00]), Buffer.alloc(120, 1)]);
/** A Windows PE executable header (MZ … PE\0\0). */
const pe = () => {
  const b = Buffer.alloc(256, 0);
  b.write('MZ', 0, 'latin1');
  b.writeUInt32LE(0x80, 0x3c);
  b.write('PE\0\0', 0x80, 'latin1');
  return b;
};

describe('Drive files: upload, read, update', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  const files = () => stack.db.db.collection(COLLECTIONS.driveFiles);

  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    const a = await stack.createAccount();
    api = client(stack.baseUrl, a.key);
    accountId = a.accountId;
  });
  after(() => stack.stop());

  describe('POST /drive/files', () => {
    it('when a Markdown file is sent as content, then 201 answers a DriveFile typed text/markdown and the bytes are in GridFS with their sha256, never in the answer', async () => {
      const r = await api.post('/drive/files', {
        name: 'Notes.md',
        content: '# Hello\n\nWorld ✓',
        tags: ['a', 'a', 'b'],
        description: 'first',
      });
      expect(r.status).to.equal(201);
      expect(r.body).to.include({
        name: 'Notes.md',
        kind: 'text',
        mimeType: 'text/markdown',
        ext: 'md',
        folderId: null,
        teamId: null,
        isStarred: false,
        description: 'first',
        trashedAt: null,
        lastAccessedAt: null,
        version: 1,
        textStatus: 'pending',
      });
      expect(r.body.id).to.match(/^dfl_/);
      expect(r.body.sizeBytes).to.equal(Buffer.byteLength('# Hello\n\nWorld ✓'));
      expect(r.body.tags).to.deep.equal(['a', 'b']);
      expect(r.body.previewPath).to.equal(`/drive/preview/${r.body.id}`);
      expect(r.body.previewUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/drive/preview/${r.body.id}`);
      expect(r.text).to.not.match(/blob|sha256|dbb_|nameKey/);
      const doc = await files().findOne({ _id: r.body.id });
      expect(doc).to.include({ accountId, nameKey: 'notes.md' });
      expect(doc!.sha256).to.equal(createHash('sha256').update('# Hello\n\nWorld ✓').digest('hex'));
      const chunks = await stack.db.db
        .collection(`${COLLECTIONS.driveBlobBucket}.chunks`)
        .find({ files_id: doc!.blobId })
        .toArray();
      expect(Buffer.concat(chunks.map((c) => Buffer.from(c.data.buffer))).toString('utf8')).to.equal(
        '# Hello\n\nWorld ✓',
      );
      const usage = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
      expect(usage).to.include({ fileCount: 1, bytesUsed: r.body.sizeBytes });
    });

    it('when the bytes say otherwise than the name, then the bytes win: a PNG named .txt is an image, executables named .pdf are not PDFs', async () => {
      const img = await api.post('/drive/files', { name: 'not-really.txt', contentBase64: b64(await png()) });
      expect(img.status).to.equal(201);
      expect(img.body).to.include({ kind: 'image', mimeType: 'image/png', ext: 'txt' });
      const exe = await api.post('/drive/files', { name: 'invoice.pdf', contentBase64: b64(elf()) });
      expect(exe.status).to.equal(201);
      expect(exe.body.kind).to.equal('other');
      expect(exe.body.mimeType).to.not.equal('application/pdf');
      const win = await api.post('/drive/files', { name: 'invoice2.pdf', contentBase64: b64(pe()) });
      expect(win.body).to.include({ kind: 'other', mimeType: 'application/x-msdownload' });
      const junk = await api.post('/drive/files', {
        name: 'random.pdf',
        contentBase64: b64(Buffer.from([0x00, 0x01, 0x02, 0x03, 0x9f, 0x80, 0x00])),
      });
      expect(junk.body).to.include({ kind: 'other', mimeType: 'application/octet-stream' });
    });

    it('when real PDF, PNG, CSV, JSON and code files are uploaded, then each gets its kind and mimeType', async () => {
      const cases: [string, Record<string, unknown>, string, string][] = [
        ['report.pdf', { contentBase64: b64(await pdf()) }, 'pdf', 'application/pdf'],
        ['photo.png', { contentBase64: b64(await png()) }, 'image', 'image/png'],
        ['table.csv', { content: 'a,b\n1,2\n' }, 'spreadsheet', 'text/csv'],
        ['data.json', { content: '{"a":1}' }, 'code', 'application/json'],
        ['page.html', { content: '<!doctype html><p>hi</p>' }, 'code', 'text/html'],
        ['script.py', { contentBase64: b64(Buffer.from('print("hi")\n')) }, 'code', 'text/x-python'],
        ['readme.txt', { content: 'plain' }, 'text', 'text/plain'],
      ];
      for (const [name, body, kind, mimeType] of cases) {
        const r = await api.post('/drive/files', { name, ...body });
        expect(r.status, name).to.equal(201);
        expect(r.body, name).to.include({ kind, mimeType });
      }
    });

    it('when a field breaks a rule, then 400 validation_error names it', async () => {
      const big = 'x'.repeat(2 * 1024 * 1024 + 1);
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ content: 'x' }, /^name: /],
        [{ name: 'noext', content: 'x' }, /^name: .*extension/],
        [{ name: 'a/b.txt', content: 'x' }, /^name: .*\//],
        [{ name: `${'n'.repeat(252)}.txt`, content: 'x' }, /^name: .*255/],
        [{ name: 'a.txt' }, /^content: .*exactly one/],
        [{ name: 'a.txt', content: 'x', contentBase64: 'eA==' }, /^contentBase64: .*exactly one/],
        [{ name: 'a.png', content: 'x' }, /^content: .*text files/],
        [{ name: 'a.txt', content: big }, /^content: .*2097152 bytes/],
        [{ name: 'a.txt', content: 'é'.repeat(1024 * 1024 + 1) }, /^content: .*bytes/],
        [
          { name: 'a.bin', contentBase64: 'data:application/octet-stream;base64,eA==' },
          /^contentBase64: .*data: prefix/,
        ],
        [{ name: 'a.bin', contentBase64: 'eA=' }, /^contentBase64: .*canonical/],
        [{ name: 'a.bin', contentBase64: 'eB==' }, /^contentBase64: .*canonical/],
        [{ name: 'a.bin', contentBase64: 'e A==' }, /^contentBase64: .*canonical/],
        [{ name: 'a.txt', content: 'x', description: 'd'.repeat(2001) }, /^description: .*2000/],
        [{ name: 'a.txt', content: 'x', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, /^tags: .*20/],
        [{ name: 'a.txt', content: 'x', folderId: '../x' }, /^folderId: /],
        [{ name: 'a.txt', content: 'x', extra: 1 }, /extra/],
      ];
      for (const [body, message] of cases) {
        const r = await api.post('/drive/files', body);
        expect(r.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
        expect(r.body.error.code).to.equal('validation_error');
        expect(r.body.error.message, JSON.stringify(body).slice(0, 80)).to.match(message);
      }
    });

    it('when contentBase64 decodes to exactly 4 MiB, then it is stored; one byte more is 400 naming contentBase64; a body over 6 MiB is 413 before parsing', async () => {
      const four = Buffer.alloc(4 * 1024 * 1024, 7);
      const ok = await api.post('/drive/files', { name: 'big.bin', contentBase64: b64(four) });
      expect(ok.status).to.equal(201);
      expect(ok.body).to.include({ sizeBytes: four.length, kind: 'other', mimeType: 'application/octet-stream' });
      const over = await api.post('/drive/files', {
        name: 'big2.bin',
        contentBase64: b64(Buffer.alloc(4 * 1024 * 1024 + 1, 7)),
      });
      expect(over.status).to.equal(400);
      expect(over.body.error.message).to.match(/^contentBase64: .*4194304/);
      const huge = await api.post(
        '/drive/files',
        JSON.stringify({ name: 'huge.bin', contentBase64: 'A'.repeat(6 * 1024 * 1024 + 8) }),
      );
      expect(huge.status).to.equal(413);
      expect(huge.body.error.code).to.equal('payload_too_large');
    });

    it('when the same name is uploaded three times into a folder, then the copies are named "report (1).pdf" and "report (2).pdf", case-insensitively', async () => {
      const folder = await api.post('/drive/folders', { name: 'Suffixes' });
      const names: string[] = [];
      for (const name of ['report.pdf', 'Report.pdf', 'report.pdf']) {
        const r = await api.post('/drive/files', { name, folderId: folder.body.id, contentBase64: b64(await pdf()) });
        expect(r.status).to.equal(201);
        names.push(r.body.name);
      }
      expect(names).to.deep.equal(['report.pdf', 'Report (1).pdf', 'report (2).pdf']);
      const elsewhere = await api.post('/drive/folders', { name: 'Elsewhere' });
      const other = await api.post('/drive/files', {
        name: 'report.pdf',
        folderId: elsewhere.body.id,
        contentBase64: b64(await pdf()),
      });
      expect(other.body.name).to.equal('report.pdf'); // another folder: no suffix
    });

    it('when eight uploads of one name race, then all succeed with eight distinct names', async () => {
      const folder = await api.post('/drive/folders', { name: 'Race' });
      const rs = await Promise.all(
        Array.from({ length: 8 }, () =>
          api.post('/drive/files', { name: 'notes.txt', folderId: folder.body.id, content: 'same' }),
        ),
      );
      expect(rs.map((r) => r.status)).to.deep.equal(Array(8).fill(201));
      const names = rs.map((r) => r.body.name).sort();
      expect(names).to.deep.equal([
        'notes (1).txt',
        'notes (2).txt',
        'notes (3).txt',
        'notes (4).txt',
        'notes (5).txt',
        'notes (6).txt',
        'notes (7).txt',
        'notes.txt',
      ]);
    });

    it('when folderId names a missing folder, then 404 and nothing is stored or counted', async () => {
      const before = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
      const r = await api.post('/drive/files', { name: 'x.txt', content: 'x', folderId: 'dfo_nope' });
      expect(r.status).to.equal(404);
      expect(r.body.error.message).to.match(/^folderId: /);
      const after = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
      expect(after).to.deep.equal(before);
    });

    it('when several uploads are the first ones into a new drive at once, then all are stored (201) and the meter equals their sum', async () => {
      const { key, accountId } = await stack.createAccount(); // a fresh drive, 10 GiB (pro)
      const api = client(stack.baseUrl, key);
      const sizes = Array.from({ length: 12 }, (_, i) => 100 + i);
      const rs = await Promise.all(
        sizes.map((n, i) =>
          api.post('/drive/files', { name: `first-${i}.bin`, contentBase64: b64(Buffer.alloc(n, i + 1)) }),
        ),
      );
      expect(
        rs.map((r) => r.status),
        rs.map((r) => r.text).join('\n'),
      ).to.deep.equal(sizes.map(() => 201));
      const usage = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
      expect(usage).to.include({ bytesUsed: sizes.reduce((a, b) => a + b, 0), fileCount: sizes.length });
    });
  });

  describe('GET and PATCH /drive/files/{id}', () => {
    it('when a file is read, then the handle carries an absolute signed downloadUrl valid about 15 minutes and the ETag', async () => {
      const f = await api.post('/drive/files', { name: 'handle.txt', content: 'hello' });
      const r = await api.get(`/drive/files/${f.body.id}`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('etag')).to.equal('"1"');
      expect(r.body).to.include({
        id: f.body.id,
        name: 'handle.txt',
        kind: 'text',
        mimeType: 'text/plain',
        sizeBytes: 5,
        folderId: null,
        trashedAt: null,
      });
      expect(r.body.downloadUrl).to.match(
        new RegExp(`^${stack.config.PUBLIC_BASE_URL}/api/v1/drive/downloads/${f.body.id}\\?`),
      );
      const ttl = (Date.parse(r.body.downloadExpiresAt) - Date.now()) / 1000;
      expect(ttl).to.be.within(850, 901);
      expect(r.text).to.not.match(/blobId|sha256/);
    });

    it('when a file is patched, then only the fields sent change, version moves on, and If-Match guards it', async () => {
      const folder = await api.post('/drive/folders', { name: 'Patch target' });
      const f = await api.post('/drive/files', {
        name: 'patch.txt',
        content: 'x',
        tags: ['keep'],
        description: 'keep me',
      });
      const star = await api.patch(`/drive/files/${f.body.id}`, { isStarred: true });
      expect(star.status).to.equal(200);
      expect(star.body).to.include({ isStarred: true, name: 'patch.txt', description: 'keep me', version: 2 });
      expect(star.body.tags).to.deep.equal(['keep']);
      const moved = await api.patch(
        `/drive/files/${f.body.id}`,
        { folderId: folder.body.id, name: 'renamed.md', tags: ['x', 'y'] },
        { 'if-match': '"2"' },
      );
      expect(moved.status).to.equal(200);
      expect(moved.body).to.include({
        folderId: folder.body.id,
        name: 'renamed.md',
        ext: 'md',
        isStarred: true,
        description: 'keep me',
        version: 3,
        kind: 'text',
        mimeType: 'text/plain',
      });
      const stale = await api.patch(`/drive/files/${f.body.id}`, { description: 'lost' }, { 'if-match': '"2"' });
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      const back = await api.patch(`/drive/files/${f.body.id}`, { folderId: 'root', description: '' });
      expect(back.body).to.include({ folderId: null, description: '' });
      const nul = await api.patch(`/drive/files/${f.body.id}`, { folderId: null });
      expect(nul.status).to.equal(200);
      expect((await files().findOne({ _id: f.body.id }))!.nameKey).to.equal('renamed.md');
    });

    it('when a rename or move would take a name already used in the folder, then 409 conflict and nothing changes', async () => {
      await api.post('/drive/files', { name: 'taken.txt', content: 'a' });
      const f = await api.post('/drive/files', { name: 'free.txt', content: 'b' });
      const r = await api.patch(`/drive/files/${f.body.id}`, { name: 'TAKEN.txt' });
      expect(r.status).to.equal(409);
      expect(r.body.error.code).to.equal('conflict');
      expect(r.body.error.message).to.match(/^name: /);
      expect((await api.get(`/drive/files/${f.body.id}`)).body).to.include({ name: 'free.txt', version: 1 });
    });

    it('when a PATCH breaks a rule, then 400 names the field', async () => {
      const f = await api.post('/drive/files', { name: 'rules.txt', content: 'a' });
      const cases: [Record<string, unknown>, RegExp][] = [
        [{}, /^body: /],
        [{ name: 'noext' }, /^name: /],
        [{ isStarred: 'yes' }, /^isStarred: /],
        [{ tags: Array(21).fill('t') }, /^tags: /],
        [{ description: 'd'.repeat(2001) }, /^description: /],
        [{ folderId: 7 }, /^folderId: /],
        [{ kind: 'pdf' }, /kind/],
      ];
      for (const [body, message] of cases) {
        const r = await api.patch(`/drive/files/${f.body.id}`, body);
        expect(r.status, JSON.stringify(body)).to.equal(400);
        expect(r.body.error.message, JSON.stringify(body)).to.match(message);
      }
      const missing = await api.patch(`/drive/files/${f.body.id}`, { folderId: 'dfo_missing' });
      expect(missing.status).to.equal(404);
      expect(missing.body.error.message).to.match(/^folderId: /);
      expect((await api.patch('/drive/files/dfl_missing', { isStarred: true })).status).to.equal(404);
      expect((await api.get('/drive/files/dfl_missing')).status).to.equal(404);
      expect((await api.get('/drive/files/..%2Fx')).status).to.equal(400);
    });
  });

  describe('scopes', () => {
    it('when a key has only read and write, then every Drive route of this part is 403; drive:read alone cannot write', async () => {
      const plain = client(stack.baseUrl, (await stack.createAccount({ scopes: ['read', 'write', 'ai'] })).key);
      const readOnly = client(stack.baseUrl, (await stack.createAccount({ scopes: ['drive:read'] })).key);
      const writes: [string, string, unknown][] = [
        ['POST', '/drive/files', { name: 'a.txt', content: 'a' }],
        ['PATCH', '/drive/files/dfl_x', { isStarred: true }],
        ['POST', '/drive/files/bulk', { fileIds: ['dfl_x'], action: 'star' }],
        ['POST', '/drive/folders', { name: 'x' }],
        ['PATCH', '/drive/folders/dfo_x', { name: 'y' }],
      ];
      const reads: [string, string, number][] = [
        ['GET', '/drive/files', 200],
        ['GET', '/drive/files/dfl_x', 404],
        ['GET', '/drive/folders', 200],
      ];
      for (const [m, p, b] of writes) {
        expect((await plain.call(m, p, b)).status, `${m} ${p}`).to.equal(403);
        expect((await readOnly.call(m, p, b)).status, `${m} ${p} with drive:read`).to.equal(403);
      }
      for (const [m, p, status] of reads) {
        expect((await plain.call(m, p)).status, `${m} ${p}`).to.equal(403);
        expect((await readOnly.call(m, p)).status, `${m} ${p} with drive:read`).to.equal(status);
      }
    });
  });
});

describe('Drive storage quota', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { DRIVE_QUOTA_BYTES: '{"free":0,"pro":10000,"teams":20000}' },
    });
  });
  after(() => stack.stop());

  it('when an upload would pass the plan quota, then 413 storage_quota_exceeded and the meter does not move; trashed files still count', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const a = await api.post('/drive/files', { name: 'a.bin', contentBase64: b64(Buffer.alloc(6000, 1)) });
    expect(a.status).to.equal(201);
    const b = await api.post('/drive/files', { name: 'b.bin', contentBase64: b64(Buffer.alloc(4001, 1)) });
    expect(b.status).to.equal(413);
    expect(b.body.error.code).to.equal('storage_quota_exceeded');
    const list = await api.get('/drive/files');
    expect(list.body.storage).to.deep.equal({ bytesUsed: 6000, quotaBytes: 10000, fileCount: 1 });
    const exact = await api.post('/drive/files', { name: 'c.bin', contentBase64: b64(Buffer.alloc(4000, 1)) });
    expect(exact.status).to.equal(201);
    await api.post('/drive/files/bulk', { fileIds: [exact.body.id], action: 'trash' });
    const again = await api.post('/drive/files', { name: 'd.txt', content: 'x' });
    expect(again.status).to.equal(413);
    const usage = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
    expect(usage).to.include({ bytesUsed: 10000, fileCount: 2 });
  });

  it('when ten uploads race for room for six, then exactly six are stored and the meter equals the stored bytes', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const rs = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        api.post('/drive/files', { name: `r${i}.bin`, contentBase64: b64(Buffer.alloc(1500, i + 1)) }),
      ),
    );
    expect(rs.filter((r) => r.status === 201)).to.have.length(6);
    expect(rs.filter((r) => r.status === 413)).to.have.length(4);
    const usage = await stack.db.db.collection(COLLECTIONS.driveUsage).findOne({ _id: accountId as never });
    expect(usage).to.include({ bytesUsed: 9000, fileCount: 6 });
    const blobs = await stack.db.db
      .collection(`${COLLECTIONS.driveBlobBucket}.files`)
      .countDocuments({ 'metadata.accountId': accountId });
    expect(blobs).to.equal(6);
  });

  it("when the meter of a new drive appears between a reservation's $inc and its read (another first upload created it), then the reservation retries and succeeds", async () => {
    const { accountId } = await stack.createAccount();
    const repo = createDriveRepository(stack.rt.store);
    // The repository keeps its collections to itself: the meter's reads are caught on the driver.
    const findOne = Collection.prototype.findOne as (this: Collection, ...a: unknown[]) => Promise<unknown>;
    let meterReads = 0;
    const stub = sinon.stub(Collection.prototype, 'findOne').callsFake(async function (
      this: Collection,
      ...args: unknown[]
    ) {
      if (this.collectionName === COLLECTIONS.driveUsage && ++meterReads === 1)
        await stack.db.db
          .collection<DriveUsageDoc>(COLLECTIONS.driveUsage)
          .insertOne({ _id: accountId, bytesUsed: 0, fileCount: 0 });
      return findOne.apply(this, args);
    } as never);
    try {
      await repo.reserve(accountId, 5000, 10_000);
    } finally {
      stub.restore();
    }
    expect(meterReads, 'the reservation read the meter').to.be.greaterThan(0);
    expect(await repo.usageOf(accountId)).to.deep.equal({ bytesUsed: 5000, fileCount: 1 });
    // Past the quota it is still refused, and the meter does not move.
    const err = await repo.reserve(accountId, 5001, 10_000).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as { code?: string }).code).to.equal('storage_quota_exceeded');
    expect(await repo.usageOf(accountId)).to.deep.equal({ bytesUsed: 5000, fileCount: 1 });
  });

  it('when the account is on the teams plan, then the meter shows the teams quota', async () => {
    const { key } = await stack.createAccount({ plan: 'teams' });
    const r = await client(stack.baseUrl, key).get('/drive/files');
    expect(r.body.storage.quotaBytes).to.equal(20000);
  });
});
