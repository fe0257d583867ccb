import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { AmqpClient, amqpEndpoint, type TopologyOptions } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { eventually } from '../../scripts/harness/http';
import { recordingLogger } from '../helpers/recording-log';
import { dropEverything } from '../../scripts/harness/stack';
import { startTcpProxy } from '../helpers/tcp-proxy';

const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const mongoBase = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
/** Generous bound on noticing the stall: 10 heartbeats at AMQP_HEARTBEAT_S=1 (amqplib gives up after 2 to 3). */
const NOTICE_WITHIN_MS = 10_000;

/**
 * A node that stalls with its TCP connection open (the local broker behind a proxy that stops
 * forwarding, both ways): the AMQP heartbeat notices it, the client gives the connection up and
 * reconnects, to the next node of AMQP_URL first.
 */
describe('AMQP heartbeat: a broker that stops answering with the connection open (single local broker)', function () {
  this.timeout(60_000);
  const prefix = recordQueuePrefix(`thb${randomBytes(3).toString('hex')}.`);
  const topology: TopologyOptions = { prefix, queueType: 'classic', deliveryLimit: 5, pools: POOL_TYPES };
  const queue = broker.poolQueue(prefix, 'code');
  const target = new URL(AMQP_URL);
  const viaProxy = (port: number) => {
    const u = new URL(AMQP_URL);
    u.host = `127.0.0.1:${port}`;
    return u.toString();
  };
  let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
  let client: AmqpClient | undefined;

  beforeEach(async () => {
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await proxy.close();
  });
  after(async () => {
    await dropEverything(
      loadConfig({ AMQP_URL, QUEUE_PREFIX: prefix, MONGODB_URL: `${mongoBase}/${prefix.replace('.', '')}` }),
    );
  });

  /** Consume `queue` on `c`, recording message ids. */
  const consumeIds = async (c: AmqpClient) => {
    const ids: string[] = [];
    await c.consume(queue, 10, async (d) => {
      ids.push(String(d.msg.properties.messageId));
      d.ack();
    });
    return ids;
  };
  /** Resolves with the error of the next connection loss, or rejects after `ms`. */
  const nextLoss = (c: AmqpClient, ms: number) =>
    new Promise<Error | undefined>((resolve, reject) => {
      const t0 = Date.now();
      const timer = setTimeout(() => reject(new Error(`the stalled connection was not given up within ${ms} ms`)), ms);
      c.once('disconnected', (err) => {
        clearTimeout(timer);
        console.log(`      stall noticed after ${Date.now() - t0} ms (heartbeat 1 s)`);
        resolve(err);
      });
    });

  it('when the only node stalls, then the client gives its connection up within a few heartbeats, and once the node answers again it publishes and consumes again', async () => {
    const log = recordingLogger();
    client = new AmqpClient(viaProxy(proxy.port), topology, log, 5000, { heartbeatS: 1 });
    await client.start();
    const ids = await consumeIds(client);
    await client.publish('', queue, { n: 1 }, { messageId: 'before' });
    await eventually(async () => ids.includes('before'), 10_000, 'the message before the stall');

    const lost = nextLoss(client, NOTICE_WITHIN_MS);
    proxy.pause();
    const err = await lost;
    expect(err?.message).to.equal('Heartbeat timeout');
    expect(client.connected).to.equal(false);
    const warnings = log.entries.filter((e) => e.level === 'warn');
    expect(warnings.map((e) => e.msg)).to.deep.equal(['amqp connection lost; reconnecting']);
    expect((warnings[0]!.fields.err as Error).message).to.equal('Heartbeat timeout');

    proxy.resume();
    await eventually(async () => client!.connected, 30_000, 'the client connected again');
    await client.publish('', queue, { n: 2 }, { messageId: 'after' });
    await eventually(async () => ids.includes('after'), 10_000, 'the message after the stall');
  });

  it('when the first node of AMQP_URL stalls, then the client fails over to the next node and publishes and consumes there while the first stays stalled', async () => {
    const stalled = viaProxy(proxy.port);
    client = new AmqpClient(`${stalled},${AMQP_URL}`, topology, recordingLogger(), 5000, { heartbeatS: 1 });
    await client.start();
    expect(client.node).to.equal(amqpEndpoint(stalled));
    const ids = await consumeIds(client);

    const lost = nextLoss(client, NOTICE_WITHIN_MS);
    proxy.pause();
    expect((await lost)?.message).to.equal('Heartbeat timeout');
    await eventually(async () => client!.connected, 30_000, 'the client connected to the next node');
    expect(client.node).to.equal(amqpEndpoint(AMQP_URL));
    await client.publish('', queue, { n: 3 }, { messageId: 'failed-over' });
    await eventually(async () => ids.includes('failed-over'), 10_000, 'the message on the next node');
  });
});
