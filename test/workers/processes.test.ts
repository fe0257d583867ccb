import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'chai';
import sinon from 'sinon';
import { client, eventually, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { projectRoot, spawnWorkerProcess } from '../../scripts/harness/worker-process';

describe('worker processes', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false });
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  it('when a process runs WORKER_POOLS=code, then it completes code builds, leaves songs queued, and stops cleanly on SIGTERM', async function () {
    this.timeout(60_000);
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const child = spawnWorkerProcess(stack, { WORKER_POOLS: 'code' });
    try {
      const code = await api.post('/code-builds', { prompt: 'a counter' });
      const song = await api.post('/songs', { style: 'lofi', instrumental: true });
      expect((await waitForJob(api, code.body.jobId, ['complete', 'failed'], 40_000)).status).to.equal('complete');
      expect((await api.get(`/jobs/${song.body.jobId}`)).body.status).to.equal('queued');
      child.kill('SIGTERM');
      const [exitCode] = await once(child, 'exit');
      expect(exitCode).to.equal(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('when the configuration is bad, then the process stops before connecting, naming the key', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      WORKER_POOLS: 'code,nonsense',
      MONGODB_URL: 'mongodb://127.0.0.1:1/x',
    };
    delete env.LOG_FILE;
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let stdout = '';
    child.stdout!.on('data', (d) => (stdout += d));
    const [exitCode] = await once(child, 'exit');
    expect(exitCode).to.equal(78);
    // One JSON log line, like every other line of the service.
    const line = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(line).to.include({ level: 'fatal', service: 'workers' });
    expect(line.msg).to.include('WORKER_POOLS: unknown pool "nonsense"');
  });

  it('when the socket buffer is full, then publishing waits for drain instead of buffering more', async () => {
    const amqp = stack.rt.amqp;
    const pub = (amqp as unknown as { publishChannels: { current: import('amqplib').ConfirmChannel } }).publishChannels
      .current;
    const real = pub.publish.bind(pub);
    let calls = 0;
    sinon.stub(pub, 'publish').callsFake((...args: Parameters<typeof real>) => {
      calls++;
      real(...args);
      return calls > 1; // the first publish reports a full buffer
    });
    await amqp.publish('', 'no-such-queue', { n: 1 });
    let sent = false;
    const second = amqp.publish('', 'no-such-queue', { n: 2 }).then(() => (sent = true));
    // Without back-pressure the second publish would reach the channel within these turns.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(calls).to.equal(1); // held back until 'drain'
    expect(sent).to.equal(false);
    pub.emit('drain');
    await second;
    await eventually(async () => calls === 2);
  });
});
