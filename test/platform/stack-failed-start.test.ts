import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import { brokerSnapshot } from '../../scripts/harness/broker-hygiene';
import { startStack } from '../../scripts/harness/stack';

/**
 * The test harness cleans up after a stack that fails halfway through its start: the API and the
 * pools had declared their queues when the scheduler could not start (its metrics port taken),
 * and none of those queues or exchanges is left on the broker.
 */
describe('harness: a stack that fails to start', function () {
  this.timeout(120_000);

  it('when the scheduler cannot start after the API and pools declared their queues, then no queue or exchange of the stack is left', async function () {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as net.AddressInfo).port;
    const prefix = `tfail${randomBytes(3).toString('hex')}.`;
    try {
      const err = await startStack({
        env: { QUEUE_PREFIX: prefix, SCHEDULER_METRICS_PORT: String(port), WORKER_POOLS: 'image' },
      }).then(
        () => null,
        (e: Error) => e,
      );
      expect(err, 'the start fails').to.be.instanceOf(Error);
      expect(String(err?.message)).to.match(/EADDRINUSE|in use/i);
    } finally {
      taken.close();
    }
    const after = await brokerSnapshot();
    if (typeof after === 'string') return this.skip(); // a remote broker: rabbitmqctl cannot list it
    const ours = (names: Set<string>) => [...names].filter((n) => n.startsWith(prefix));
    expect(ours(after.queues), 'queues').to.deep.equal([]);
    expect(ours(after.exchanges), 'exchanges').to.deep.equal([]);
  });
});
