import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import sinon from 'sinon';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { AmqpClient, type TopologyOptions } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { eventually } from '../../scripts/harness/http';
import { recordingLogger } from '../helpers/recording-log';
import { dropEverything } from '../../scripts/harness/stack';

const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const mongoBase = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');

/** What the tests reach inside the client: the channel a consumer receives on, the connection. */
type Insides = { consumers: { list: { queue: string; channel?: Channel }[] }; connection: { conn?: ChannelModel } };
const insides = (c: AmqpClient) => c as unknown as Insides;

/**
 * Within one connection, on the single local broker: a consumer the broker stops (its channel
 * closed with an error, or the consumer cancelled because its queue was deleted) consumes again,
 * and a publish channel whose reopening failed is opened again.
 */
describe('AmqpClient recovers consumers and its publish channel while the connection stays up (single local broker)', function () {
  this.timeout(60_000);
  const prefix = recordQueuePrefix(`tcr${randomBytes(3).toString('hex')}.`);
  const topology: TopologyOptions = { prefix, queueType: 'classic', deliveryLimit: 5, pools: POOL_TYPES };
  const queue = broker.poolQueue(prefix, 'code');
  let client: AmqpClient;
  let log: ReturnType<typeof recordingLogger>;
  let outside: ChannelModel;

  before(async () => {
    outside = await amqp.connect(AMQP_URL);
  });
  beforeEach(async () => {
    log = recordingLogger();
    client = new AmqpClient(AMQP_URL, topology, log, 5000);
    await client.start();
  });
  afterEach(async () => {
    sinon.restore();
    await client.close();
  });
  after(async () => {
    await outside.close();
    await dropEverything(
      loadConfig({ AMQP_URL, QUEUE_PREFIX: prefix, MONGODB_URL: `${mongoBase}/${prefix.replace('.', '')}` }),
    );
  });

  const consumeIds = async () => {
    const ids: string[] = [];
    await client.consume(queue, 10, async (d) => {
      ids.push(String(d.msg.properties.messageId));
      d.ack();
    });
    return ids;
  };
  const sendAndReceive = async (ids: string[], id: string) => {
    await client.publish('', queue, { id }, { messageId: id });
    await eventually(async () => ids.includes(id), 10_000, `message ${id} consumed`);
  };
  /** Consumers of `queue` as the broker counts them (0 while the queue does not exist). */
  const brokerConsumers = async () => {
    const ch = await outside.createChannel();
    ch.on('error', () => {});
    try {
      return (await ch.checkQueue(queue)).consumerCount;
    } catch {
      return 0;
    } finally {
      await ch.close().catch(() => {});
    }
  };
  const restarts = async (reason: string) =>
    (await metrics.amqpConsumerRestarts.get()).values.find(
      (v) => v.labels.queue === queue && v.labels.reason === reason,
    )?.value ?? 0;
  const warnings = () => log.entries.filter((e) => e.level === 'warn' || e.level === 'error');

  it('when the consumed queue is deleted from outside, then the client declares it again and consumes what is published after', async () => {
    const ids = await consumeIds();
    await sendAndReceive(ids, 'before');
    const before = await restarts('cancelled');

    const ch = await outside.createChannel();
    await ch.deleteQueue(queue);
    await ch.close();
    // The broker cancels the consumer; the client declares the queue again and subscribes.
    await eventually(async () => (await brokerConsumers()) === 1, 15_000, 'a consumer on the queue again');
    await sendAndReceive(ids, 'after');

    expect(await restarts('cancelled')).to.equal(before + 1);
    expect(warnings().map((e) => [e.msg, e.fields.queue, e.fields.reason])).to.deep.equal([
      ['amqp consumer stopped by the broker; subscribing again', queue, 'cancelled'],
    ]);
    expect(client.connected).to.equal(true);
  });

  for (const { what, reason, provoke } of [
    {
      what: 'an ack of an unknown delivery tag (406)',
      reason: 'precondition_failed',
      provoke: (ch: Channel) => ch.ack({ fields: { deliveryTag: 999_999 } } as ConsumeMessage),
    },
    {
      what: 'a declaration check of a queue that does not exist (404)',
      reason: 'not_found',
      provoke: (ch: Channel) => void ch.checkQueue(`${prefix}no-such-queue`).catch(() => {}),
    },
  ]) {
    it(`when the broker closes the consumer's channel after ${what}, then the consumer consumes again`, async () => {
      const ids = await consumeIds();
      await sendAndReceive(ids, `${reason}-before`);
      const before = await restarts(reason);
      const consumer = insides(client).consumers.list.find((c) => c.queue === queue)!;
      const stopped = consumer.channel!;
      const restarted = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the consumer was not subscribed again within 15 s')), 15_000);
        client.once('consumerRestarted', (r) => {
          clearTimeout(timer);
          resolve(r);
        });
      });

      provoke(stopped);
      expect(await restarted).to.deep.equal({ queue, reason });
      expect(consumer.channel).to.exist.and.not.equal(stopped);
      await sendAndReceive(ids, `${reason}-after`);

      expect(await restarts(reason)).to.equal(before + 1);
      const lines = warnings();
      expect(lines.map((e) => [e.msg, e.fields.reason])).to.deep.equal([
        ['amqp consumer stopped by the broker; subscribing again', reason],
      ]);
      expect(String((lines[0]!.fields.err as Error).message)).to.match(
        reason === 'precondition_failed' ? /PRECONDITION_FAILED/ : /NOT_FOUND/,
      );
      expect(client.connected).to.equal(true);
    });
  }

  it('when reopening the publish channel fails once, then it is tried again and publishes go through', async () => {
    const ids = await consumeIds();
    const conn = insides(client).connection.conn!;
    const open = sinon.stub(conn, 'createConfirmChannel');
    open.callThrough();
    open.onFirstCall().rejects(new Error('injected: no channel'));

    // A publish to an exchange that does not exist: the broker closes the publish channel (404).
    const refused = await client.publish(`${prefix}no-such-exchange`, '', { x: 1 }).then(
      () => 'confirmed',
      (err: Error) => err.message,
    );
    expect(refused).to.match(/closed the publish channel/);

    await sendAndReceive(ids, 'after-reopen');
    expect(open.callCount).to.equal(2);
    expect(warnings().map((e) => e.msg)).to.include('amqp publish channel not reopened; trying again');
    expect(insides(client).connection.conn).to.equal(conn);
  });

  it('when reopening the publish channel keeps failing, then the connection is replaced and publishes go through', async () => {
    const ids = await consumeIds();
    const conn = insides(client).connection.conn!;
    sinon.stub(conn, 'createConfirmChannel').rejects(new Error('injected: no channel'));

    await client.publish(`${prefix}no-such-exchange`, '', { x: 1 }).catch(() => {});
    await eventually(
      async () => insides(client).connection.conn !== undefined && insides(client).connection.conn !== conn,
      20_000,
      'a new connection',
    );
    await sendAndReceive(ids, 'after-replace');
    expect(warnings().map((e) => e.msg)).to.include(
      'amqp publish channel not reopened after 5 tries; replacing the connection',
    );
  });
});
