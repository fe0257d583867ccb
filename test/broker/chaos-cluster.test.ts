import { expect } from 'chai';
import { runBrokerClusterScenario } from '../../scripts/chaos/broker-cluster';
import { clusterUp } from '../../scripts/harness/rabbitmq-cluster';

/**
 * The broker-cluster chaos run (npm run chaos -- --broker-cluster) in a reduced form, so CI keeps
 * it true: 100 code builds at 10/s through the compiled service under its supervisor, the code
 * queue's leader killed with SIGKILL and started again meanwhile.
 */
describe('chaos: a RabbitMQ node killed under load (reduced run)', function () {
  this.timeout(300_000);

  it('when the node leading the code queue is killed and restarted during 100 code builds, then none is lost or duplicated, credits are exact and every webhook comes once by event id', async () => {
    const cluster = await clusterUp();
    const r = await runBrokerClusterScenario({
      cluster,
      jobs: 100,
      ratePerSecond: 10,
      gracefulStop: false,
      print: process.env.CHAOS_PRINT === '1',
    });
    const figures = Object.fromEntries(r.figures);
    expect(r.accepted, 'accepted').to.equal(100);
    expect(r.completed, 'completed').to.equal(100);
    expect(r.lost, 'lost').to.equal(0);
    expect(r.duplicated, 'duplicated').to.equal(0);
    expect(r.creditsExact, `credits: ${figures['credits spent / expected (5 a build)']}`).to.equal(true);
    expect(r.webhooks).to.include({ jobsWithOneEventId: 100, jobsWithSeveralEventIds: 0, missing: 0 });
    expect(r.leaks).to.deep.equal([]);
    // A failover is a fraction of a second here; the publish deadline (3 s) is the bound.
    expect(r.longestConfirmGapMs).to.be.below(3000);
    console.log(
      `      longest time without a confirm: ${r.longestConfirmGapMs} ms; ${figures['accept latency p50 / p99 / max, node 1 killed → answering again'] ?? ''}`,
    );
  });
});
