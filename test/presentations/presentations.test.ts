import { expect } from 'chai';
import sinon from 'sinon';
import { decodeImage } from '../../platform/media/codec';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, listenEvents } from '../helpers/fake-provider';

const png = async (url: string) => {
  const res = await fetch(url);
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.equal('image/png');
  return decodeImage(Buffer.from(await res.arrayBuffer()));
};

describe('POST /presentations (local deck engine)', () => {
  let stack: Stack;
  let brand: Awaited<ReturnType<typeof fakeServer>>;
  before(async () => {
    brand = await fakeServer((req, res) => {
      if (req.url === '/moved') {
        // A public-looking page that redirects to a private address: the guard checks every hop.
        res.writeHead(302, { location: 'http://10.0.0.7/admin' }).end();
        return;
      }
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          '<html><head><meta name="theme-color" content="#e8590c"><style>body{color:#222;background:#fff}.btn{background:#1c7ed6}</style></head><body>Acme</body></html>',
        );
    });
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true' } });
  });
  after(async () => {
    await stack.stop();
    await brand.close();
  });

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount({ credits: 1000, ...opts });
    return { ...a, api: client(stack.baseUrl, a.key) as Client };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;

  it('when a brief is posted, then 201 returns the project with a generating deck_ job, and the deck builds 8 slides', async () => {
    const { api, accountId } = await account();
    const brief =
      'A plan for the third quarter. We grew revenue 40% in Q2. Enterprise deals now average $120k. Churn fell to 3%. Renewals reached 94% of contracts. ' +
      'Next quarter we expand into Germany. We sign two reseller partners in the Nordics. Hiring focuses on sales engineers. Ramp time fell to four months.';
    const r = await api.post('/presentations', { name: 'Q3 Growth Plan', brief, tags: ['board'] });
    expect(r.status, r.text).to.equal(201);
    const p = r.body;
    expect(p.id).to.match(/^prj_/);
    expect(p).to.include({
      name: 'Q3 Growth Plan',
      description: '',
      projectType: 'presentation',
      canvasMode: 'creator',
      isStarred: false,
      generationStatus: 'generating',
    });
    expect(p.tags).to.deep.equal(['board']);
    expect(p.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/presentations/${p.id}`);
    expect(Date.parse(p.createdAt)).to.be.a('number').and.not.NaN;
    expect(p.job).to.include({ type: 'deck', status: 'queued', pollUrl: `/api/v1/jobs/${p.job.jobId}` });
    expect(p.job.jobId).to.match(/^deck_/);
    expect(await balance(api)).to.equal(1000 - stack.config.CREDIT_PRICES.deck);

    const stored = await stack.db.db.collection('projects').findOne({ _id: p.id, accountId } as never);
    expect(stored).to.include({
      name: 'Q3 Growth Plan',
      projectType: 'presentation',
      canvasMode: 'creator',
      isStarred: false,
    });
    expect(stored?.presentation).to.include({
      generationStatus: 'generating',
      jobId: p.job.jobId,
      slideCount: 8,
      visualStyle: 'illustration',
      slideMode: 'creator',
    });

    const job = await waitForJob(api, p.job.jobId);
    expect(job.status, job.error).to.equal('complete');
    const res = job.result;
    expect(res).to.include({
      projectId: p.id,
      name: 'Q3 Growth Plan',
      slideCount: 8,
      requestedSlides: 8,
      partial: false,
      engine: 'local-outline-v2',
      slideMode: 'creator',
    });
    expect(res.notes).to.deep.equal([
      "outline: written offline by local-outline-v2 from the brief's own sentences (no language model); set DECK_ENGINE=openai for a model-written outline",
    ]);
    expect(res.slides).to.have.length(8);
    expect(res.slides.map((s: any) => s.index)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(res.slides[0].title).to.equal('Q3 Growth Plan');
    const first = await png(res.slides[1].imageUrl);
    expect(first).to.include({ width: 1920, height: 1080, format: 'png' });
    expect(first.text.Title).to.equal(res.slides[1].title);
    const after = await stack.db.db.collection('projects').findOne({ _id: p.id } as never);
    expect(after?.presentation.build.status).to.equal('built');
    expect(after?.presentation.build.slides).to.have.length(8);
  });

  it('when slideCount is given, then the brief is authored to that many slides; with an outline it is ignored', async () => {
    const { api } = await account();
    const a = await api.post('/presentations', {
      name: 'Short',
      brief: 'One idea. Another idea. A third idea here.',
      slideCount: 3,
    });
    const outline = [
      { title: 'Welcome', bullets: ['Hello'] },
      { title: 'Plan', bullets: ['Build', 'Ship'] },
      { title: 'Thanks', bullets: [] },
      { title: 'Q&A', bullets: ['Ask away'] },
    ];
    const b = await api.post('/presentations', {
      name: 'Outlined',
      outline,
      slideCount: 20,
      brief: 'ignored when an outline is given',
    });
    const [ja, jb] = await Promise.all([waitForJob(api, a.body.job.jobId), waitForJob(api, b.body.job.jobId)]);
    expect(ja.result.slideCount).to.equal(3);
    expect(jb.result.slideCount).to.equal(4);
    expect(jb.result.engine).to.equal('outline-as-written');
    expect(jb.result.slides.map((s: any) => [s.title, s.bullets])).to.deep.equal(
      outline.map((o) => [o.title, o.bullets]),
    );
  });

  it('when the brief is short, then fewer slides are built from its facts and the notes say so instead of padding', async () => {
    const { api } = await account();
    const r = await api.post('/presentations', {
      name: 'Quarterly review',
      brief: 'We grew revenue 40% in Q2. Churn fell to 3%.',
      slideCount: 8,
    });
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result).to.include({ slideCount: 5, requestedSlides: 5, partial: false, engine: 'local-outline-v2' });
    expect(job.result.slides.map((s: any) => s.title)).to.deep.equal([
      'Quarterly review',
      'Agenda',
      'Revenue',
      'Customers',
      'Summary',
    ]);
    expect(job.result.notes).to.include(
      'outline: the brief holds enough for 5 slides, so 5 were written instead of the 8 asked, rather than filler',
    );
    const bullets = job.result.slides.flatMap((s: any) => s.bullets) as string[];
    expect(bullets.some((b) => b.includes('Quarterly review'))).to.equal(false);
  });

  it('when a 30-sentence brief is outlined into 3 slides under a 255-character name, then every slide builds and the notes count the sentences left out', async () => {
    const { api } = await account();
    const name = 'Board update '.repeat(20).slice(0, 255);
    const brief = Array.from({ length: 30 }, (_, i) => `Region ${i + 1} grew revenue ${i + 2}% on new bookings.`).join(
      ' ',
    );
    const r = await api.post('/presentations', { name, brief, slideCount: 3 });
    expect(r.status, r.text).to.equal(201);
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result).to.include({ slideCount: 3, requestedSlides: 3, partial: false });
    expect(job.result.slides[0].title)
      .to.have.length.at.most(200)
      .and.match(/^Board update .*…$/);
    expect(job.result.slides[1].bullets).to.have.length(12);
    expect(job.result.notes).to.include(
      'outline: 17 sentences of the brief were left out (a slide holds at most 12 bullets); ask for more slides to include them',
    );
  });

  it('when neither brief nor a non-empty outline is given, then 400 names both and nothing is charged', async () => {
    const { api, accountId } = await account();
    for (const body of [{ name: 'x' }, { name: 'x', outline: [] }, { name: 'x', brief: '  ' }]) {
      const r = await api.post('/presentations', body);
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal('validation_error');
      expect(r.body.error.message).to.equal(
        'brief: is required when outline is missing or empty: pass brief or a non-empty outline',
      );
    }
    expect(await balance(api)).to.equal(1000);
    expect(await stack.db.db.collection('projects').countDocuments({ accountId } as never)).to.equal(0);
  });

  it('when a field breaks its limit, then 400 names it', async () => {
    const { api } = await account();
    const msg = async (body: unknown) => (await api.post('/presentations', body)).body.error.message;
    expect(await msg({ name: 'x', brief: 'b', slideCount: 2 })).to.equal('slideCount: must be between 3 and 30');
    expect(await msg({ name: 'x', brief: 'b', slideCount: 31 })).to.equal('slideCount: must be between 3 and 30');
    expect(await msg({ name: 'x'.repeat(256), brief: 'b' })).to.equal('name: must be at most 255 characters');
    expect(await msg({ brief: 'b' })).to.equal('name: is required');
    expect(await msg({ name: 'x', outline: [{ title: 'A' }] })).to.equal('outline.0.bullets: is required');
    expect(await msg({ name: 'x', outline: [{ bullets: ['a'] }] })).to.equal('outline.0.title: is required');
    expect(await msg({ name: 'x', brief: 'b', slideMode: 'video' })).to.equal(
      'slideMode: must be one of creator, content',
    );
  });

  it('when background decks are off for the account, then pending_editor_open with job null and no charge', async () => {
    const { api, accountId } = await account({ features: { backgroundDecks: false } });
    const r = await api.post('/presentations', { name: 'Later', brief: 'Build me when I open the editor.' });
    expect(r.status).to.equal(201);
    expect(r.body).to.include({ generationStatus: 'pending_editor_open', job: null, projectType: 'presentation' });
    expect(r.body.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/presentations/${r.body.id}`);
    expect(await balance(api)).to.equal(1000);
    expect(await stack.db.ledger.countDocuments({ accountId })).to.equal(0);
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(0);
    const stored = await stack.db.db.collection('projects').findOne({ _id: r.body.id } as never);
    expect(stored?.presentation).to.include({ generationStatus: 'pending_editor_open', jobId: null });
  });

  it('when the same Idempotency-Key is sent again, then the original deck and job come back, billed once', async () => {
    const { api, accountId } = await account();
    const body = { name: 'Retry me', brief: 'A deck that is posted twice.' };
    const a = await api.post('/presentations', body, { 'idempotency-key': 'deck-key-1' });
    const b = await api.post('/presentations', body, { 'idempotency-key': 'deck-key-1' });
    expect(a.status).to.equal(201);
    expect(b.status).to.equal(201);
    expect(b.headers.get('idempotent-replayed')).to.equal('true');
    expect(b.body).to.deep.equal(a.body);
    expect(b.body.id).to.equal(a.body.id);
    expect(b.body.job.jobId).to.equal(a.body.job.jobId);
    expect(await stack.db.db.collection('projects').countDocuments({ accountId } as never)).to.equal(1);
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
    expect(await balance(api)).to.equal(1000 - stack.config.CREDIT_PRICES.deck);
  });

  it('when brandUrl points at a private or metadata address, then 400 names brandUrl and nothing is created', async () => {
    const { api, accountId } = await account();
    for (const brandUrl of [
      'http://10.1.2.3/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/',
      'ftp://example.com/',
    ]) {
      const r = await api.post('/presentations', { name: 'Brand', brief: 'b', brandUrl });
      expect(r.status, brandUrl).to.equal(400);
      expect(r.body.error.message).to.match(/^brandUrl: /);
    }
    expect(await stack.db.db.collection('projects').countDocuments({ accountId } as never)).to.equal(0);
    expect(await balance(api)).to.equal(1000);
  });

  it('when brandUrl is a reachable page, then the theme takes its colours and the slides are drawn in them', async () => {
    const { api } = await account();
    const r = await api.post('/presentations', {
      name: 'Brand deck',
      brief: 'Our brand. Our story. Our plan.',
      slideCount: 3,
      brandUrl: `${brand.url}/home`,
      companyName: 'Acme',
    });
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.result.theme).to.include({ source: 'brand', accent: '#e8590c', id: `brand:${new URL(brand.url).host}` });
    const slide = await png(job.result.slides[1].imageUrl);
    // The accent bar left of the title (x 76–91, y 104–167) is painted in the brand colour.
    const o = (130 * slide.width + 84) * slide.channels;
    expect([...slide.data.subarray(o, o + 3)]).to.deep.equal([0xe8, 0x59, 0x0c]);
  });

  it('when the brand page redirects to a private address, then the worker refuses the hop and keeps the built-in theme', async () => {
    const { api } = await account();
    const r = await api.post('/presentations', {
      name: 'Sneaky',
      brief: 'One. Two. Three.',
      slideCount: 3,
      brandUrl: `${brand.url}/moved`,
      themeId: 'forest',
    });
    expect(r.status).to.equal(201);
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.status).to.equal('complete');
    expect(job.result.theme).to.include({ id: 'forest', source: 'builtin' });
    expect(job.result.notes.filter((n: string) => n.startsWith('brandUrl'))).to.have.length(1);
    expect(job.result.notes[0]).to.match(
      /^brandUrl: 10\.0\.0\.7 resolves to a private, link-local or reserved address/,
    );
    expect(brand.requests.filter((x) => x.url === '/moved')).to.have.length(1);
  });

  it('when slideMode is content, then each slide has a background PNG and an editable text layout', async () => {
    const { api } = await account();
    const r = await api.post('/presentations', {
      name: 'Editable',
      outline: [
        { title: 'Intro', bullets: ['One', 'Two'] },
        { title: 'Body', bullets: ['Three'] },
        { title: 'End', bullets: [] },
      ],
      slideMode: 'content',
      themeId: 'midnight',
    });
    expect(r.body.canvasMode).to.equal('content');
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.result.theme.id).to.equal('midnight');
    const s = job.result.slides[1];
    expect(s.contentUrl).to.match(/^http.*slide-02\.json\?/);
    const layout = (await (await fetch(s.contentUrl)).json()) as any;
    expect(layout.background.imageUrl).to.equal(s.imageUrl);
    expect(layout.elements.find((e: any) => e.id === 'title').text).to.equal('Body');
    expect(layout.elements.find((e: any) => e.id === 'bullets').items).to.deep.equal(['Three']);
    expect(layout).to.include({ version: 2, width: 1920, height: 1080, layout: 'bullets' });
    expect((await png(s.imageUrl)).width).to.equal(1920);
  });

  it('when a deck completes, then presentation.completed names the project and slide count', async () => {
    const { api } = await account();
    const listener = await listenEvents(stack.config, 'presentation.*');
    try {
      const r = await api.post('/presentations', { name: 'Evented', brief: 'Short brief.', slideCount: 3 });
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.job.jobId);
      expect(e.routingKey).to.equal('presentation.completed');
      expect(e.body.data).to.include({ projectId: r.body.id, slideCount: 3, partial: false });
    } finally {
      await listener.close();
    }
  });

  it('when slides render, then the job records its progress per slide before saving', async () => {
    const spy = sinon.spy(stack.workers!.runtime.jobs, 'progress');
    try {
      const { api } = await account();
      const r = await api.post('/presentations', {
        name: 'Steps',
        outline: [
          { title: 'One', bullets: ['a'] },
          { title: 'Two', bullets: ['b'] },
          { title: 'Three', bullets: ['c'] },
        ],
      });
      await waitForJob(api, r.body.job.jobId);
      const steps = spy
        .getCalls()
        .filter((c) => c.args[0] === r.body.job.jobId)
        .map((c) => `${c.args[2].rawStatus}: ${c.args[2].progressMessage}`);
      expect(steps).to.deep.equal([
        'rendering: Rendering slide 1 of 3: One',
        'rendering: Rendering slide 2 of 3: Two',
        'rendering: Rendering slide 3 of 3: Three',
        'saving: Saving the deck (3 of 3 slides)',
      ]);
    } finally {
      sinon.restore();
    }
  });

  it('when the balance is short, then 402 and no project is created; without background decks no credits are needed', async () => {
    const poor = await account({ credits: 1 });
    const r = await poor.api.post('/presentations', { name: 'Too dear', brief: 'b' });
    expect(r.status).to.equal(402);
    expect(r.body.error.code).to.equal('insufficient_credits');
    expect(await stack.db.db.collection('projects').countDocuments({ accountId: poor.accountId } as never)).to.equal(0);
    const pending = await account({ credits: 0, features: { backgroundDecks: false } });
    expect((await pending.api.post('/presentations', { name: 'Free', brief: 'b' })).status).to.equal(201);
  });

  it('when the key lacks the write scope, then 403', async () => {
    const { api } = await account({ scopes: ['read', 'ai'] });
    const r = await api.post('/presentations', { name: 'x', brief: 'y' });
    expect(r.status).to.equal(403);
  });
});
