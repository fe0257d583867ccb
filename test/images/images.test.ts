import sinon from 'sinon';
import { expect } from 'chai';
import { IMAGE_SIZES } from '../../contracts/images';
import { decodeImage } from '../../platform/media/codec';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, referenceImages, solidPng, type FakeServer } from './fakes';
import { fromUnits } from '../../platform/credits/credits';

const fetchBytes = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
};

describe('images: POST /images', () => {
  let stack: Stack;
  let refs: FakeServer;
  before(async () => {
    refs = await referenceImages();
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true' } });
  });
  after(async () => {
    await stack.stop();
    await refs.close();
  });

  const account = async (opts: Parameters<Stack['createAccount']>[0] = {}) => {
    const a = await stack.createAccount(opts);
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();

  it('when a paid plan posts a prompt, then 200 with a 1024x1024 svc-ultra PNG at an absolute signed URL, charged once', async () => {
    const { api, accountId } = await account({ credits: 100 });
    const r = await api.post('/images', { prompt: 'a lighthouse on a cliff at night' });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({
      engine: 'svc-ultra',
      renderer: 'local-scene-v2',
      aspectRatio: '1:1',
      width: 1024,
      height: 1024,
      mimeType: 'image/png',
      charged: 2,
    });
    expect(r.body.notes).to.deep.equal([]);
    expect(r.body.base64).to.equal(undefined);
    expect(r.body.url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/assets\/blob_\w+\/image\.png\?exp=\d+&sig=/);
    const file = await fetchBytes(r.body.url);
    expect(file.status).to.equal(200);
    expect(file.type).to.equal('image/png');
    const png = await decodeImage(file.bytes);
    expect([png.width, png.height]).to.deep.equal([1024, 1024]);
    expect(file.bytes.length).to.equal(r.body.sizeBytes);
    expect(await balance(api)).to.equal(98);
    const l = await ledger(accountId);
    expect(l.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([['charge', 'image', 2]]);
  });

  it('when each aspect ratio is asked, then the PNG has exactly the documented shape', async () => {
    const { api } = await account();
    for (const aspectRatio of ['16:9', '9:16', '4:3', '3:4'] as const) {
      const r = await api.post('/images', { prompt: 'rolling green hills', aspectRatio, engine: 'svc-rapid' });
      expect(r.status, aspectRatio).to.equal(200);
      const png = await decodeImage((await fetchBytes(r.body.url)).bytes);
      expect([png.width, png.height, r.body.width, r.body.height], aspectRatio).to.deep.equal([
        IMAGE_SIZES[aspectRatio].width,
        IMAGE_SIZES[aspectRatio].height,
        IMAGE_SIZES[aspectRatio].width,
        IMAGE_SIZES[aspectRatio].height,
      ]);
    }
  });

  it('when partner-svc is asked on a workspace without partner images, then the default engine with a note', async () => {
    const { api } = await account({ features: { partnerImages: false } });
    const r = await api.post('/images', { prompt: 'a red kite', engine: 'partner-svc' });
    expect(r.status).to.equal(200);
    expect(r.body.engine).to.equal('svc-ultra');
    expect(r.body.notes).to.have.length(1);
    expect(r.body.notes[0]).to.match(/partner-svc is not enabled on this workspace/);
  });

  it('when partner-svc is asked on a workspace that enables it, then partner-svc serves it', async () => {
    const { api } = await account({ features: { partnerImages: true } });
    const r = await api.post('/images', { prompt: 'a red kite', engine: 'partner-svc' });
    expect(r.status).to.equal(200);
    expect(r.body.engine).to.equal('partner-svc');
    expect(r.body.notes).to.deep.equal([]);
  });

  it('when another engine and a style are named, then they are served and reported', async () => {
    const { api } = await account({ plan: 'teams' });
    const r = await api.post('/images', {
      prompt: 'a city skyline',
      engine: 'svc-design',
      style: 'flat poster in teal and gold',
    });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ engine: 'svc-design', style: 'flat poster in teal and gold' });
  });

  it('when includeBase64 is true, then base64 is a PNG data URL of the same bytes as the URL', async () => {
    const { api } = await account();
    const r = await api.post('/images', { prompt: 'a blue whale', includeBase64: true, engine: 'svc-rapid' });
    expect(r.status).to.equal(200);
    expect(r.body.base64).to.match(/^data:image\/png;base64,/);
    const inline = Buffer.from(r.body.base64.slice('data:image/png;base64,'.length), 'base64');
    expect(inline.equals((await fetchBytes(r.body.url)).bytes)).to.equal(true);
  });

  it('when the same request is made twice, then the same seed and byte-identical PNGs', async () => {
    const { api } = await account();
    const body = { prompt: 'a fox in the snow', engine: 'svc-photo', includeBase64: true };
    const a = await api.post('/images', body);
    const b = await api.post('/images', body);
    expect(a.body.seed).to.equal(b.body.seed);
    expect(a.body.base64).to.equal(b.body.base64);
    expect(a.body.url).to.not.equal(b.body.url);
  });

  it('when reference images are given, then each is fetched, used for the palette and counted', async () => {
    const { api } = await account();
    const base = { prompt: 'an abstract composition', engine: 'svc-rapid', includeBase64: true } as const;
    const plain = await api.post('/images', base);
    const withRefs = await api.post('/images', {
      ...base,
      referenceImageUrls: [`${refs.url}/red.png`, `${refs.url}/photo.jpg`],
    });
    expect(withRefs.status).to.equal(200);
    expect(withRefs.body.referenceImagesUsed).to.equal(2);
    expect(
      withRefs.body.notes.some((n: string) => /referenceImageUrls\.1 is not an image this service can read/.test(n)),
    ).to.equal(true);
    expect(withRefs.body.base64).to.not.equal(plain.body.base64);
    expect(refs.requests.filter((q) => q.path === '/red.png')).to.have.length.greaterThan(0);
  });

  it('when more than 5 reference images are sent, then 400 naming referenceImageUrls and nothing is charged', async () => {
    const { api, accountId } = await account({ credits: 10 });
    const r = await api.post('/images', {
      prompt: 'x',
      referenceImageUrls: Array.from({ length: 6 }, (_, i) => `${refs.url}/red.png?${i}`),
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(/^referenceImageUrls: at most 5/);
    expect(await balance(api)).to.equal(10);
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when a reference URL points at a private or metadata address, then 400 naming it and nothing is fetched or charged', async () => {
    const { api, accountId } = await account({ credits: 10 });
    for (const url of [
      'http://10.0.0.7/a.png',
      'http://169.254.169.254/latest/meta-data/',
      'http://192.168.1.1/x.png',
    ]) {
      const r = await api.post('/images', { prompt: 'x', referenceImageUrls: [`${refs.url}/red.png`, url] });
      expect(r.status, url).to.equal(400);
      expect(r.body.error.message, url).to.match(/^referenceImageUrls\.1: .*(private|link-local|reserved)/);
    }
    expect(await balance(api)).to.equal(10);
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when a reference cannot be fetched, then the render fails with 400 naming it and the charge is refunded', async () => {
    const { api, accountId } = await account({ credits: 10 });
    const r = await api.post('/images', { prompt: 'x', referenceImageUrls: [`${refs.url}/missing.png`] });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/^referenceImageUrls\.0: could not be fetched \(HTTP 404\)/);
    expect(await balance(api)).to.equal(10);
    const l = await ledger(accountId);
    expect(l.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'image', 2],
      ['refund', 'image', 2],
    ]);
  });

  it('when the balance is short, then 402 and no render is asked for', async () => {
    const { api } = await account({ credits: 1 });
    const rpc = sinon.spy(stack.rt.amqp, 'rpc');
    try {
      const r = await api.post('/images', { prompt: 'x' });
      expect(r.status).to.equal(402);
      expect(r.body.error.code).to.equal('insufficient_credits');
      expect(rpc.called).to.equal(false);
    } finally {
      rpc.restore();
    }
  });

  it('when renders ran, then /metrics counts the request/reply calls by outcome and times them', async () => {
    const text = await (await fetch(`${stack.baseUrl.replace('/api/v1', '')}/metrics`)).text();
    expect(text).to.match(/rpc_calls_total\{pool="image",operation="image",outcome="ok"\} [1-9]/);
    expect(text).to.match(/rpc_calls_total\{pool="image",operation="image",outcome="refused"\} [1-9]/);
    expect(text).to.match(/rpc_duration_seconds_count\{pool="image",operation="image"\} [1-9]/);
  });

  it('when /openapi is fetched, then the image and video contracts are documented as named schemas', async () => {
    const doc = (await client(stack.baseUrl).get('/openapi')).body;
    for (const id of [
      'ImageRequest',
      'ImageResult',
      'MoonlightRequest',
      'MoonlightResult',
      'VideoRequest',
      'VideoAccepted',
      'VideoResult',
    ]) {
      expect(doc.components.schemas, id).to.have.property(id);
    }
    expect(JSON.stringify(doc.paths['/images'])).to.include('ImageResult');
    expect(JSON.stringify(doc.paths['/images/moonlight'])).to.include('MoonlightRequest');
  });

  it('when the body is invalid, then 400 naming the field', async () => {
    const { api } = await account();
    expect((await api.post('/images', {})).body.error.message).to.match(/prompt: is required/);
    expect((await api.post('/images', { prompt: 'x', engine: 'svc-mega' })).body.error.message).to.match(
      /^engine: must be one of/,
    );
    expect((await api.post('/images', { prompt: 'x', aspectRatio: '2:1' })).body.error.message).to.match(
      /^aspectRatio: must be one of/,
    );
    expect((await api.post('/images', { prompt: 'x', referenceImageUrls: ['not a url'] })).body.error.message).to.match(
      /^referenceImageUrls\.0:/,
    );
  });
});

