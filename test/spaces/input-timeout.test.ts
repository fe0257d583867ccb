import net from 'node:net';
import { expect } from 'chai';
import { waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { spaceKit } from './kit';

/**
 * An input URL whose server accepts the connection and never answers: each attempt gives up after
 * INPUT_FETCH_TIMEOUT_MS, and the failed job names the input and the cause, not "The operation
 * was aborted". The timeout is short here (config), the retries immediate.
 */
describe('spaces: an input URL that never answers', function () {
  this.timeout(60_000);
  let stack: Stack;
  let silent: net.Server;
  const sockets = new Set<net.Socket>();
  let connections = 0;
  before(async () => {
    silent = net.createServer((s) => {
      connections++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    stack = await startStack({
      env: {
        ALLOW_LOOPBACK_URLS: 'true',
        WORKER_POOLS: 'space',
        INPUT_FETCH_TIMEOUT_MS: '300',
        JOB_RETRY_DELAY_MS: '0',
        JOB_MAX_ATTEMPTS: '3',
      },
    });
  });
  after(async () => {
    await stack?.stop();
    for (const s of sockets) s.destroy();
    await new Promise((r) => silent?.close(r));
  });

  const { account, balance } = spaceKit(() => stack);

  it('when the photo URL accepts and never answers, then after its 3 attempts the job fails naming imageUrl and "no answer within 0.3 s" and is refunded', async () => {
    const { api } = await account();
    const r = await api.post('/real-world/spaces', {
      imageUrl: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/room.png`,
      quality: 'preview',
    });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 45_000);
    expect(job.status).to.equal('failed');
    expect(job.error).to.equal('failed after 3 attempts: imageUrl: no answer within 0.3 s');
    expect(connections).to.equal(3);
    const refunded = async () => (await balance(api)) === 1000;
    for (const end = Date.now() + 10_000; Date.now() < end && !(await refunded()); )
      await new Promise((res) => setTimeout(res, 100));
    expect(await balance(api)).to.equal(1000);
  });
});
