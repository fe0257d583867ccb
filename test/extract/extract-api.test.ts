import { expect } from 'chai';
import sinon from 'sinon';
import { EXTRACT_MAX_BYTES } from '../../contracts/extract';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { b64, blankPng, elfBytes, makeImage, makePdf, makePptx, makeZip, PDF, PPTX } from './documents';
import { fromUnits } from '../../platform/credits/credits';

const PRICE = 3; // DEFAULT_CREDIT_PRICES.extract_flowchart

describe('extract: POST /extract-flowchart', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'extract' } });
  });
  after(() => stack?.stop());

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount({ credits: 100, ...opts });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();
  const projectsOf = (accountId: string) =>
    stack.db.db.collection<any>(COLLECTIONS.projects).find({ accountId }).toArray();
  const labels = (body: any, shape?: string) =>
    (body.content.nodes as any[]).filter((n) => !shape || n.shape === shape).map((n) => n.label as string);
  /** Charged exactly once for one extraction. */
  const expectChargedOnce = async (a: { api: Client; accountId: string }) => {
    expect(await balance(a.api)).to.equal(100 - PRICE);
    expect((await ledger(a.accountId)).map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'extract_flowchart', PRICE],
    ]);
  };
  /** Nothing charged and no project made. */
  const expectNothing = async (a: { api: Client; accountId: string }) => {
    expect(await balance(a.api)).to.equal(100);
    const l = await ledger(a.accountId);
    expect(l.filter((e) => e.kind === 'charge').length, 'charges').to.equal(
      l.filter((e) => e.kind === 'refund').length,
    );
    expect(await projectsOf(a.accountId)).to.have.length(0);
  };

  describe('documents', () => {
    it('when a PDF with a title, numbered steps and a decision is sent, then 201 with a flowchart project titled by its heading, charged once, and GET /projects/{id} shows it', async () => {
      const a = await account();
      const pdf = await makePdf(
        [
          { text: 'Hiring process', big: true },
          { text: '1. Receive application' },
          { text: '2. Screen the CV' },
          { text: 'Passes screening?' },
          { text: 'yes: Interview' },
          { text: 'no: Reject' },
          { text: '3. Make an offer' },
        ],
        { title: 'Recruiting handbook' },
      );
      const r = await a.api.post('/extract-flowchart', {
        documentBase64: b64(pdf),
        mimeType: PDF,
        fileName: 'hiring.pdf',
      });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.id).to.match(/^prj_[a-z0-9]{20}$/);
      expect(r.body).to.include({
        name: 'Hiring process',
        kind: 'flowchart',
        projectType: 'chart',
        version: 1,
        charged: PRICE,
      });
      expect(r.body.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/editor/${r.body.id}`);
      expect(r.headers.get('etag')).to.equal('"1"');
      expect(r.body.description).to.equal('Extracted from "hiring.pdf" by pdfjs-text-v1 (1 page).');
      expect(r.body.extraction).to.deep.include({
        engine: 'pdfjs-text-v1',
        layout: 'text-structure-v1',
        mimeType: PDF,
        pages: 1,
        ocr: false,
        titleSource: 'heading',
        steps: 5,
        decisions: 1,
        truncated: false,
      });
      expect(r.body.extraction.characters).to.be.greaterThan(60);
      expect(labels(r.body)).to.deep.equal([
        'Start',
        'Receive application',
        'Screen the CV',
        'Passes screening?',
        'Interview',
        'Reject',
        'Make an offer',
        'End',
      ]);
      const id = new Map((r.body.content.nodes as any[]).map((n) => [n.label, n.id]));
      const edges = (r.body.content.edges as any[]).map((e) => [e.from, e.to, e.label ?? null]);
      expect(edges).to.deep.include.members([
        [id.get('Passes screening?'), id.get('Interview'), 'yes'],
        [id.get('Passes screening?'), id.get('Reject'), 'no'],
        [id.get('Interview'), id.get('Make an offer'), null],
      ]);
      await expectChargedOnce(a);

      const got = await a.api.get(`/projects/${r.body.id}`);
      expect(got.status).to.equal(200);
      expect(got.body.name).to.equal('Hiring process');
      expect(got.body.content).to.deep.equal(r.body.content);
      const [stored] = await projectsOf(a.accountId);
      expect(stored).to.include({ _id: r.body.id, kind: 'flowchart', name: 'Hiring process' });
    });

    it('when a PPTX with a title slide and a bulleted process slide is sent, then the title placeholder names the flowchart and the bullets are its steps in order', async () => {
      const a = await account();
      const pptx = await makePptx([
        { title: 'Customer onboarding' },
        { title: 'Process', bullets: ['Create account', 'Verify email', 'Choose a plan'] },
      ]);
      const r = await a.api.post('/extract-flowchart', { documentBase64: b64(pptx), mimeType: PPTX });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.name).to.equal('Customer onboarding');
      expect(r.body.extraction).to.deep.include({
        engine: 'pptx-xml-v1',
        pages: 2,
        ocr: false,
        titleSource: 'heading',
        steps: 3,
      });
      expect(labels(r.body, 'process')).to.deep.equal(['Create account', 'Verify email', 'Choose a plan']);
      expect(labels(r.body, 'note')).to.deep.equal(['Process']);
      await expectChargedOnce(a);
      expect((await a.api.get(`/projects/${r.body.id}`)).status).to.equal(200);
    });

    it('when a PNG of rendered text is sent, then OCR reads its steps in order and the large first line titles it', async () => {
      const a = await account();
      const png = await makeImage([
        { text: 'Expense approval', big: true },
        { text: '1. Submit the receipt' },
        { text: '2. Manager reviews the claim' },
        { text: '3. Finance pays the money' },
      ]);
      const r = await a.api.post('/extract-flowchart', {
        documentBase64: b64(png),
        mimeType: 'image/png',
        fileName: 'scan.png',
      });
      expect(r.status, r.text).to.equal(201);
      expect(r.body.extraction).to.deep.include({
        engine: 'tesseract-ocr-v1',
        pages: 1,
        ocr: true,
        titleSource: 'heading',
      });
      // OCR may misread a character: compare by key words, case-insensitively.
      expect(r.body.name.toLowerCase()).to.match(/expense\s+approv/);
      const steps = labels(r.body, 'process').map((l) => l.toLowerCase());
      expect(steps).to.have.length(3);
      expect(steps[0]).to.match(/submit.*receipt/);
      expect(steps[1]).to.match(/manager.*review/);
      expect(steps[2]).to.match(/finance.*pay/);
      await expectChargedOnce(a);
    });

    it('when a WebP or a JPEG of rendered text is sent, then it is read the same way', async () => {
      const a = await account({ credits: 100 });
      for (const format of ['webp', 'jpeg'] as const) {
        const img = await makeImage([{ text: '1. Pack the parcel' }, { text: '2. Ship the parcel' }], format);
        const r = await a.api.post('/extract-flowchart', { documentBase64: b64(img), mimeType: `image/${format}` });
        expect(r.status, `${format}: ${r.text}`).to.equal(201);
        expect(
          labels(r.body, 'process')
            .map((l) => l.toLowerCase())
            .join(' | '),
          format,
        ).to.match(/pack.*parcel \| ship.*parcel/);
        expect(r.body.name, format).to.equal('Extracted flowchart');
      }
    });
  });

  describe('validation (400 naming the field, nothing charged)', () => {
    let a: Awaited<ReturnType<typeof account>>;
    let pdf: string;
    before(async () => {
      a = await account();
      pdf = b64(await makePdf([{ text: '1. One' }]));
    });
    after(() => expectNothing(a));

    const expect400 = async (body: unknown, field: string, pattern: RegExp) => {
      const r = await a.api.post('/extract-flowchart', body);
      expect(r.status, r.text).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.match(new RegExp(`^${field}: `));
      expect(r.body.error.message).to.match(pattern);
    };

    it('when documentBase64 carries a data: prefix, then 400 saying to strip it', () =>
      expect400(
        { documentBase64: `data:application/pdf;base64,${pdf}`, mimeType: PDF },
        'documentBase64',
        /data: prefix; strip/,
      ));
    it('when documentBase64 is not canonical base64, then 400', async () => {
      for (const bad of ['abc$', 'abc', `${pdf.slice(0, 40)}\n${pdf.slice(40, 80)}`, 'ab-_', 'QQ=A', 'QR=='])
        await expect400({ documentBase64: bad, mimeType: PDF }, 'documentBase64', /canonical base64/);
    });
    it('when documentBase64 is empty or missing, then 400', async () => {
      await expect400({ documentBase64: '', mimeType: PDF }, 'documentBase64', /must not be empty/);
      await expect400({ mimeType: PDF }, 'documentBase64', /is required/);
    });
    it('when the document decodes to 10 MB + 1 byte, then 400 naming the limit', async () => {
      const big = Buffer.alloc(EXTRACT_MAX_BYTES + 1, 0x41);
      big.write('%PDF-1.7\n');
      await expect400(
        { documentBase64: b64(big), mimeType: PDF },
        'documentBase64',
        /at most 10485760 bytes .* decodes to 10485761 bytes/,
      );
    });
    it('when mimeType is outside the enum or missing, then 400 naming mimeType', async () => {
      await expect400({ documentBase64: pdf, mimeType: 'text/plain' }, 'mimeType', /must be one of application\/pdf/);
      await expect400({ documentBase64: pdf }, 'mimeType', /is required/);
    });
    it('when the bytes are another type than mimeType says (a PNG sent as a PDF), then 400 naming documentBase64 and both types', async () => {
      await expect400(
        { documentBase64: b64(await blankPng()), mimeType: PDF },
        'documentBase64',
        /image\/png .* not a PDF/,
      );
      await expect400(
        { documentBase64: pdf, mimeType: 'image/jpeg' },
        'documentBase64',
        /application\/pdf .* not a JPEG/,
      );
    });
    it('when an executable is sent as an image or a presentation, then 400', async () => {
      await expect400(
        { documentBase64: b64(elfBytes()), mimeType: 'image/png' },
        'documentBase64',
        /application\/x-elf/,
      );
      await expect400(
        { documentBase64: b64(Buffer.concat([Buffer.from('MZ'), Buffer.alloc(300)])), mimeType: PPTX },
        'documentBase64',
        /x-msdownload/,
      );
    });
    it('when a ZIP that is not a presentation, or text, is sent as a PPTX, then 400', async () => {
      await expect400(
        { documentBase64: b64(await makeZip()), mimeType: PPTX },
        'documentBase64',
        /without ppt\/presentation\.xml/,
      );
      await expect400(
        { documentBase64: b64(Buffer.from('hello, not a document')), mimeType: PPTX },
        'documentBase64',
        /no recognised type/,
      );
    });
    it('when fileName is not one line of at most 255 characters, or an unknown field is sent, then 400 naming it', async () => {
      await expect400({ documentBase64: pdf, mimeType: PDF, fileName: 'a\nb.pdf' }, 'fileName', /control characters/);
      await expect400(
        { documentBase64: pdf, mimeType: PDF, fileName: `${'a'.repeat(256)}.pdf` },
        'fileName',
        /at most 255/,
      );
      const r = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF, pages: 2 });
      expect(r.status).to.equal(400);
      expect(r.body.error.message).to.match(/pages: unknown field/);
    });
  });

  describe('documents without text, damaged ones (422, nothing charged)', () => {
    it('when a PDF has no text layer, then 422 no_text_found', async () => {
      const a = await account();
      const r = await a.api.post('/extract-flowchart', {
        documentBase64: b64(await makePdf([], { pages: 2 })),
        mimeType: PDF,
      });
      expect(r.status, r.text).to.equal(422);
      expect(r.body.error.code).to.equal('no_text_found');
      expect(r.body.error.message).to.match(/^documentBase64: the PDF has no text layer/);
      await expectNothing(a);
    });

    it('when an image shows no text, then 422 no_text_found', async () => {
      const a = await account();
      const r = await a.api.post('/extract-flowchart', {
        documentBase64: b64(await blankPng()),
        mimeType: 'image/png',
      });
      expect(r.status, r.text).to.equal(422);
      expect(r.body.error.code).to.equal('no_text_found');
      await expectNothing(a);
    });

    it('when a PDF is damaged (a PDF header, then 10 MB of nothing), then 422 unreadable_document', async () => {
      const a = await account();
      const bytes = Buffer.alloc(EXTRACT_MAX_BYTES, 0x20);
      bytes.write('%PDF-1.7\n%damaged\n');
      const r = await a.api.post('/extract-flowchart', { documentBase64: b64(bytes), mimeType: PDF });
      expect(r.status, r.text).to.equal(422);
      expect(r.body.error.code).to.equal('unreadable_document');
      await expectNothing(a);
    });

    it('when a PNG is cut short, then 422 unreadable_document', async () => {
      const a = await account();
      const png = await makeImage([{ text: '1. A step' }]);
      const r = await a.api.post('/extract-flowchart', {
        documentBase64: b64(png.subarray(0, 200)),
        mimeType: 'image/png',
      });
      expect(r.status, r.text).to.equal(422);
      expect(r.body.error.code).to.equal('unreadable_document');
      await expectNothing(a);
    });
  });

  describe('credits, idempotency, scope and tenancy', () => {
    let pdf: string;
    before(async () => {
      pdf = b64(
        await makePdf([
          { text: 'Release', big: true },
          { text: '1. Tag' },
          { text: '2. Build' },
          { text: '3. Publish' },
        ]),
      );
    });

    it('when a request is retried with the same Idempotency-Key, then the same project is answered, one project is stored and it is charged once', async () => {
      const a = await account();
      const headers = { 'idempotency-key': 'extract-retry-1' };
      const first = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      expect(first.status, first.text).to.equal(201);
      const again = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect(await projectsOf(a.accountId)).to.have.length(1);
      await expectChargedOnce(a);
      // Another body with the same key is refused.
      const other = await a.api.post(
        '/extract-flowchart',
        { documentBase64: pdf, mimeType: PDF, fileName: 'x.pdf' },
        headers,
      );
      expect(other.status).to.equal(422);
      expect(other.body.error.code).to.equal('idempotency_key_reused');
    });

    it('when the process answering a keyed request died after storing the project, then the retry that takes the key over answers that project, charged once in all', async () => {
      const a = await account();
      const headers = { 'idempotency-key': 'extract-crash-1' };
      const first = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      expect(first.status).to.equal(201);
      // As if the process had died before recording the answer: the key's record is in flight with its lease run out.
      const rec = await stack.db.idempotency.updateOne(
        { accountId: a.accountId, key: 'extract-crash-1' },
        { $set: { state: 'in_flight', response: null, lockedUntil: new Date(0) } },
      );
      expect(rec.modifiedCount).to.equal(1);
      const retry = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      expect(retry.status, retry.text).to.equal(201);
      expect(retry.headers.get('idempotent-replayed')).to.equal(null);
      expect(retry.body.id).to.equal(first.body.id);
      expect(retry.body.content).to.deep.equal(first.body.content);
      expect(retry.body.extraction).to.deep.equal(first.body.extraction);
      expect(retry.body.charged).to.equal(0);
      expect(await projectsOf(a.accountId)).to.have.length(1);
      await expectChargedOnce(a);
    });

    it('when the process died after storing the project and before capturing its hold, then the keyed retry captures that hold: one project, charged once, nothing left to refund', async () => {
      const a = await account();
      const headers = { 'idempotency-key': 'extract-crash-2' };
      // As if the process had died right after storing the project: the capture never runs, nor the answer.
      const capture = sinon.stub(stack.rt.credits, 'capture').resolves();
      const first = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      capture.restore();
      expect(first.status, first.text).to.equal(201);
      const holds = stack.db.db.collection<any>(COLLECTIONS.creditHolds);
      expect(await holds.countDocuments({ accountId: a.accountId })).to.equal(1);
      await stack.db.idempotency.updateOne(
        { accountId: a.accountId, key: 'extract-crash-2' },
        { $set: { state: 'in_flight', response: null, lockedUntil: new Date(0) } },
      );

      const retry = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, headers);
      expect(retry.status, retry.text).to.equal(201);
      expect(retry.body.id).to.equal(first.body.id);
      expect(retry.body.charged).to.equal(PRICE); // this answer is the one that settled the charge
      expect(await holds.countDocuments({ accountId: a.accountId })).to.equal(0);
      expect(await projectsOf(a.accountId)).to.have.length(1);
      await expectChargedOnce(a);
    });

    it('when the process died after storing the project and no retry comes, then the scheduler captures the expired hold because the project exists (never a free project)', async () => {
      const a = await account();
      const capture = sinon.stub(stack.rt.credits, 'capture').resolves();
      const r = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF });
      capture.restore();
      expect(r.status, r.text).to.equal(201);
      const holds = stack.db.db.collection<any>(COLLECTIONS.creditHolds);
      const [hold] = await holds.find({ accountId: a.accountId }).toArray();
      expect(hold.deliveredBy).to.deep.equal({ collection: COLLECTIONS.projects, id: r.body.id });
      // The scheduler's sweep, once the hold's deadline has passed.
      await stack.rt.credits.settleExpiredHolds(new Date(hold.until.getTime() + 1));
      expect(await holds.countDocuments({ accountId: a.accountId })).to.equal(0);
      await expectChargedOnce(a);
    });

    it('when the account lacks the credits, then 402 and no project', async () => {
      const a = await account({ credits: 2 });
      const r = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF });
      expect(r.status).to.equal(402);
      expect(r.body.error.code).to.equal('insufficient_credits');
      expect(await projectsOf(a.accountId)).to.have.length(0);
    });

    it('when the key lacks the ai scope, then 403 and nothing is charged', async () => {
      const a = await account({ scopes: ['read', 'write'] });
      const r = await a.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF });
      expect(r.status).to.equal(403);
      expect(r.body.error.code).to.equal('forbidden');
      await expectNothing(a);
    });

    it('when another account asks for the extracted project, then 404 and never its data', async () => {
      const owner = await account();
      const r = await owner.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF });
      expect(r.status).to.equal(201);
      const other = await account();
      const got = await other.api.get(`/projects/${r.body.id}`);
      expect(got.status).to.equal(404);
      expect(got.text).to.not.include('Publish');
      const list = await other.api.get('/projects');
      expect(list.status).to.equal(200);
      expect(list.body.data).to.deep.equal([]);
      // The same Idempotency-Key in another account is another request.
      const h = { 'idempotency-key': 'shared-key' };
      const mine = await owner.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, h);
      const theirs = await other.api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF }, h);
      expect(theirs.body.id).to.not.equal(mine.body.id);
      expect((await projectsOf(other.accountId)).map((p) => p._id)).to.deep.equal([theirs.body.id]);
    });
  });
});

describe('extract: POST /extract-flowchart without an extract pool', function () {
  this.timeout(30_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'code', EXTRACT_RPC_TIMEOUT_MS: '300' } });
  });
  after(() => stack?.stop());

  it('when no extract worker answers before the deadline, then 504 timeout, the credits are given back and no project is made', async () => {
    const a = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, a.key);
    const pdf = b64(await makePdf([{ text: '1. One' }]));
    const r = await api.post('/extract-flowchart', { documentBase64: pdf, mimeType: PDF });
    expect(r.status, r.text).to.equal(504);
    expect(r.body.error.code).to.equal('timeout');
    expect(r.body.error.message).to.match(/nothing was charged/);
    expect((await api.get('/account/credits')).body.balance).to.equal(100);
    const l = await stack.db.ledger.find({ accountId: a.accountId }).toArray();
    expect(l.map((e) => e.kind).sort()).to.deep.equal(['charge', 'refund']);
    expect(await stack.db.db.collection(COLLECTIONS.projects).countDocuments({ accountId: a.accountId })).to.equal(0);
  });
});
