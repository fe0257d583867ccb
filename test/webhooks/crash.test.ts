import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { broker } from '../../contracts/registry';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { start as startWorkers, type WorkerProcess } from '../../workers/workers';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { spawnWorkerProcess } from '../../scripts/harness/worker-process';
import { allDeliveries, createWebhook, readDb, startReceiver, type Receiver } from './helpers';

/** A real webhook worker process on the stack's database and broker. */
const spawnWebhookWorker = (stack: Stack) =>
  spawnWorkerProcess(stack, {
    ALLOW_LOOPBACK_URLS: 'true',
    WORKER_POOLS: 'webhook',
    WEBHOOK_ATTEMPT_TIMEOUT_MS: '30000',
  });

describe('webhook worker crash', () => {
  let stack: Stack;
  let child: ChildProcess | undefined;
  let second: WorkerProcess | undefined;
  let rcv: Receiver;
  before(async () => {
    // The in-process workers run the code pool only; webhooks go to the child process.
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true', WORKER_POOLS: 'code' } });
  });
  after(async () => {
    child?.kill('SIGKILL');
    await second?.stop();
    await rcv?.close();
    await stack.stop();
  });

  it('when the webhook worker is killed in the middle of a delivery, then another worker delivers it again with the same event id', async function () {
    this.timeout(30_000);
    rcv = await startReceiver(({ n }) => (n === 0 ? 'hang' : 200));
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url: rcv.url });
    child = spawnWebhookWorker(stack);
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child!.once('exit', (_code, signal) => resolve(signal)),
    );
    expect((await api.post('/code-builds', { prompt: 'a counter' })).status).to.equal(202);

    // The child is in the middle of the attempt (the receiver holds the request): kill it.
    const [first] = await rcv.waitFor(1, () => true, 20_000);
    child.kill('SIGKILL');
    expect(await exited).to.equal('SIGKILL');
    expect(await allDeliveries(api, hook.id)).to.have.length(0); // the attempt never finished

    second = await startWorkers(stack.config2({ WORKER_POOLS: 'webhook', ALLOW_LOOPBACK_URLS: 'true' }), {
      monitoring: false,
    });
    const [again] = await rcv.waitFor(1, (r) => r.answered === 200, 20_000);
    expect(again!.headers['x-service-event-id']).to.equal(first!.headers['x-service-event-id']);
    expect(again!.body.eventId).to.equal(first!.body.eventId);
    expect(again!.body.data).to.deep.equal(first!.body.data);
    const log = await eventually(async () => {
      const d = await allDeliveries(api, hook.id);
      return d.length === 1 ? d : undefined;
    });
    expect(log[0]).to.include({ attempt: 1, outcome: 'delivered', statusCode: 200, redelivered: true });
  });

  it('when a malformed message reaches the delivery queue, then it is dead-lettered and parked, and deliveries go on', async function () {
    this.timeout(20_000);
    second ??= await startWorkers(stack.config2({ WORKER_POOLS: 'webhook', ALLOW_LOOPBACK_URLS: 'true' }), {
      monitoring: false,
    });
    const queue = broker.webhookDeliveryQueue(stack.config.QUEUE_PREFIX);
    await stack.rt.amqp.publish('', queue, { v: 1, webhookId: 'wh_x' });
    await stack.rt.amqp.publish('', broker.poolQueue(stack.config.QUEUE_PREFIX, 'webhook'), { not: 'an event' });
    const parked = await eventually(
      async () => {
        const docs = await readDb<{ queue: string; reason: string }>(stack.config, COLLECTIONS.deadLetters, {});
        return docs.length >= 2 ? docs : undefined;
      },
      15_000,
      'parked dead letters',
    );
    expect(parked.map((d) => d.queue).sort()).to.deep.equal(
      [broker.poolQueue(stack.config.QUEUE_PREFIX, 'webhook'), queue].sort(),
    );
    expect(parked.map((d) => d.reason)).to.deep.equal(['rejected', 'rejected']);

    // The worker is still delivering.
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const ok = await startReceiver();
    try {
      await createWebhook(api, { url: ok.url });
      await api.post('/code-builds', { prompt: 'a counter' });
      await ok.waitFor(1);
    } finally {
      await ok.close();
    }
  });
});
