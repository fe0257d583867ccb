import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { AmqpClient, RPC_CHUNK_TYPE, type TopologyOptions } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { createLogger } from '../../platform/infra/log';
import { useAmqpPair } from '../helpers/amqp-pair';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { clusterUp, type Cluster } from '../../scripts/harness/rabbitmq-cluster';
import { dropEverything } from '../../scripts/harness/stack';

const mongoBase = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('request/reply through a failover', function () {
  this.timeout(180_000);
  let cluster: Cluster;
  const prefix = recordQueuePrefix(`tr${randomBytes(3).toString('hex')}.`);
  const topology: TopologyOptions = { prefix, queueType: 'quorum', deliveryLimit: 10, pools: POOL_TYPES };

  before(async () => {
    cluster = await clusterUp();
  });
  after(async () => {
    if (!cluster) return;
    if (!(await cluster.running(1))) await cluster.start(1);
    await dropEverything(
      loadConfig({
        AMQP_URL: cluster.url,
        QUEUE_PREFIX: prefix,
        MONGODB_URL: `${mongoBase}/${prefix.replace('.', '')}`,
      }),
    );
  });

  it("when the caller's node dies while a worker runs its request, then the call fails at once (not sent again, the work runs once) and the next call goes through another node", async () => {
    const [u1, u2, u3] = cluster.urls as [string, string, string];
    const caller = new AmqpClient(cluster.url, topology, createLogger('silent'));
    const worker = new AmqpClient([u2, u3, u1].join(','), topology, createLogger('silent'));
    await caller.start();
    await worker.start();
    let runs = 0;
    const stop = await worker.respond(broker.poolQueue(prefix, 'image'), 2, async (payload) => {
      runs++;
      if ((payload as { slow?: boolean }).slow) await sleep(1500);
      return { ok: true, result: payload };
    });
    try {
      const call = caller.rpc('image', { slow: true }, 10_000).then(
        () => null,
        (e: Error) => e,
      );
      await sleep(300); // the worker holds it
      const killedAt = Date.now();
      await cluster.kill(1);
      const err = await call;
      expect(err?.message).to.match(/reply channel closed/);
      expect(Date.now() - killedAt).to.be.below(2000);
      await sleep(2000); // the worker finishes; its answer has nowhere to go
      expect(runs).to.equal(1);
      expect(await caller.rpc('image', { n: 2 }, 10_000)).to.deep.equal({ ok: true, result: { n: 2 } });
      expect(caller.node).to.be.oneOf([cluster.node(2), cluster.node(3)]);
    } finally {
      await stop();
      await caller.close();
      await worker.close();
    }
  });
});

describe('streamed replies sent again', () => {
  const prefix = `tsr${randomBytes(3).toString('hex')}.`;
  const pair = useAmqpPair(prefix, 'classic');

  it('when a responder sends a chunk again (its confirm was lost in a failover), then the caller keeps one copy', async () => {
    const queue = broker.poolQueue(prefix, 'speech');
    // A responder that sends chunk 0 twice, as AmqpClient does when the connection that carried
    // it died before the broker's confirm.
    const stop = await pair.worker.consume(queue, 1, async (d) => {
      const { replyTo, correlationId } = d.msg.properties;
      const chunk = (seq: number, text: string) =>
        pair.worker.publish('', replyTo as string, text, {
          correlationId,
          persistent: false,
          type: RPC_CHUNK_TYPE,
          headers: { 'x-seq': seq },
        });
      await chunk(0, 'a');
      await chunk(0, 'a');
      await chunk(1, 'b');
      await pair.worker.publish(
        '',
        replyTo as string,
        { ok: true, result: 'done' },
        { correlationId, persistent: false, headers: { 'x-chunks': 2 } },
      );
      d.ack();
    });
    try {
      const got: string[] = [];
      const reply = await pair.caller.rpcStream('speech', {}, 5000, (data, seq) =>
        got.push(`${seq}:${JSON.parse(data.toString())}`),
      );
      expect(reply).to.deep.equal({ ok: true, result: 'done' });
      expect(got).to.deep.equal(['0:a', '1:b']);
    } finally {
      await stop();
    }
  });
});