describe('images: deadline and remote provider', () => {
  it('when no image worker answers before the deadline, then 504 timeout and the charge is refunded', async () => {
    const stack = await startStack({ workers: false, scheduler: false, env: { IMAGE_RPC_TIMEOUT_MS: '300' } });
    try {
      const { key, accountId } = await stack.createAccount({ credits: 10 });
      const api = client(stack.baseUrl, key);
      const r = await api.post('/images', { prompt: 'x' });
      expect(r.status).to.equal(504);
      expect(r.body.error.code).to.equal('timeout');
      const m = await api.post('/images/moonlight', { prompt: 'x', seed: 1 });
      expect(m.status).to.equal(504);
      expect((await api.get('/account/credits')).body.balance).to.equal(10);
      const l = await stack.db.ledger.find({ accountId }).toArray();
      expect(l.filter((e) => e.kind === 'refund')).to.have.length(2);
    } finally {
      await stack.stop();
    }
  });

  describe('with IMAGE_ENGINE=openai against a fake OpenAI images API', () => {
    let stack: Stack;
    let provider: FakeServer;
    let failNext = false;
    before(async () => {
      provider = await fakeServer(async (req, res) => {
        if (req.method !== 'POST' || req.path !== '/v1/images/generations') {
          res.statusCode = 404;
          return void res.end();
        }
        res.setHeader('content-type', 'application/json');
        if (failNext) {
          res.statusCode = 500;
          return void res.end(JSON.stringify({ error: { message: 'upstream exploded', type: 'server_error' } }));
        }
        const [w, h] = String(req.body.size).split('x').map(Number);
        res.end(
          JSON.stringify({
            created: 1,
            data: [{ b64_json: (await solidPng(w!, h!, [10, 120, 200])).toString('base64') }],
          }),
        );
      });
      stack = await startStack({
        env: {
          IMAGE_ENGINE: 'openai',
          OPENAI_BASE_URL: `${provider.url}/v1`,
          OPENAI_API_KEY: 'sk-test',
          OPENAI_IMAGE_MODEL: 'gpt-image-1',
        },
      });
    });
    after(async () => {
      await stack.stop();
      await provider.close();
    });

    it('when an image is asked, then the provider renders it with its protocol and the real size is reported', async () => {
      const { key } = await stack.createAccount();
      const api = client(stack.baseUrl, key);
      const r = await api.post('/images', { prompt: 'a sailing boat', aspectRatio: '16:9', style: 'oil painting' });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({
        renderer: 'openai-compatible:gpt-image-1',
        engine: 'svc-ultra',
        width: 1536,
        height: 1024,
      });
      expect(r.body.notes.join(' ')).to.match(/provider renders 1536x1024 for 16:9/);
      const sent = provider.requests.at(-1)!;
      expect(sent.headers.authorization).to.equal('Bearer sk-test');
      expect(sent.body).to.include({ model: 'gpt-image-1', n: 1, size: '1536x1024' });
      expect(sent.body.prompt).to.match(/a sailing boat[\s\S]*Style: oil painting/);
      const png = await decodeImage(Buffer.from(await (await fetch(r.body.url)).arrayBuffer()));
      expect([png.width, png.height]).to.deep.equal([1536, 1024]);
    });

    it('when the provider fails, then 503 and the charge is refunded', async () => {
      const { key, accountId } = await stack.createAccount({ credits: 10 });
      const api = client(stack.baseUrl, key);
      failNext = true;
      const r = await api.post('/images', { prompt: 'a sailing boat' });
      failNext = false;
      expect(r.status).to.equal(503);
      expect(r.body.error.message).to.match(/image provider answered 500: upstream exploded/);
      expect((await api.get('/account/credits')).body.balance).to.equal(10);
      const l = await stack.db.ledger.find({ accountId }).toArray();
      expect(l.map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    });
  });
});
