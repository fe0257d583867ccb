import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'chai';
import sharp from 'sharp';
import { ensureBuilt } from '../../scripts/build-once';
import { spawnApiProcess, type ApiProcess } from '../helpers/api-process';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { projectRoot, spawnWorkerProcess } from '../../scripts/harness/worker-process';

/**
 * The service as `npm start` and the image run it: dist/ built by `npm run build` (esbuild),
 * run by plain node. The rest of the suite runs the sources under tsx; this checks that the
 * build serves the same: an API and a worker process from dist/ run a job end to end, the
 * OpenAPI document, the MCP server and the file sniffing load from the bundle, and a stack
 * trace names the TypeScript source (source maps).
 */
describe('the compiled service (dist/)', function () {
  this.timeout(120_000);
  let stack: Stack;
  let api: ApiProcess;
  let http: Client;
  let worker: ReturnType<typeof spawnWorkerProcess>;

  before(async () => {
    await ensureBuilt();
    // In-process: only the scheduler (sweeps); the API and the worker are the compiled processes.
    stack = await startStack({ api: false, workers: false });
    api = await spawnApiProcess(stack, {}, 60_000, { compiled: true });
    worker = spawnWorkerProcess(stack, { WORKER_POOLS: 'code' }, { compiled: true });
    http = client(api.baseUrl, (await stack.createAccount()).key);
  });
  after(async () => {
    await api?.kill();
    if (worker && worker.exitCode === null) {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
    await stack?.stop();
  });

  it('when a code build is posted to the compiled API, then the compiled worker (its pool loaded lazily) completes it, inlining the React files the build copied into dist/', async () => {
    const r = await http.post('/code-builds', { prompt: 'a todo list', framework: 'react' });
    expect(r.status, r.text).to.equal(202);
    const job = await waitForJob(http, r.body.jobId, ['complete', 'failed'], 60_000);
    expect(job.status, JSON.stringify(job.error)).to.equal('complete');
    expect(job.result.files.length).to.be.greaterThan(0);
    // The worker signs asset URLs with the stack's public base URL; the compiled API serves them here.
    const app = new URL(job.result.appUrl);
    const html = await (await fetch(new URL(app.pathname + app.search, api.baseUrl))).text();
    expect(html)
      .to.include('@license React')
      .and.to.include('react-dom.production.min.js')
      .and.to.include('ReactDOM.createRoot');
  });

  it('when the OpenAPI document and the MCP server are asked, then the bundle serves both', async () => {
    const doc = await client(api.baseUrl).get('/openapi');
    expect(doc.status).to.equal(200);
    expect(doc.body.openapi).to.match(/^3\.1/);
    expect(Object.keys(doc.body.paths).length).to.be.greaterThan(50);
    const init = await fetch(api.baseUrl.replace('/api/v1', '/mcp'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${(await stack.createAccount()).key}`,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'compiled-test', version: '1' },
        },
      }),
    });
    expect(init.status).to.equal(200);
    expect(await init.text()).to.include('serverInfo');
  });

  it('when a PNG is uploaded to Drive under a .txt name, then the compiled API sniffs it as an image', async () => {
    const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const r = await http.post('/drive/files', { name: 'not-really.txt', contentBase64: png.toString('base64') });
    expect(r.status, r.text).to.equal(201);
    expect(r.body).to.include({ kind: 'image', mimeType: 'image/png' });
  });

  it('when a compiled process fails to start, then its log line carries a stack that names the TypeScript sources', async () => {
    const child = spawn(process.execPath, ['dist/api/main.js'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        LOG_FILE: '',
        PORT: '0',
        MONGODB_URL: 'mongodb://127.0.0.1:1/nothing?serverSelectionTimeoutMS=500',
        AMQP_URL: stack.config.AMQP_URL,
        QUEUE_PREFIX: stack.config.QUEUE_PREFIX,
        QUEUE_TYPE: stack.config.QUEUE_TYPE,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const [code] = await once(child, 'exit');
    expect(code).to.equal(1);
    const line = out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'failed to start');
    expect(line, out).to.not.equal(undefined);
    expect(line.level).to.equal('error');
    expect(line.err.stack).to.match(/platform\/\w+\.ts:\d+/);
  });
});
