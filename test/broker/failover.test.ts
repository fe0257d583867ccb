import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { AmqpClient, connectAny, type TopologyOptions } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { eventually } from '../../scripts/harness/http';
import { clusterUp, type Cluster } from '../../scripts/harness/rabbitmq-cluster';
import { entryText, recordingLogger } from '../helpers/recording-log';
import { dropEverything } from '../../scripts/harness/stack';

const mongoBase = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Node 1's host:port (the cluster's port range is the run's own). */
let NODE1: string;

/** Every message in `queue` (consumed and acked), as [messageId, redelivered] pairs. */
async function drain(url: string, queue: string, expected: number): Promise<string[]> {
  const conn = await connectAny(url);
  try {
    const ch = await conn.createChannel();
    await ch.prefetch(500);
    const ids: string[] = [];
    await ch.consume(queue, (msg) => {
      if (!msg) return;
      ids.push(String(msg.properties.messageId));
      ch.ack(msg);
    });
    await eventually(async () => ids.length >= expected, 30_000, `${expected} messages in ${queue}`);
    await sleep(300); // duplicates, if any, arrive right behind
    return ids;
  } finally {
    await conn.close();
  }
}

describe('failover on the three-node cluster (a node killed with SIGKILL)', function () {
  this.timeout(240_000);
  let cluster: Cluster;
  const prefixes: string[] = [];
  const topology = (): TopologyOptions => {
    const prefix = recordQueuePrefix(`tf${randomBytes(3).toString('hex')}.`);
    prefixes.push(prefix);
    return { prefix, queueType: 'quorum', deliveryLimit: 10, pools: POOL_TYPES };
  };

  before(async () => {
    cluster = await clusterUp();
    NODE1 = cluster.node(1);
  });
  afterEach(async () => {
    // The next test starts from three nodes.
    if (cluster && !(await cluster.running(1))) await cluster.start(1);
  });
  after(async () => {
    for (const prefix of prefixes)
      await dropEverything(
        loadConfig({
          AMQP_URL: cluster.url,
          QUEUE_PREFIX: prefix,
          MONGODB_URL: `${mongoBase}/${prefix.replace('.', '')}`,
        }),
      );
  });

  it('when the node of a publisher with outstanding confirms is killed, then every publish is confirmed through another node within PUBLISH_TIMEOUT_MS and none is lost', async () => {
    const t = topology();
    const log = recordingLogger();
    const client = new AmqpClient(cluster.url, t, log, 5000);
    await client.start();
    expect(client.node).to.equal(NODE1);
    const queue = broker.poolQueue(t.prefix, 'code');
    const resent: string[] = [];
    client.on('resent', (r) => resent.push(r.reason));
    const resentBefore = (await metrics.amqpPublishesResent.get()).values.reduce((n, v) => n + v.value, 0);

    // A steady stream with up to 40 publishes awaiting their confirm at any time.
    const sent: string[] = [];
    const failures: string[] = [];
    const waits: number[] = [];
    const confirmedAt: number[] = [];
    let stop = false;
    let killedAt = 0;
    const publisher = async (lane: number) => {
      for (let i = 0; !stop; i++) {
        const id = `m${lane}.${i}`;
        sent.push(id);
        const t0 = Date.now();
        try {
          await client.publish('', queue, { id }, { messageId: id });
          waits.push(Date.now() - t0);
          confirmedAt.push(Date.now());
        } catch (err) {
          failures.push(`${id}: ${(err as Error).message}`);
        }
      }
    };
    const lanes = Array.from({ length: 40 }, (_, lane) => publisher(lane));
    await eventually(async () => confirmedAt.length >= 400, 30_000, '400 confirms before the kill');
    killedAt = Date.now();
    await cluster.kill(1);
    await eventually(
      async () =>
        client.node !== undefined && client.node !== NODE1 && confirmedAt.filter((c) => c > killedAt).length >= 400,
      30_000,
      '400 confirms after the failover',
    ).catch((err) => {
      for (const e of log.entries) console.log(e.level, e.msg, entryText(e).slice(0, 300));
      console.log(client.node, confirmedAt.filter((c) => c > killedAt).length, failures.slice(0, 5));
      throw err;
    });
    stop = true;
    await Promise.all(lanes);
    await client.close();

    expect(failures, failures.slice(0, 3).join('; ')).to.deep.equal([]);
    expect(resent.length, 'publishes sent again after the failover').to.be.greaterThan(0);
    expect((await metrics.amqpPublishesResent.get()).values.reduce((n, v) => n + v.value, 0) - resentBefore).to.equal(
      resent.length,
    );
    const sorted = [...confirmedAt].sort((a, b) => a - b);
    const gap = Math.max(...sorted.slice(1).map((c, i) => c - sorted[i]!));
    console.log(
      `      longest time without a confirm: ${gap} ms; longest publish wait: ${Math.max(...waits)} ms; ${resent.length} publishes sent again`,
    );
    expect(Math.max(...waits)).to.be.below(5000);

    // One warning for the failover, naming the lost node by host and port; no password anywhere.
    const failovers = log.entries.filter((e) => e.level === 'warn' || e.level === 'error');
    expect(failovers.map((e) => e.msg)).to.deep.equal(['amqp connection lost; failing over']);
    expect(failovers[0]!.fields.node).to.equal(NODE1);
    for (const e of log.entries) expect(entryText(e)).not.to.match(/guest:guest|:guest@/);
    expect(
      log.entries.some(
        (e) => e.msg === 'amqp connected' && e.fields.lostNode === NODE1 && typeof e.fields.downMs === 'number',
      ),
    ).to.equal(true);

    // Every message is in the queue; a re-sent one may be there twice (same message id).
    const ids = await drain(cluster.url, queue, sent.length);
    expect(new Set(ids)).to.have.property('size', sent.length);
    expect(ids.length - sent.length).to.be.at.most(resent.length);
  });

  it('when the node leading a queue is killed under its consumer, then the consumer resumes on the new leader and every message is processed, duplicates recognised by id', async () => {
    const t = topology();
    const queue = broker.poolQueue(t.prefix, 'code');
    // The publisher goes through node 2 (it stays up); the consumer through node 1 (killed).
    const [u1, u2, u3] = cluster.urls as [string, string, string];
    const consumer = new AmqpClient(cluster.url, t, recordingLogger(), 5000);
    await consumer.start();
    expect(await cluster.leaderOf(queue)).to.equal(1);
    const producer = new AmqpClient([u2, u3, u1].join(','), t, recordingLogger(), 5000);
    await producer.start();
    const N = 400;
    await Promise.all(Array.from({ length: N }, (_, i) => producer.publish('', queue, { i }, { messageId: `c${i}` })));
    await producer.close();

    const seen = new Map<string, { copies: number; redelivered: number }>();
    await consumer.consume(queue, 20, async (d) => {
      const id = String(d.msg.properties.messageId);
      const s = seen.get(id) ?? { copies: 0, redelivered: 0 };
      s.copies++;
      if (d.msg.fields.redelivered) s.redelivered++;
      seen.set(id, s);
      await sleep(10);
      d.ack();
    });
    await eventually(async () => seen.size >= N / 4, 30_000, 'a quarter processed');
    const killedAt = Date.now();
    await cluster.kill(1);
    await eventually(async () => seen.size === N, 60_000, `all ${N} messages processed`);
    const doneMs = Date.now() - killedAt;
    const leader = await cluster.leaderOf(queue);
    await consumer.close();

    expect(consumer.node).to.equal(undefined);
    expect([2, 3]).to.include(leader);
    const dupes = [...seen.entries()].filter(([, s]) => s.copies > 1);
    // A copy seen twice is a redelivery of a message the dead node's channel held unacked.
    for (const [id, s] of dupes) expect(s.redelivered, id).to.be.greaterThan(0);
    console.log(
      `      kill → all ${N} processed: ${doneMs} ms; new leader node ${leader}; ${dupes.length} messages processed twice (redelivered, recognised by id)`,
    );
  });
});
