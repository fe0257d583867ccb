import type http from 'node:http';
import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import sharp from 'sharp';
import type { SpacePlan } from '../../contracts/spaces';
import { createLogger } from '../../platform/infra/log';
import { boxColliderGlb } from '../../workers/engines/spaces/collider';
import { boxSplats } from '../../workers/engines/spaces/photo.engine';
import { createRemoteSpaceEngine, type RemoteEngineOptions } from '../../workers/engines/spaces/remote.engine';
import type { SpaceEngineContext } from '../../workers/engines/spaces/space.engine';
import { encodeSpz } from '../../workers/engines/spaces/spz';
import { UnrecoverableError } from '../../workers/pool/errors';
import { fakeServer, type Recorded } from '../helpers/fake-provider';
import { readSpz } from '../../scripts/harness/space-readers';

const PLAN: SpacePlan = {
  source: 'photos',
  imageUrls: ['https://example.com/a.png', 'https://example.com/b.png'],
  quality: 'full',
  title: null,
} as SpacePlan;

/** An engine context in memory: stored files, remembered values and published previews are kept for the test to read. */
function memoryContext(jobId: string, remembered = new Map<string, string>()) {
  const stored = new Map<string, Buffer>();
  const ctx: SpaceEngineContext = {
    jobId,
    signal: new AbortController().signal,
    progress: async () => {},
    store: async (bytes, _type, name) => {
      stored.set(name, bytes);
      return `mem:${name}`;
    },
    publishPreview: async () => {},
    log: createLogger('silent'),
    recall: (key) => remembered.get(key),
    remember: async (key, value) => void remembered.set(key, value),
  };
  return { ctx, stored, remembered };
}

const rejection = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the build to fail');
};

