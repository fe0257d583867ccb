import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../platform/infra/config';
import { decodeImage } from '../../platform/media/codec';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, solidPng, type FakeServer } from './fakes';

/** How the fake diffusion server answers the next request. */
type Mode = 'ok' | 'wrong-size' | 'skin' | 'fail' | 'slow' | 'not-png' | 'url' | 'private-url';

/** A colour that depends on the seed, so a test can see the seed was honoured. */
const seedColour = (seed: number): [number, number, number] => [seed % 200, 40 + (seed % 7) * 20, 210];

const dataOf = (dataUrl: string) => Buffer.from(dataUrl.slice('data:image/png;base64,'.length), 'base64');

/**
 * A self-hosted diffusion server speaking either protocol: the OpenAI images API
 * (POST /v1/images/generations → {data: [{b64_json}]}) or the minimal contract
 * (POST /generate → image/png).
 */
async function diffusionServer(state: { mode: Mode; sent: Buffer[] }): Promise<FakeServer> {
  const server: FakeServer = await fakeServer(async (req, res) => {
    const body = req.body as Record<string, any>;
    const openai = req.path === '/v1/images/generations';
    if (req.path === '/files/out.png') {
      res.setHeader('content-type', 'image/png');
      return void res.end(state.sent.at(-1));
    }
    if (req.method !== 'POST' || (!openai && req.path !== '/generate')) {
      res.statusCode = 404;
      return void res.end();
    }
    if (state.mode === 'fail') {
      res.statusCode = 500;
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify({ error: { message: 'out of GPU memory' } }));
    }
    if (state.mode === 'slow') await new Promise((r) => setTimeout(r, 1500));
    const [w, h] = openai ? String(body.size).split('x').map(Number) : [body.width, body.height];
    const size = state.mode === 'wrong-size' ? [512, 512] : [w!, h!];
    const png =
      state.mode === 'not-png'
        ? Buffer.from('<html>busy</html>')
        : await solidPng(size[0]!, size[1]!, state.mode === 'skin' ? [255, 218, 185] : seedColour(body.seed));
    state.sent.push(png);
    if (!openai) {
      res.setHeader('content-type', 'image/png');
      return void res.end(png);
    }
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        created: 1,
        data: [
          state.mode === 'url'
            ? { url: `${server.url}/files/out.png` }
            : state.mode === 'private-url'
              ? { url: 'http://169.254.169.254/latest/meta-data/' }
              : { b64_json: png.toString('base64') },
        ],
      }),
    );
  });
  return server;
}

