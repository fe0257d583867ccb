import { expect } from 'chai';
import sinon from 'sinon';
import sharp from 'sharp';
import JSZip from 'jszip';
import { broker } from '../../contracts/registry';
import { putDriveBlob } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc, DriveTextDoc } from '../../platform/drive/drive.types';
import { forwardId, indexCollections, postingsId } from '../../platform/drive/search-index.repository';
import { createTeams } from '../../platform/drive/teams.repository';
import { requestDriveText } from '../../platform/drive/text-queue';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { createTasks } from '../../scheduler/tasks';
import { extractDriveText } from '../../workers/drive/drive.worker';
import { TooLargeError } from '../../workers/engines/drive/drive-text.engine';
import { assertZipInflateWithin } from '../../workers/engines/drive/zip-guard';
import { client, eventually, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { b64, makeDocx, makePdf, makePptx, makeXlsx, upload, waitForText } from './text-documents';

/** Words separated by single spaces, `n` characters or a little more. */
const prose = (n: number, seed = 'lorem') => {
  const words = [seed, 'ipsum', 'dolor', 'sit', 'amet', 'consectetur', 'adipiscing', 'elit', 'sed', 'do', 'eiusmod'];
  const out: string[] = [];
  let len = 0;
  for (let i = 0; len < n; i++) {
    const w = words[i % words.length]!;
    out.push(w);
    len += w.length + 1;
  }
  return out.join(' ');
};

/** `office` with one more entry, `bytes` zeros deflated (a few KB stored). */
async function padOffice(office: Buffer, entry: string, bytes: number): Promise<Buffer> {
  const zip = await JSZip.loadAsync(office);
  zip.file(entry, Buffer.alloc(bytes, 0x20), { compression: 'DEFLATE', compressionOptions: { level: 9 } });
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
}

/** The ZIP with `entry`'s uncompressed size rewritten to `size` in its local header and its central directory record. */
function lieAboutSizes(zip: Buffer, entry: string, size: number): Buffer {
  const out = Buffer.from(zip);
  const name = Buffer.from(entry);
  let patched = 0;
  for (let i = 0; i + 46 <= out.length; i++) {
    const sig = out.readUInt32LE(i);
    if (
      sig === 0x04034b50 &&
      out.readUInt16LE(i + 26) === name.length &&
      out.subarray(i + 30, i + 30 + name.length).equals(name)
    ) {
      out.writeUInt32LE(size, i + 22); // local file header: uncompressed size
      patched++;
    } else if (
      sig === 0x02014b50 &&
      out.readUInt16LE(i + 28) === name.length &&
      out.subarray(i + 46, i + 46 + name.length).equals(name)
    ) {
      out.writeUInt32LE(size, i + 24); // central directory: uncompressed size
      patched++;
    }
  }
  if (patched !== 2) throw new Error(`patched ${patched} headers of ${entry}, expected 2`);
  return out;
}

describe('Drive text: extraction by the drive pool and GET /drive/files/{id}/text', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  const files = () => stack.db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  const texts = () => stack.db.db.collection<DriveTextDoc>(COLLECTIONS.driveTexts);
  const ctx = () => ({ signal: new AbortController().signal, log: stack.rt.log, priorDeliveries: 0 });
  /** Make the API's publishes to the drive pool fail (the extraction request is lost). */
  const losePublishes = () => {
    const original = stack.rt.amqp.publishToPool.bind(stack.rt.amqp);
    return sinon
      .stub(stack.rt.amqp, 'publishToPool')
      .callsFake((pool, body, opts) =>
        pool === 'drive' ? Promise.reject(new Error('broker away')) : original(pool, body, opts),
      );
  };

  before(async () => {
    stack = await startStack({
      env: {
        WORKER_POOLS: 'drive',
        DRIVE_TEXT_STORED_CHARS: '20000',
        DRIVE_TEXT_INFLATED_MAX_BYTES: String(1024 * 1024),
      },
      scheduler: false,
    });
    const a = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    api = client(stack.baseUrl, a.key);
    accountId = a.accountId;
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  it('when a PDF, a DOCX, an XLSX, a PPTX, a Markdown and a TypeScript file are uploaded, then each text follows: ready, read by its engine, stored and answered', async () => {
    const cases: { name: string; body: Record<string, unknown>; engine: string; has: string[] }[] = [
      {
        name: 'report.pdf',
        body: {
          contentBase64: b64(
            await makePdf([['Quarterly revenue grew', 'in the northern region'], ['Second page mentions the harbour']]),
          ),
        },
        engine: 'pdfjs-text-v1',
        has: ['Quarterly revenue grew\nin the northern region', 'Second page mentions the harbour'],
      },
      {
        name: 'letter.docx',
        body: { contentBase64: b64(await makeDocx(['Dear committee,', 'The proposal covers solar panels.'])) },
        engine: 'mammoth-docx-v1',
        has: ['Dear committee,', 'The proposal covers solar panels.'],
      },
      {
        name: 'budget.xlsx',
        body: {
          contentBase64: b64(
            await makeXlsx([
              {
                name: 'Costs',
                rows: [
                  ['Item', 'Amount'],
                  ['Rent', 1200],
                  ['Coffee beans', 35.5],
                ],
              },
              { name: 'Notes', rows: [['approved by finance']] },
            ]),
          ),
        },
        engine: 'ooxml-xlsx-v1',
        has: ['# Costs\nItem\tAmount\nRent\t1200\nCoffee beans\t35.5\n# Notes\napproved by finance'],
      },
      {
        name: 'deck.pptx',
        body: {
          contentBase64: b64(
            await makePptx([
              { title: 'Roadmap', lines: ['Launch in spring', 'Hire two engineers'] },
              { title: 'Risks', lines: ['Supply chain'] },
            ]),
          ),
        },
        engine: 'pptx-xml-v1',
        has: ['Roadmap', 'Launch in spring', 'Hire two engineers', 'Risks', 'Supply chain'],
      },
      {
        name: 'notes.md',
        body: { content: '# Meeting\n\nWe agreed on the **timeline**.\n' },
        engine: 'utf8-text-v1',
        has: ['# Meeting\n\nWe agreed on the **timeline**.'],
      },
      {
        name: 'util.ts',
        body: { contentBase64: b64(Buffer.from('export function add(a: number, b: number) {\n  return a + b;\n}\n')) },
        engine: 'utf8-text-v1',
        has: ['export function add(a: number, b: number) {\n  return a + b;\n}'],
      },
    ];
    const ids: string[] = [];
    for (const c of cases) ids.push(await upload(api, { name: c.name, ...c.body }));
    for (const [i, c] of cases.entries()) {
      const r = await waitForText(api, ids[i]!);
      expect(r.body, c.name).to.include({ textStatus: 'ready', engine: c.engine, truncated: false, textError: null });
      expect(r.body.file).to.include({ id: ids[i], name: c.name, textStatus: 'ready' });
      for (const h of c.has) expect(r.body.content, c.name).to.contain(h);
      const doc = await texts().findOne({ _id: ids[i]! });
      expect(doc, c.name).to.include({
        accountId,
        teamId: null,
        engine: c.engine,
        truncated: false,
        content: r.body.content,
      });
      const file = await files().findOne({ _id: ids[i]! });
      expect(file!.text).to.include({
        status: 'ready',
        chars: r.body.content.length,
        truncated: false,
        engine: c.engine,
        error: null,
      });
      expect(file!.version, 'extraction is not a change of the file').to.equal(1);
    }
  });

  it('when a file holds no text we read, then textStatus is none and content empty: an image, bytes that are not UTF-8, and a text file whose bytes are not UTF-8', async () => {
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ff0000' } })
      .png()
      .toBuffer();
    const latin1 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x6e, 0x6f, 0xc3, 0x28]);
    const img = await upload(api, { name: 'photo.png', contentBase64: b64(png) });
    const bad = await upload(api, { name: 'latin1.txt', contentBase64: b64(latin1) });
    const r1 = await waitForText(api, img);
    expect(r1.body).to.include({ textStatus: 'none', content: '', truncated: false, engine: null });
    const r2 = await waitForText(api, bad);
    expect(r2.body).to.include({ textStatus: 'none', content: '' });
    expect(await texts().countDocuments({ _id: { $in: [img, bad] } })).to.equal(0);
    // A file stored as text whose bytes are not UTF-8 (the upload types such bytes as `other`, but
    // the extractor checks on its own): refused as none by utf8-text-v1.
    const blob = await putDriveBlob(stack.rt.store, latin1, {
      accountId,
      contentType: 'text/plain',
      filename: 'legacy.txt',
    });
    const now = new Date();
    const id = `dfl_latin${Date.now().toString(36)}`;
    await files().insertOne({
      _id: id,
      accountId,
      teamId: null,
      name: 'legacy.txt',
      nameKey: 'legacy.txt',
      ext: 'txt',
      kind: 'text',
      mimeType: 'text/plain',
      sizeBytes: latin1.length,
      folderId: null,
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
    expect(await extractDriveText(stack.workers!.runtime, { fileId: id, accountId }, ctx())).to.equal('none');
    const r3 = await api.get(`/drive/files/${id}/text`);
    expect(r3.body).to.include({ textStatus: 'none', content: '', engine: 'utf8-text-v1' });
    expect(r3.body.textError).to.match(/not valid UTF-8/);
  });

  it('when a document cannot be read (a damaged PDF), then textStatus is failed with the reason', async () => {
    const broken = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(400, 0x41), Buffer.from('\n%%EOF\n')]);
    const id = await upload(api, { name: 'broken.pdf', contentBase64: b64(broken) });
    const r = await waitForText(api, id);
    expect(r.body).to.include({ textStatus: 'failed', content: '', engine: 'pdfjs-text-v1' });
    expect(r.body.textError).to.match(/PDF could not be read/);
  });

  it('when a DOCX or XLSX lies in its ZIP headers (small declared sizes, inflating far past the limit), then it is refused after counting the bytes really inflated, and the worker goes on', async () => {
    // The stack runs with DRIVE_TEXT_INFLATED_MAX_BYTES = 1 MB; the padding entry inflates to 8 MB but declares 100 bytes.
    const bomb = async (office: Buffer) =>
      lieAboutSizes(await padOffice(office, 'word/padding.xml', 8 * 1024 * 1024), 'word/padding.xml', 100);
    const docx = await bomb(await makeDocx(['Nothing to see.']));
    const xlsx = await bomb(await makeXlsx([{ name: 'S', rows: [['nothing']] }]));
    // The headers really lie: the declared-size check alone lets them through.
    const declared = await JSZip.loadAsync(docx);
    expect(
      (declared.files['word/padding.xml'] as unknown as { _data: { uncompressedSize: number } })._data.uncompressedSize,
    ).to.equal(100);
    let refused: unknown;
    await assertZipInflateWithin(docx, new AbortController().signal, 1024 * 1024).catch(
      (err: unknown) => (refused = err),
    );
    expect(refused).to.be.instanceOf(TooLargeError);
    await assertZipInflateWithin(await makeDocx(['A small document.']), new AbortController().signal, 1024 * 1024); // an honest file passes

    for (const [name, bytes, engine] of [
      ['bomb.docx', docx, 'mammoth-docx-v1'],
      ['bomb.xlsx', xlsx, 'ooxml-xlsx-v1'],
    ] as const) {
      const id = await upload(api, { name, contentBase64: b64(bytes) });
      const r = await waitForText(api, id);
      expect(r.body, name).to.include({ textStatus: 'failed', content: '', engine });
      expect(r.body.textError, name).to.equal('the document inflates to more than 1 MB');
    }
    // The worker is still there: a normal document after them is extracted.
    const ok = await upload(api, {
      name: 'after.docx',
      contentBase64: b64(await makeDocx(['Still extracting after the bombs.'])),
    });
    const r = await waitForText(api, ok);
    expect(r.body).to.include({ textStatus: 'ready', content: 'Still extracting after the bombs.' });
  });

  it('when a text is longer than 12,000 characters, then the answer is cut on a word boundary and truncated; past DRIVE_TEXT_STORED_CHARS the stored text is cut too', async () => {
    const short = prose(11_000, 'short');
    const long = prose(30_000, 'long');
    const s = await upload(api, { name: 'short.txt', content: short });
    const l = await upload(api, { name: 'long.txt', content: long });
    const rs = await waitForText(api, s);
    expect(rs.body).to.include({ textStatus: 'ready', truncated: false, content: short });
    const rl = await waitForText(api, l);
    expect(rl.body.truncated).to.equal(true);
    expect(rl.body.content.length).to.be.within(10_800, 12_000);
    expect(long.startsWith(rl.body.content)).to.equal(true);
    expect(long[rl.body.content.length]).to.equal(' '); // ends on a whole word
    const stored = await texts().findOne({ _id: l });
    expect(stored!.truncated).to.equal(true);
    expect(stored!.content.length).to.be.within(18_000, 20_000);
    expect(long.startsWith(stored!.content)).to.equal(true);
    expect((await files().findOne({ _id: l }))!.text).to.include({ truncated: true, chars: stored!.content.length });
  });

  it('when the extraction request is lost, then the text answers 200 pending with Retry-After, and the scheduler sweep republishes it after the grace period', async () => {
    const lose = losePublishes();
    const id = await upload(api, { name: 'lost.md', content: 'The lighthouse keeper logs every ship.' });
    const r = await api.get(`/drive/files/${id}/text`);
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ textStatus: 'pending', content: '', truncated: false, engine: null });
    expect(r.headers.get('retry-after')).to.equal('2');
    lose.restore();
    const tasks = createTasks(stack.rt);
    expect(await tasks.sweepDriveText(new Date())).to.deep.equal({ republished: 0, failed: 0 }); // within the grace period
    expect(await tasks.sweepDriveText(new Date(Date.now() + 31_000))).to.deep.equal({ republished: 1, failed: 0 });
    const done = await waitForText(api, id);
    expect(done.body).to.include({ textStatus: 'ready', content: 'The lighthouse keeper logs every ship.' });
    expect(await tasks.sweepDriveText(new Date(Date.now() + 600_000))).to.deep.equal({ republished: 0, failed: 0 });
    expect((await files().findOne({ _id: id }))!.textRequests).to.equal(1);
  });

  it('when no worker ever finishes, then the sweep republishes with a backoff (30 s, 1, 2, 4, 8, 16 min) and then marks the text failed', async () => {
    losePublishes();
    const id = await upload(api, { name: 'never.md', content: 'nobody reads this' });
    const created = (await files().findOne({ _id: id }))!.createdAt.getTime();
    const tasks = createTasks(stack.rt);
    let at = created + 31_000;
    const sweepAt = (ms: number) => tasks.sweepDriveText(new Date(ms));
    for (let n = 0; n < 6; n++) {
      expect(await sweepAt(at), `republish ${n + 1}`).to.deep.equal({ republished: 1, failed: 0 });
      expect(await sweepAt(at + 30_000 * 2 ** (n + 1) - 1000), `too early after ${n + 1}`).to.deep.equal({
        republished: 0,
        failed: 0,
      });
      at += 30_000 * 2 ** (n + 1) + 1000;
    }
    expect(await sweepAt(at)).to.deep.equal({ republished: 0, failed: 1 });
    const r = await api.get(`/drive/files/${id}/text`);
    expect(r.body).to.include({ textStatus: 'failed', content: '' });
    expect(r.body.textError).to.match(/no drive worker finished/);
  });

  it('when a file is trashed before its extraction runs, then the worker skips it and leaves it pending; a file still pending is extracted once, and again harmlessly', async () => {
    const lose = losePublishes();
    const id = await upload(api, { name: 'trashed.md', content: 'meanwhile trashed' });
    lose.restore();
    expect((await api.post('/drive/files/bulk', { fileIds: [id], action: 'trash' })).body.succeeded).to.deep.equal([
      id,
    ]);
    const wrt = stack.workers!.runtime;
    expect(await extractDriveText(wrt, { fileId: id, accountId }, ctx())).to.equal('skipped');
    expect((await files().findOne({ _id: id }))!.text.status).to.equal('pending');
    expect(await texts().countDocuments({ _id: id })).to.equal(0);

    await api.post('/drive/files/bulk', { fileIds: [id], action: 'restore' });
    expect(await extractDriveText(wrt, { fileId: id, accountId }, ctx())).to.equal('ready');
    expect(await extractDriveText(wrt, { fileId: id, accountId }, ctx()), 'not pending any more').to.equal('skipped');
    // Forced again (as a redelivery racing the first run would): same text, one posting entry.
    await files().updateOne({ _id: id }, { $set: { 'text.status': 'pending' } });
    expect(await extractDriveText(wrt, { fileId: id, accountId }, ctx())).to.equal('ready');
    expect((await texts().findOne({ _id: id }))!.content).to.equal('meanwhile trashed');
    const pid = postingsId(accountId, 'meanwhile');
    const posting = await stack.db.db
      .collection<{ _id: string; p: string }>(indexCollections.postings)
      .findOne({ _id: pid });
    expect(posting!.p.split(' ').filter((e) => e.startsWith(`${id}:`))).to.have.length(1);
    expect(
      await stack.db.db.collection<{ _id: string }>(indexCollections.forward).findOne({ _id: forwardId(id) }),
    ).to.include({ fileId: id, scope: accountId });
  });

  it('when a message was delivered 3 times without an ack (the extraction kept stopping the worker), then it is given up as failed', async () => {
    const lose = losePublishes();
    const id = await upload(api, { name: 'poison.md', content: 'crashes every time' });
    lose.restore();
    expect(
      await extractDriveText(stack.workers!.runtime, { fileId: id, accountId }, { ...ctx(), priorDeliveries: 3 }),
    ).to.equal('failed');
    const r = await api.get(`/drive/files/${id}/text`);
    expect(r.body).to.include({ textStatus: 'failed', content: '' });
    expect(r.body.textError).to.match(/given up/);
  });

  it('when a message does not match the drive pool contract, then it is dead-lettered (poison message)', async () => {
    const wamqp = stack.workers!.runtime.amqp;
    const dead = new Promise<{ queue: string }>((resolve) => wamqp.once('deadLetter', resolve));
    await stack.rt.amqp.publish('', broker.poolQueue(stack.config.QUEUE_PREFIX, 'drive'), { nope: true });
    expect((await dead).queue).to.equal(broker.poolQueue(stack.config.QUEUE_PREFIX, 'drive'));
  });

  it('when another account asks for the text, then 404; a key without drive:read gets 403; a malformed id 400', async () => {
    const id = await upload(api, { name: 'private.md', content: 'secret plans' });
    await waitForText(api, id);
    const other = await stack.createAccount({ scopes: ['drive:read'] });
    const r = await client(stack.baseUrl, other.key).get(`/drive/files/${id}/text`);
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal('not_found');
    expect(r.text).to.not.contain('secret');
    const rw = await stack.createAccount({ scopes: ['read', 'write', 'ai', 'drive:write'] });
    const f = await client(stack.baseUrl, rw.key).get(`/drive/files/${id}/text`);
    expect(f.status).to.equal(403);
    expect(f.body.error.code).to.equal('forbidden');
    const bad = await api.get('/drive/files/a.b/text');
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.match(/^id: /);
    expect((await api.get('/drive/files/dfl_doesnotexist000000/text')).status).to.equal(404);
  });

  it('when a key is pinned to a folder, then it reads the text of files inside it and gets 404 for root files and other folders', async () => {
    const inside = (await api.post('/drive/folders', { name: 'Pinned' })).body.id as string;
    const sub = (await api.post('/drive/folders', { name: 'Sub', parentFolderId: inside })).body.id as string;
    const outside = (await api.post('/drive/folders', { name: 'Elsewhere' })).body.id as string;
    const a = await upload(api, { name: 'in.md', content: 'inside words', folderId: sub });
    const b = await upload(api, { name: 'out.md', content: 'outside words', folderId: outside });
    const c = await upload(api, { name: 'root.md', content: 'root words' });
    for (const id of [a, b, c]) await waitForText(api, id);
    const pinned = await stack.rt.accounts
      .forAccount(accountId)
      .createKey({ scopes: ['drive:read'], folderPins: [inside] });
    const pc = client(stack.baseUrl, pinned.key);
    expect((await pc.get(`/drive/files/${a}/text`)).body.content).to.equal('inside words');
    expect((await pc.get(`/drive/files/${b}/text`)).status).to.equal(404);
    expect((await pc.get(`/drive/files/${c}/text`)).status).to.equal(404);
  });

  it('when the stored text of a team-drive file is read by a member, then it is answered; a non-member gets 404', async () => {
    const member = await stack.createAccount({ scopes: ['drive:read'] });
    const team = await createTeams(stack.rt.store).createTeam({ name: 'Ops', ownerAccountId: accountId });
    await createTeams(stack.rt.store).addMember(team._id, member.accountId, 'viewer');
    const data = Buffer.from('Runbook: restart the queue first.');
    const fileId = `dfl_teamtext${Date.now().toString(36)}`;
    const blob = await putDriveBlob(stack.rt.store, data, {
      accountId,
      contentType: 'text/plain',
      filename: 'runbook.txt',
      fileId,
    });
    const now = new Date();
    await files().insertOne({
      _id: fileId,
      accountId,
      teamId: team._id,
      name: 'runbook.txt',
      nameKey: 'runbook.txt',
      ext: 'txt',
      kind: 'text',
      mimeType: 'text/plain',
      sizeBytes: data.length,
      folderId: null,
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
    await requestDriveText(stack.rt, { fileId, accountId });
    const mc = client(stack.baseUrl, member.key);
    const r = await waitForText(mc, fileId);
    expect(r.body).to.include({ textStatus: 'ready', content: 'Runbook: restart the queue first.' });
    expect(r.body.file.teamId).to.equal(team._id);
    expect(await texts().findOne({ _id: fileId })).to.include({ teamId: team._id, accountId });
    const stranger = await stack.createAccount({ scopes: ['drive:read'] });
    expect((await client(stack.baseUrl, stranger.key).get(`/drive/files/${fileId}/text`)).status).to.equal(404);
    await eventually(async () => (await files().findOne({ _id: fileId }))?.text.status === 'ready');
  });
});
