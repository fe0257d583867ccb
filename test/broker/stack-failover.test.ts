import { expect } from 'chai';
import { metrics } from '../../monitoring/metrics';
import { client, waitForJob } from '../../scripts/harness/http';
import { clusterUp, type Cluster } from '../../scripts/harness/rabbitmq-cluster';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

describe('the API and workers on the three-node cluster', function () {
  this.timeout(240_000);
  let cluster: Cluster;
  let stack: Stack | undefined;

  before(async () => {
    cluster = await clusterUp();
    // The suite kills node 1: it must be running (a suite before may have left it restarting).
    if (!(await cluster.running(1))) await cluster.start(1);
  });
  after(async () => {
    await stack?.stop();
    if (cluster && !(await cluster.running(1))) await cluster.start(1);
  });

  it('when the node every process is connected to is killed and started again, then code builds keep being accepted and all complete once, credits exact', async () => {
    stack = await startStack({ env: { AMQP_URL: cluster.url, QUEUE_TYPE: 'quorum', PUBLISH_TIMEOUT_MS: '3000' } });
    const runtimes = [stack.api!.runtime, stack.workers!.runtime, stack.scheduler!.runtime];
    for (const rt of runtimes) expect(rt.amqp.node).to.equal(cluster.node(1));
    const { key, accountId } = await stack.createAccount({ credits: 10_000 });
    const api = client(stack.baseUrl, key);
    const failoversBefore =
      (await metrics.amqpReconnects.get()).values.find((v) => v.labels.outcome === 'failover')?.value ?? 0;

    // 10 a second for 14 s; node 1 killed after 3 s, started again at once (it takes a few seconds).
    const answers: Promise<{ status: number; jobId?: string; ms: number; at: number }>[] = [];
    const t0 = Date.now();
    let restarted: Promise<number> | undefined;
    for (let i = 0; i < 140; i++) {
      answers.push(
        (async () => {
          const t = performance.now();
          const r = await api.post('/code-builds', { prompt: `failover ${i}` }, { 'idempotency-key': `failover-${i}` });
          return { status: r.status, jobId: r.body?.jobId, ms: performance.now() - t, at: Date.now() - t0 };
        })(),
      );
      if (i === 30) restarted = cluster.kill(1).then(() => cluster.start(1));
      await sleep(100);
    }
    const done = await Promise.all(answers);
    const nodeBackMs = await restarted!;

    expect(done.filter((a) => a.status !== 202).map((a) => a.status)).to.deep.equal([]);
    for (const a of done)
      expect((await waitForJob(api, a.jobId!, ['complete', 'failed'], 60_000)).status).to.equal('complete');
    for (const rt of runtimes) expect(rt.amqp.node).to.be.oneOf([cluster.node(2), cluster.node(3)]);
    const failovers =
      ((await metrics.amqpReconnects.get()).values.find((v) => v.labels.outcome === 'failover')?.value ?? 0) -
      failoversBefore;
    expect(failovers).to.equal(runtimes.length);

    const jobs = await stack.db.jobs.find({ accountId }).toArray();
    expect(jobs).to.have.length(done.length);
    const balance = fromUnits((await stack.db.accounts.findOne({ _id: accountId }))!.millicredits);
    expect(10_000 - balance).to.equal(5 * done.length);
    const during = done.filter((a) => a.at >= 3000 && a.at < 5000).map((a) => a.ms);
    console.log(
      `      accept latency p50/max: ${Math.round(
        pct(
          done.map((a) => a.ms),
          50,
        ),
      )}/${Math.round(Math.max(...done.map((a) => a.ms)))} ms overall, ${Math.round(pct(during, 50))}/${Math.round(Math.max(...during))} ms in the 2 s after the kill; node 1 back after ${nodeBackMs} ms`,
    );
  });
});
