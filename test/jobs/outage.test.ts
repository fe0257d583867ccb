import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { client, eventually, waitForJob } from '../helpers/http';
import { startStack, type Stack } from '../helpers/stack';
import { startTcpProxy } from '../helpers/tcp-proxy';

const postMany = (api: ReturnType<typeof client>, n: number, tag: string) =>
  Promise.all(Array.from({ length: n }, (_, i) => api.post('/code-builds', { prompt: `${tag} ${i}` })));

describe('broker outage', () => {
  it('when RabbitMQ becomes unreachable while jobs are dispatched, then every accepted job still completes once it is back', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: 5672 });
    const stack = await startStack({ env: { AMQP_URL: `amqp://guest:guest@127.0.0.1:${proxy.port}`, PUBLISH_TIMEOUT_MS: '1000' } });
    try {
      const api = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
      const before = await postMany(api, 5, 'before');
      await proxy.cut();
      const during = await postMany(api, 10, 'during');
      for (const r of [...before, ...during]) expect(r.status).to.equal(202);
      const probe = await fetch(stack.baseUrl.replace('/api/v1', '/readyz'));
      expect(probe.status).to.equal(503);
      expect(await stack.rt.db.jobs.countDocuments({ dispatchedAt: null })).to.be.greaterThan(0);
      await proxy.restore();
      for (const r of [...before, ...during]) expect((await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000)).status).to.equal('complete');
      await eventually(async () => (await fetch(stack.baseUrl.replace('/api/v1', '/readyz'))).status === 200);
    } finally {
      await stack.stop();
      await proxy.close();
    }
  });

  // The real thing: stop and start the local RabbitMQ application. It disturbs every other user of
  // the broker, so it runs in CI (alone on its machine) or when TEST_BROKER_RESTART=1.
  it('when the local RabbitMQ is stopped and started during dispatch, then no job is lost', async function () {
    if (process.env.CI !== 'true' && process.env.TEST_BROKER_RESTART !== '1') this.skip();
    this.timeout(120_000);
    const stack: Stack = await startStack({ env: { PUBLISH_TIMEOUT_MS: '1000' } });
    try {
      const api = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
      const first = postMany(api, 10, 'racing');
      execFileSync('rabbitmqctl', ['stop_app'], { stdio: 'ignore', timeout: 60_000 });
      const during = await postMany(api, 10, 'down');
      execFileSync('rabbitmqctl', ['start_app'], { stdio: 'ignore', timeout: 60_000 });
      const all = [...(await first), ...during];
      for (const r of all) expect(r.status).to.equal(202);
      for (const r of all) expect((await waitForJob(api, r.body.jobId, ['complete', 'failed'], 60_000)).status).to.equal('complete');
    } finally {
      await stack.stop().catch(() => {});
    }
  });
});