describe('spaces: the remote world-generation adapter against a fake provider', function () {
  this.timeout(30_000);
  let assets: { quick: Buffer; full: Buffer; glb: Buffer; pano: Buffer };
  /** What each world's n-th poll answers; the default: queued, then succeeded with every asset. */
  let script: (world: string, n: number, asset: (p: string) => string) => { status: number; body: unknown };
  let provider: Awaited<ReturnType<typeof fakeServer>>;
  const polls = new Map<string, number>();
  let created = 0;
  const posts = () => provider.requests.filter((r) => r.method === 'POST');
  const gets = (world: string) =>
    provider.requests.filter((r) => r.method === 'GET' && r.url === `/v1/worlds/${world}`);
  const engine = (o: Partial<RemoteEngineOptions> = {}) =>
    createRemoteSpaceEngine({
      baseUrl: provider.url,
      apiKey: 'sk-test',
      pollMs: 20,
      timeoutMs: 20_000,
      maxBytes: 10 * 1024 * 1024,
      allowLoopback: true,
      ...o,
    });

  before(async () => {
    const box = { left: -2, right: 2, far: 3, back: -2, ceiling: 2.5, cameraHeight: 1.5 };
    const grey = (_x: number, _y: number, _z: number, out: Float32Array, o: number) => out.fill(128, o, o + 3);
    assets = {
      quick: encodeSpz(boxSplats(box, grey, 1_000)),
      full: encodeSpz(boxSplats(box, grey, 3_000)),
      glb: await boxColliderGlb({ min: [-2, -1.5, -3], max: [2, 1, 2] }),
      pano: await sharp({ create: { width: 32, height: 16, channels: 3, background: { r: 9, g: 9, b: 9 } } })
        .png()
        .toBuffer(),
    };
    provider = await fakeServer((req: Recorded, res: http.ServerResponse) => {
      res.setHeader('content-type', 'application/json');
      if (req.method === 'POST' && req.url === '/v1/worlds')
        return void res.end(JSON.stringify({ id: `w-${++created}` }));
      const m = /^\/v1\/worlds\/([\w-]+)$/.exec(req.url);
      if (m) {
        const n = (polls.get(m[1]!) ?? 0) + 1;
        polls.set(m[1]!, n);
        const answer = script(m[1]!, n, (p) => `${provider.url}/assets/${p}`);
        res.statusCode = answer.status;
        return void res.end(JSON.stringify(answer.body));
      }
      const asset = {
        '/assets/quick.spz': assets.quick,
        '/assets/full.spz': assets.full,
        '/assets/room.glb': assets.glb,
        '/assets/pano.png': assets.pano,
        '/assets/junk': Buffer.from('not a model at all'),
      }[req.url];
      if (asset) return void res.end(asset);
      res.statusCode = 404;
      res.end('{}');
    });
  });
  after(() => provider?.close());
  beforeEach(() => {
    provider.requests.length = 0;
    polls.clear();
    script = (world, n, a) =>
      n === 1
        ? { status: 200, body: { id: world, status: 'queued' } }
        : {
            status: 200,
            body: {
              id: world,
              status: 'succeeded',
              quick: { splatUrl: a('quick.spz'), gaussians: 1 },
              full: {
                splatUrl: a('full.spz'),
                gaussians: 1,
                metricScale: 1.5,
                colliderUrl: a('room.glb'),
                panoramaUrl: a('pano.png'),
              },
            },
          };
  });

  it('when a poll fails with 503 twice, then the adapter keeps polling the same world and exactly one world is created, with the job id as its idempotency key', async () => {
    const ok = script;
    script = (world, n, a) => (n <= 2 ? { status: 503, body: { error: 'busy' } } : ok(world, n - 2, a));
    const { ctx, stored, remembered } = memoryContext('job-503');
    const result = await engine().build({ plan: PLAN, photos: [] }, ctx);
    expect(result).to.include({
      stage: 'space',
      spaceFullUrl: 'mem:space-full.spz',
      colliderUrl: 'mem:collider.glb',
      panoramaUrl: 'mem:panorama.png',
      metricScale: 1.5,
      gaussians: readSpz(assets.full).numPoints,
    });
    expect(stored.get('space-full.spz')).to.deep.equal(assets.full);
    expect(posts()).to.have.length(1);
    expect(posts()[0]!.headers['idempotency-key']).to.equal('job-503');
    const world = remembered.get('providerWorldId')!;
    expect(gets(world)).to.have.length(4); // 503, 503, queued, succeeded
    expect(getEventListeners(ctx.signal, 'abort')).to.have.length(0); // no listener left behind by the waits
  });

  it('when a second attempt of the same job runs with the remembered world id, then it polls that world and creates none', async () => {
    const first = memoryContext('job-again');
    script = () => ({ status: 503, body: {} });
    const err = await rejection(engine({ timeoutMs: 1_000 }).build({ plan: PLAN, photos: [] }, first.ctx)); // the provider stays down past the deadline
    expect(err).to.be.instanceOf(UnrecoverableError);
    expect(posts()).to.have.length(1);
    const world = first.remembered.get('providerWorldId')!;
    expect(world).to.match(/^w-\d+$/);

    // The provider is back: the pool's next attempt of the job resumes the remembered world.
    script = (world, _n, a) => ({
      status: 200,
      body: {
        id: world,
        status: 'succeeded',
        full: {
          splatUrl: a('full.spz'),
          gaussians: 1,
          metricScale: 1.5,
          colliderUrl: a('room.glb'),
          panoramaUrl: null,
        },
      },
    });
    const second = memoryContext(
      'job-again',
      new Map([...first.remembered].map(([k, v]) => [k, k === 'providerWorldCreatedAt' ? String(Date.now()) : v])),
    );
    const result = await engine().build({ plan: PLAN, photos: [] }, second.ctx);
    expect(result.stage).to.equal('space');
    expect(posts()).to.have.length(1); // still only the first attempt's create
    expect(gets(world).length).to.be.greaterThan(1);
  });

  it('when the provider base URL is a loopback address and loopback user URLs are refused, then the provider is still called, but its asset URLs still go through the SSRF guard', async () => {
    const { ctx } = memoryContext('job-private');
    const err = await rejection(engine({ allowLoopback: false }).build({ plan: PLAN, photos: [] }, ctx));
    expect(posts()).to.have.length(1); // the configured provider was reached
    expect(err).to.be.instanceOf(UnrecoverableError);
    expect(err.message).to.match(/splat/);
    expect(provider.requests.filter((r) => r.url.startsWith('/assets/'))).to.deep.equal([]); // no asset fetched from a private address
  });

  it('when SPACE_PROVIDER_BASE_URL is not an http(s) URL, then the job fails at once with a message naming the setting', async () => {
    const err = await rejection(
      engine({ baseUrl: 'ftp://provider.internal/' }).build({ plan: PLAN, photos: [] }, memoryContext('job-ftp').ctx),
    );
    expect(err).to.be.instanceOf(UnrecoverableError);
    expect(err.message).to.match(/SPACE_PROVIDER_BASE_URL must be an http or https URL/);
    expect(posts()).to.have.length(0);
  });

  it("when the provider's collider or splat is not what it claims, then the job fails with a clear error and nothing is stored for it", async () => {
    for (const [override, message] of [
      [{ colliderUrl: 'junk' }, /collider is not a binary glTF 2\.0 \(GLB\) file/],
      [{ splatUrl: 'junk' }, /splat is not an SPZ file \(not gzip\)/],
    ] as const) {
      polls.clear();
      script = (world, _n, a) => ({
        status: 200,
        body: {
          id: world,
          status: 'succeeded',
          full: {
            splatUrl: a('full.spz'),
            gaussians: 1,
            metricScale: 1,
            colliderUrl: null,
            panoramaUrl: null,
            ...Object.fromEntries(Object.entries(override).map(([k, v]) => [k, a(v)])),
          },
        },
      });
      const { ctx, stored } = memoryContext('job-bad-asset');
      const err = await rejection(engine().build({ plan: PLAN, photos: [] }, ctx));
      expect(err).to.be.instanceOf(UnrecoverableError);
      expect(err.message).to.match(message);
      expect([...stored.keys()]).to.not.include('collider.glb');
    }
  });
});
