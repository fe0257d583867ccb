import { expect } from 'chai';
import { MOONLIGHT_SIZES, type MoonlightAspectRatio } from '../../contracts/images';
import { decodeImage } from '../../platform/media/codec';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

const pngOf = (dataUrl: string) => {
  expect(dataUrl).to.match(/^data:image\/png;base64,/);
  return Buffer.from(dataUrl.slice('data:image/png;base64,'.length), 'base64');
};

describe('images: POST /images/moonlight (in-house model, SPEC 2.11)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.stop());

  const account = async (credits = 100) => {
    const a = await stack.createAccount({ credits });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();

  it('when only a prompt is sent, then 1024x1024, 8 steps, guidance 1, a random seed and every required field', async () => {
    const { api, accountId } = await account(10);
    const r = await api.post('/images/moonlight', { prompt: 'a lighthouse on a cliff at night, moonlit' });
    expect(r.status).to.equal(200);
    expect(Object.keys(r.body).sort()).to.deep.equal(
      [
        'aspectRatio',
        'base64',
        'cfg',
        'engine',
        'height',
        'mimeType',
        'negativePrompt',
        'prompt',
        'renderMs',
        'seed',
        'steps',
        'width',
      ].sort(),
    );
    expect(r.body).to.include({
      engine: 'moonlight-scene-v2',
      mimeType: 'image/png',
      width: 1024,
      height: 1024,
      aspectRatio: '1:1',
      steps: 8,
      cfg: 1,
      negativePrompt: '',
      prompt: 'a lighthouse on a cliff at night, moonlit',
    });
    expect(r.body.seed).to.be.a('number').within(0, 999_999_999);
    expect(Number.isInteger(r.body.seed)).to.equal(true);
    expect(Number.isInteger(r.body.renderMs) && r.body.renderMs >= 0).to.equal(true);
    const png = await decodeImage(pngOf(r.body.base64));
    expect([png.width, png.height]).to.deep.equal([1024, 1024]);
    expect(png.text).to.deep.equal({ Software: 'moonlight-scene-v2', Seed: String(r.body.seed), Steps: '8' });
    expect(await balance(api)).to.equal(9);
    expect((await ledger(accountId)).map((e) => [e.kind, e.operation])).to.deep.equal([['charge', 'image_moonlight']]);
  });

  it('when each aspect ratio is asked, then the documented exact size, about one megapixel', async () => {
    const { api } = await account();
    for (const [aspectRatio, size] of Object.entries(MOONLIGHT_SIZES) as [
      MoonlightAspectRatio,
      { width: number; height: number },
    ][]) {
      const r = await api.post('/images/moonlight', { prompt: 'a quiet harbour', aspectRatio, seed: 7 });
      expect(r.status, aspectRatio).to.equal(200);
      const png = await decodeImage(pngOf(r.body.base64));
      expect([r.body.width, r.body.height, png.width, png.height], aspectRatio).to.deep.equal([
        size.width,
        size.height,
        size.width,
        size.height,
      ]);
      expect(size.width * size.height, aspectRatio).to.be.within(0.9e6, 1.1e6);
      expect(size.width % 32 === 0 && size.height % 32 === 0, aspectRatio).to.equal(true);
      const [a, b] = aspectRatio.split(':').map(Number);
      expect(size.width / size.height, aspectRatio).to.be.closeTo(a! / b!, 0.05 * (a! / b!)); // the nearest multiple-of-64 bucket
    }
  });

  it('when the same seed and prompt are sent twice, then the PNGs are byte-identical; another seed differs', async () => {
    const { api } = await account();
    const a = await api.post('/images/moonlight', { prompt: 'a fox in the snow', seed: 424242 });
    const b = await api.post('/images/moonlight', { prompt: 'a fox in the snow', seed: 424242 });
    const c = await api.post('/images/moonlight', { prompt: 'a fox in the snow', seed: 424243 });
    expect(a.body.seed).to.equal(424242);
    expect(pngOf(a.body.base64).equals(pngOf(b.body.base64))).to.equal(true);
    expect(pngOf(a.body.base64).equals(pngOf(c.body.base64))).to.equal(false);
  });

  it('when seed 0 and seed 999999999 are sent, then both render; outside the range is 400 naming seed', async () => {
    const { api } = await account();
    expect((await api.post('/images/moonlight', { prompt: 'x', seed: 0 })).body.seed).to.equal(0);
    expect((await api.post('/images/moonlight', { prompt: 'x', seed: 999_999_999 })).body.seed).to.equal(999_999_999);
    for (const seed of [-1, 1_000_000_000, 1.5, '7']) {
      const r = await api.post('/images/moonlight', { prompt: 'x', seed });
      expect(r.status, String(seed)).to.equal(400);
      expect(r.body.error.message, String(seed)).to.match(/^seed: /);
    }
  });

  it('when negativePrompt is non-empty, then 400 naming it; empty or whitespace is accepted and echoed empty', async () => {
    const { api, accountId } = await account(10);
    const r = await api.post('/images/moonlight', { prompt: 'x', negativePrompt: 'blurry' });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/^negativePrompt: is not used by this model/);
    expect(await ledger(accountId)).to.have.length(0);
    const ok = await api.post('/images/moonlight', { prompt: 'x', negativePrompt: '', seed: 3 });
    expect(ok.status).to.equal(200);
    expect(ok.body.negativePrompt).to.equal('');
    const blank = await api.post('/images/moonlight', { prompt: 'x', negativePrompt: '   ', seed: 3 });
    expect(blank.status).to.equal(200);
    expect(blank.body.negativePrompt).to.equal('');
  });

  it('when the prompt is too long or missing, then 400 naming prompt', async () => {
    const { api } = await account();
    expect((await api.post('/images/moonlight', { prompt: 'a'.repeat(1501) })).body.error.message).to.match(
      /^prompt: must be at most 1500/,
    );
    expect((await api.post('/images/moonlight', {})).body.error.message).to.match(/^prompt: is required/);
  });

  it('when the prompt describes adult content, then 400 adult_content and nothing is charged', async () => {
    const { api, accountId } = await account(10);
    for (const prompt of ['a NUDE figure on a beach', 'explicit scene', 'portrait without clothes']) {
      const r = await api.post('/images/moonlight', { prompt });
      expect(r.status, prompt).to.equal(400);
      expect(r.body.error.code, prompt).to.equal('adult_content');
      expect(r.body.error.message, prompt).to.match(/^prompt: describes adult content/);
    }
    expect(await balance(api)).to.equal(10);
    expect(await ledger(accountId)).to.have.length(0);
  });

  it('when the finished render scores as adult (an all-skin-tone palette), then 403 adult_render and it is not charged', async () => {
    const { api, accountId } = await account(10);
    const r = await api.post('/images/moonlight', { prompt: 'macro study of peach and tan silk folds', seed: 11 });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal('adult_render');
    expect(r.body.error.message).to.match(/nothing was charged/);
    expect(await balance(api)).to.equal(10);
    const l = await ledger(accountId);
    expect(l.map((e) => [e.kind, e.operation, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'image_moonlight', 1],
      ['refund', 'image_moonlight', 1],
    ]);
  });

  it('when renders are made, then nothing is stored for the caller', async () => {
    const { api } = await account();
    const files = () => stack.db.db.collection('blobs.files').countDocuments({});
    const before = await files();
    const r = await api.post('/images/moonlight', { prompt: 'a teal lagoon', seed: 5 });
    expect(r.status).to.equal(200);
    expect(await files()).to.equal(before); // no file at all, whoever it might belong to
  });

  it('when no seed is sent, then each render draws its own seed', async () => {
    const { api } = await account();
    const seeds = new Set<number>();
    for (let i = 0; i < 3; i++) seeds.add((await api.post('/images/moonlight', { prompt: 'a teal lagoon' })).body.seed);
    expect(seeds.size).to.equal(3);
  });
});