for (const protocol of ['openai', 'minimal'] as const) {
  describe(`images: POST /images/moonlight with MOONLIGHT_ENGINE=remote (${protocol} protocol, fake diffusion server)`, () => {
    let stack: Stack;
    let server: FakeServer;
    const state: { mode: Mode; sent: Buffer[] } = { mode: 'ok', sent: [] };
    before(async () => {
      server = await diffusionServer(state);
      stack = await startStack({
        env: {
          MOONLIGHT_ENGINE: 'remote',
          MOONLIGHT_REMOTE_URL: protocol === 'openai' ? `${server.url}/v1` : server.url,
          MOONLIGHT_REMOTE_PROTOCOL: protocol,
          MOONLIGHT_REMOTE_API_KEY: 'diffusion-key',
          MOONLIGHT_REMOTE_MODEL: 'sdxl-moon',
          MOONLIGHT_REMOTE_TIMEOUT_MS: '400',
          ALLOW_LOOPBACK_URLS: 'true',
        },
      });
    });
    after(async () => {
      await stack.stop();
      await server.close();
    });
    beforeEach(() => {
      state.mode = 'ok';
    });

    const account = async (credits = 10) => {
      const a = await stack.createAccount({ credits });
      return { ...a, api: client(stack.baseUrl, a.key) };
    };
    const ledger = (accountId: string) => stack.db.ledger.find({ accountId }).sort({ at: 1 }).toArray();

    it('when a prompt, shape and seed are sent, then the server is asked for exactly them and its PNG is answered', async () => {
      const { api } = await account();
      const r = await api.post('/images/moonlight', { prompt: 'a lighthouse at dawn', aspectRatio: '3:2', seed: 4242 });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({
        engine: 'remote:sdxl-moon',
        width: 1248,
        height: 832,
        aspectRatio: '3:2',
        seed: 4242,
        steps: 8,
        cfg: 1,
      });
      const sent = server.requests.at(-1)!;
      expect(sent.headers.authorization).to.equal('Bearer diffusion-key');
      if (protocol === 'openai') {
        expect(sent.path).to.equal('/v1/images/generations');
        expect(sent.body).to.deep.equal({
          model: 'sdxl-moon',
          prompt: 'a lighthouse at dawn',
          n: 1,
          size: '1248x832',
          response_format: 'b64_json',
          seed: 4242,
          steps: 8,
          guidance_scale: 1,
        });
      } else {
        expect(sent.path).to.equal('/generate');
        expect(sent.body).to.deep.equal({
          prompt: 'a lighthouse at dawn',
          width: 1248,
          height: 832,
          steps: 8,
          guidance: 1,
          seed: 4242,
        });
      }
      const png = dataOf(r.body.base64);
      expect(png.equals(state.sent.at(-1)!)).to.equal(true);
      const img = await decodeImage(png, { channels: 3 });
      expect([img.width, img.height, ...img.data.subarray(0, 3)]).to.deep.equal([1248, 832, ...seedColour(4242)]);
    });

    it('when the server answers another size than the SPEC 2.11 shape, then 503 saying so and nothing is charged', async () => {
      const { api, accountId } = await account();
      state.mode = 'wrong-size';
      const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 1 });
      expect(r.status).to.equal(503);
      expect(r.body.error.code).to.equal('service_unavailable');
      expect(r.body.error.message).to.match(/returned 512x512 for 1:1; 1024x1024 is required/);
      expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    });

    it('when the prompt describes adult content, then 400 and the server is never called', async () => {
      const { api } = await account();
      const before = server.requests.length;
      const r = await api.post('/images/moonlight', { prompt: 'a nude figure' });
      expect(r.status).to.equal(400);
      expect(r.body.error.code).to.equal('adult_content');
      expect(server.requests.length).to.equal(before);
    });

    it('when the server renders an all-skin-tone image, then the output scorer refuses it with 403 and nothing is charged', async () => {
      const { api, accountId } = await account();
      state.mode = 'skin';
      const r = await api.post('/images/moonlight', { prompt: 'silk folds', seed: 2 });
      expect(r.status).to.equal(403);
      expect(r.body.error.code).to.equal('adult_render');
      expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    });

    it('when the server fails, then 503 with its message and nothing is charged', async () => {
      const { api, accountId } = await account();
      state.mode = 'fail';
      const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 3 });
      expect(r.status).to.equal(503);
      expect(r.body.error.message).to.match(/moonlight engine answered 500: out of GPU memory/);
      expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    });

    it('when the server does not answer within MOONLIGHT_REMOTE_TIMEOUT_MS, then 504 timeout and nothing is charged', async () => {
      const { api, accountId } = await account();
      state.mode = 'slow';
      const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 4 });
      expect(r.status).to.equal(504);
      expect(r.body.error.code).to.equal('timeout');
      expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
    });

    it('when the server answers something that is not a PNG, then 503 saying so', async () => {
      const { api } = await account();
      state.mode = 'not-png';
      const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 5 });
      expect(r.status).to.equal(503);
      expect(r.body.error.message).to.match(/moonlight engine returned something other than a PNG/);
    });

    if (protocol === 'openai') {
      it('when the server answers a URL instead of b64_json, then it is fetched through the SSRF guard and answered', async () => {
        const { api } = await account();
        state.mode = 'url';
        const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 6 });
        expect(r.status).to.equal(200);
        expect(dataOf(r.body.base64).equals(state.sent.at(-1)!)).to.equal(true);
      });

      it('when the server answers a URL to a private or metadata address, then the SSRF guard refuses it: 503, nothing fetched, nothing charged', async () => {
        const { api, accountId } = await account();
        state.mode = 'private-url';
        const r = await api.post('/images/moonlight', { prompt: 'a boat', seed: 7 });
        expect(r.status).to.equal(503);
        expect(r.body.error.message).to.match(
          /moonlight engine answer refused: moonlight engine image url: .*(link-local|private|reserved)/,
        );
        expect((await ledger(accountId)).map((e) => e.kind)).to.deep.equal(['charge', 'refund']);
      });
    }
  });
}

describe('images: MOONLIGHT_ENGINE=remote without a URL', () => {
  it('when the configuration is loaded, then it stops with a message naming MOONLIGHT_REMOTE_URL', () => {
    expect(() => loadConfig({ MOONLIGHT_ENGINE: 'remote' })).to.throw(
      ConfigError,
      /MOONLIGHT_REMOTE_URL: must be set when MOONLIGHT_ENGINE=remote/,
    );
  });
});
