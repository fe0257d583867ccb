import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { AmqpClient, amqpEndpoint, amqpUrls, poolQueueArgs } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { createLogger } from '../../platform/infra/log';
import { webhookQueueNames } from '../../platform/infra/webhook-topology';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { clusterUp, type Cluster } from '../../scripts/harness/rabbitmq-cluster';
import { dropEverything } from '../../scripts/harness/stack';

const mongoBase = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');

describe('AMQP_URL lists', () => {
  it('when AMQP_URL lists the nodes of a cluster, then each is a broker and is named by host and port only', () => {
    const list =
      ' amqp://svc:s3cret@10.0.0.1:5672, amqps://svc:s3cret@rabbit-2.internal ,amqp://svc:s3cret@[::1]:25701 ';
    expect(amqpUrls(list)).to.have.length(3);
    expect(amqpUrls(list).map(amqpEndpoint)).to.deep.equal(['10.0.0.1:5672', 'rabbit-2.internal:5671', '[::1]:25701']);
    expect(loadConfig({ AMQP_URL: list }).AMQP_URL).to.equal(list);
  });

  it('when AMQP_URL holds something that is not an amqp URL, then the configuration is refused, naming the key', () => {
    for (const bad of ['rabbit:5672', 'amqp://guest:guest@127.0.0.1:5672,http://x', ' , ']) {
      expect(() => loadConfig({ AMQP_URL: bad })).to.throw(/AMQP_URL/);
    }
  });
});

describe('quorum queues on the three-node cluster', function () {
  this.timeout(180_000);
  let cluster: Cluster;
  const prefix = recordQueuePrefix(`tq${randomBytes(3).toString('hex')}.`);
  const config = () =>
    loadConfig({
      AMQP_URL: cluster.url,
      QUEUE_PREFIX: prefix,
      QUEUE_TYPE: 'quorum',
      MONGODB_URL: `${mongoBase}/${prefix.replace('.', '')}`,
    });

  before(async () => {
    cluster = await clusterUp();
  });
  after(async () => {
    if (cluster) await dropEverything(config());
  });

  it('when a process declares its topology with QUEUE_TYPE=quorum, then every pool, webhook and audit queue is a quorum queue replicated on all three nodes', async () => {
    const topology = { prefix, queueType: 'quorum' as const, deliveryLimit: 10, pools: POOL_TYPES };
    const client = new AmqpClient(cluster.url, topology, createLogger('silent'));
    await client.start();
    await client.close();

    const queues = await cluster.queues(prefix);
    const expected = [
      ...POOL_TYPES.map((p) => broker.poolQueue(prefix, p)),
      ...webhookQueueNames(prefix, [1000, 3000]),
      broker.auditQueue(prefix),
      broker.deadLetterQueue(prefix),
    ];
    expect(queues.map((q) => q.name)).to.have.members(expected);
    for (const q of queues) {
      expect(q.type, q.name).to.equal('quorum');
      // RabbitMQ 3.10 places a quorum queue on min(quorum_cluster_size (3), cluster nodes) members
      // when x-quorum-initial-group-size is absent; the production argument set stays as it was.
      expect(q.members, q.name).to.have.members([1, 2, 3]);
      expect(q.arguments, q.name).not.to.have.property('x-quorum-initial-group-size');
    }
    const code = queues.find((q) => q.name === broker.poolQueue(prefix, 'code'))!;
    expect(code.arguments).to.deep.include(poolQueueArgs(topology));
    // Declared through node 1 (the first of AMQP_URL): the leader is the declaring client's node.
    expect(code.leader).to.equal(1);
  });
});
