import dns from 'node:dns';
import { expect } from 'chai';
import sinon from 'sinon';
import { CodeBuildRequest } from '../../contracts/code-builds';
import { EVENT_VERSION } from '../../contracts/events';
import { registry } from '../../monitoring/metrics';
import { emitEvent } from '../../platform/events/events';
import { createDeliveriesRepository } from '../../platform/webhooks/deliveries.repository';
import { Pool } from '../../workers/pool/pool';
import { UnrecoverableError } from '../../workers/pool/errors';
import type { WebhookWorker } from '../../workers/webhooks/webhook.worker';
import { client, eventually, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { allDeliveries, createWebhook, startReceiver, type Receiver, verifySignature } from './helpers';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Fast timings for the suite; timing.test.ts runs the SPEC's real 5 s / 1 s / 3 s. */
const FAST = {
  ALLOW_LOOPBACK_URLS: 'true',
  WEBHOOK_ATTEMPT_TIMEOUT_MS: '1500',
  WEBHOOK_RETRY_DELAYS_MS: '100,200',
  WEBHOOK_ENDPOINT_CONCURRENCY: '3',
};

const build = async (api: Client) => {
  const r = await api.post('/code-builds', { prompt: 'a counter' });
  expect(r.status).to.equal(202);
  return waitForJob(api, r.body.jobId);
};

describe('webhook delivery', () => {
  let stack: Stack;
  let worker: WebhookWorker;
  const receivers: Receiver[] = [];
  const receiver = async (...args: Parameters<typeof startReceiver>) => {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  };
  before(async () => {
    stack = await startStack({ env: FAST });
    worker = stack.workers!.webhooks!;
  });
  afterEach(() => sinon.restore());
  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await stack.stop();
  });

  it('when a code build completes, then the subscribed webhook gets one delivery whose signature a third-party verifier accepts', async () => {
    const rcv = await receiver();
    const other = await receiver();
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const hook = await createWebhook(api, { url: rcv.url, events: ['code_build.completed'] });
    const failedOnly = await createWebhook(api, { url: other.url, events: ['code_build.failed'] });
    const stranger = await receiver();
    await createWebhook(client(stack.baseUrl, (await stack.createAccount()).key), { url: stranger.url });

    const job = await build(api);
    const [req] = await rcv.waitFor(1);
    const h = req!.headers;
    expect(h['content-type']).to.equal('application/json');
    expect(h['x-service-event']).to.equal('code_build.completed');
    expect(h['x-service-event-id']).to.match(UUID).and.equal(req!.body.eventId);
    expect(h['x-service-event-version'])
      .to.equal(EVENT_VERSION)
      .and.match(/^\d{4}-\d{2}-\d{2}$/);
    expect(h['x-service-signature']).to.match(/^sha256=[0-9a-f]{64}$/);
    expect(await verifySignature(hook.secret, req!.raw, h['x-service-signature'] as string)).to.equal(true);
    expect(await verifySignature(failedOnly.secret, req!.raw, h['x-service-signature'] as string)).to.equal(false);
    expect(
      await verifySignature(hook.secret, req!.raw.replace('complete', 'failed'), h['x-service-signature'] as string),
    ).to.equal(false);

    expect(Object.keys(req!.body).sort()).to.deep.equal([
      'data',
      'event',
      'eventId',
      'eventVersion',
      'occurredAt',
      'timestamp',
    ]);
    expect(req!.body).to.include({ event: 'code_build.completed', eventVersion: EVENT_VERSION });
    expect(req!.body.occurredAt).to.match(ISO);
    expect(req!.body.timestamp).to.match(ISO);
    expect(req!.body.data).to.include({
      jobId: job.jobId,
      status: 'complete',
      pollUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${job.jobId}`,
    });
    expect(new URL(req!.body.data.pollUrl).protocol).to.equal('http:'); // absolute

    const log = await eventually(async () => {
      const d = await allDeliveries(api, hook.id);
      return d.length === 1 ? d : undefined;
    });
    expect(log[0]).to.include({
      webhookId: hook.id,
      eventId: req!.body.eventId,
      event: 'code_build.completed',
      attempt: 1,
      outcome: 'delivered',
      statusCode: 200,
      responseExcerpt: 'answer 200',
      error: null,
      nextAttemptAt: null,
      redelivered: false,
    });
    expect(log[0].durationMs).to.be.a('number');
    const after = await eventually(async () => {
      const r = await api.get(`/webhooks/${hook.id}`);
      return r.body.lastDeliveryStatus === 'delivered' ? r.body : undefined;
    });
    expect(after.consecutiveFailures).to.equal(0);
    expect(other.received).to.have.length(0);
    expect(stranger.received).to.have.length(0);
    expect(await allDeliveries(api, failedOnly.id)).to.have.length(0);
  });

  it('when the receiver fails twice, then the delivery is retried with the same event id and the third attempt delivers', async () => {
    const rcv = await receiver(({ n }) => (n < 2 ? { status: 500, body: 'x'.repeat(5000) } : 204));
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url: rcv.url });
    await build(api);
    const reqs = await rcv.waitFor(3);
    const ids = new Set(reqs.map((r) => r.headers['x-service-event-id']));
    expect(ids.size).to.equal(1);
    for (const r of reqs)
      expect(await verifySignature(hook.secret, r.raw, r.headers['x-service-signature'] as string)).to.equal(true);

    const log = await eventually(async () => {
      const d = await allDeliveries(api, hook.id);
      return d.length === 3 ? d : undefined;
    });
    expect(log.map((d) => d.attempt)).to.deep.equal([3, 2, 1]); // newest first
    expect(log.map((d) => d.outcome)).to.deep.equal(['delivered', 'failed', 'failed']);
    expect(log.map((d) => d.statusCode)).to.deep.equal([204, 500, 500]);
    expect(log[1].error).to.equal('receiver answered HTTP 500');
    expect(log[1].responseExcerpt).to.have.length(1024); // bounded excerpt
    expect(log[1].nextAttemptAt).to.be.a('string');
    expect(log[0].nextAttemptAt).to.equal(null);
    expect(new Set(log.map((d) => d.eventId))).to.deep.equal(ids);
    expect((await api.get(`/webhooks/${hook.id}`)).body).to.include({
      isActive: true,
      consecutiveFailures: 0,
      lastDeliveryStatus: 'delivered',
    });
  });

  it('when 5 deliveries in a row fail, then the webhook is disabled, no longer called, and PATCH isActive true re-enables it', async () => {
    const rcv = await receiver(() => 503);
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const hook = await createWebhook(api, { url: rcv.url });
    const before = (await registry.getSingleMetric('webhooks_disabled_total')!.get()).values[0]?.value ?? 0;
    await Promise.all([...Array(5).keys()].map(() => build(api)));
    const disabled = await eventually(async () => {
      const r = await api.get(`/webhooks/${hook.id}`);
      return r.body.isActive === false ? r.body : undefined;
    });
    expect(disabled).to.include({
      disabledReason: 'consecutive_failures',
      consecutiveFailures: 5,
      lastDeliveryStatus: 'failed',
    });
    expect(disabled.disabledAt).to.be.a('string');
    expect(rcv.received).to.have.length(15); // 5 deliveries x (1 + 2 retries)
    expect(await allDeliveries(api, hook.id)).to.have.length(15);
    expect((await registry.getSingleMetric('webhooks_disabled_total')!.get()).values[0]!.value).to.equal(before + 1);

    // Disabled: the next event fans out to nobody.
    const fanned = new Promise<{ webhooks: number }>((resolve) => {
      const on = (e: { event: string; accountId: string; webhooks: number }) => {
        if (e.accountId === accountId && e.event === 'code_build.completed' && e.webhooks === 0) resolve(e);
      };
      worker.on('fannedOut', on);
    });
    await build(api);
    expect((await fanned).webhooks).to.equal(0);
    expect(rcv.received).to.have.length(15);

    rcv.set(() => 200);
    const on = await api.patch(`/webhooks/${hook.id}`, { isActive: true });
    expect(on.body).to.include({ isActive: true, consecutiveFailures: 0, disabledAt: null, disabledReason: null });
    await build(api);
    await rcv.waitFor(1, (r) => r.answered === 200);
    const healthy = await eventually(async () => {
      const r = await api.get(`/webhooks/${hook.id}`);
      return r.body.lastDeliveryStatus === 'delivered' ? r.body : undefined;
    });
    expect(healthy).to.include({ isActive: true, consecutiveFailures: 0 });
  });

  it('when a receiver hangs, then its attempts time out and are retried, and deliveries to other webhooks are not held up', async () => {
    const slow = await receiver(({ n }) => (n < 4 ? 'hang' : 200));
    const fast = await receiver();
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const slowHook = await createWebhook(api, { url: slow.url });
    await createWebhook(api, { url: fast.url });
    let deferred = 0;
    worker.on('deferred', (e) => {
      if (e.webhookId === slowHook.id) deferred++;
    });
    await Promise.all([...Array(6).keys()].map(() => api.post('/code-builds', { prompt: 'a counter' })));

    // All six reach the healthy receiver while the slow one still holds its first requests open,
    // at most WEBHOOK_ENDPOINT_CONCURRENCY (3) at a time: the rest wait in the delay queue.
    await fast.waitFor(6);
    await slow.waitFor(1);
    expect(slow.received.filter((r) => r.open).length).to.be.greaterThan(0);
    expect(slow.received.filter((r) => r.open).length).to.be.at.most(3);

    // Every delivery to the slow receiver arrives in the end: the timed-out ones on a retry.
    const delivered = await slow.waitFor(6, (r) => r.answered === 200, 20_000);
    expect(new Set(delivered.map((r) => r.body.eventId)).size).to.equal(6);
    const log = await allDeliveries(api, slowHook.id);
    const timeouts = log.filter((d) => d.error === `no answer within ${FAST.WEBHOOK_ATTEMPT_TIMEOUT_MS} ms`);
    expect(timeouts).to.have.length(4);
    for (const t of timeouts) expect(t).to.include({ outcome: 'failed', statusCode: null });
    expect(deferred).to.be.greaterThan(0);
  });

  it("when the target's DNS answer turns private after creation, then each attempt is refused before connecting and logged", async () => {
    const rcv = await receiver();
    const real = dns.promises.lookup.bind(dns.promises);
    let address = '127.0.0.1';
    sinon
      .stub(dns.promises, 'lookup')
      .callsFake((async (host: string, opts: unknown) =>
        host === 'hooks.customer.test' ? [{ address, family: 4 }] : real(host, opts as never)) as never);
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url: `http://hooks.customer.test:${rcv.port}/hook` });

    address = '10.20.30.40'; // rebinding: the name now points into the private network
    await build(api);
    const log = await eventually(async () => {
      const d = await allDeliveries(api, hook.id);
      return d.length === 3 ? d : undefined;
    });
    for (const d of log) {
      expect(d).to.include({ outcome: 'failed', statusCode: null });
      expect(d.error).to.match(/^target refused: hooks\.customer\.test resolves to a private/);
    }
    expect(rcv.received).to.have.length(0);
    // The failure count follows the third attempt's log entry.
    await eventually(
      async () => (await api.get(`/webhooks/${hook.id}`)).body.consecutiveFailures === 1,
      10_000,
      'the failure to be counted',
    );

    // The name points back at the receiver: deliveries flow again.
    address = '127.0.0.1';
    await build(api);
    await rcv.waitFor(1);
  });

  it('when deliveries are listed, then attempts come newest first in pages joined by an opaque cursor', async () => {
    const rcv = await receiver(() => 500);
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url: rcv.url });
    await build(api);
    await build(api);
    const all = await eventually(async () => {
      const d = await allDeliveries(api, hook.id);
      return d.length === 6 ? d : undefined;
    });
    const p1 = await api.get(`/webhooks/${hook.id}/deliveries?limit=4`);
    expect(p1.status).to.equal(200);
    expect(p1.body.total).to.equal(6);
    expect(p1.body.data).to.have.length(4);
    expect(p1.body.cursor).to.be.a('string');
    const p2 = await api.get(`/webhooks/${hook.id}/deliveries?limit=4&cursor=${encodeURIComponent(p1.body.cursor)}`);
    expect(p2.body.data).to.have.length(2);
    expect(p2.body).to.not.have.property('cursor');
    const joined = [...p1.body.data, ...p2.body.data];
    expect(joined.map((d) => d.id)).to.deep.equal(all.map((d) => d.id));
    expect(new Set(joined.map((d) => d.id)).size).to.equal(6);
    const times = joined.map((d) => Date.parse(d.at));
    expect(times).to.deep.equal([...times].sort((a, b) => b - a));

    const bad = await api.get(`/webhooks/${hook.id}/deliveries?cursor=nonsense`);
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.match(/^cursor: /);
    const zero = await api.get(`/webhooks/${hook.id}/deliveries?limit=0`);
    expect(zero.status).to.equal(400);
    expect(zero.body.error.message).to.match(/^limit: /);
  });

  it('when delivery records pass the retention period, then the scheduler deletes them and keeps the recent ones', async () => {
    const deliveries = createDeliveriesRepository(stack.rt.store);
    const base = {
      accountId: 'acc_x',
      webhookId: 'wh_retention',
      eventId: 'e',
      event: 'code_build.completed',
      attempt: 1,
      outcome: 'delivered' as const,
      statusCode: 200,
      durationMs: 1,
      responseExcerpt: null,
      error: null,
      nextAttemptAt: null,
      redelivered: false,
    };
    const old = await deliveries.record({
      ...base,
      at: new Date(Date.now() - (stack.config.WEBHOOK_DELIVERY_RETENTION_DAYS + 1) * 86_400_000),
    });
    const recent = await deliveries.record({ ...base, at: new Date() });
    await stack.scheduler!.agenda.now('webhooks.deliveries.expire');
    await eventually(
      async () => (await stack.db.db.collection('webhook_deliveries').countDocuments({ _id: old._id as never })) === 0,
      10_000,
      'old delivery records deleted',
    );
    expect(await stack.db.db.collection('webhook_deliveries').countDocuments({ _id: recent._id as never })).to.equal(1);
  });

  it('when a presentation is created, then a webhook subscribed to project.created gets it (emitEvent through the outbox)', async () => {
    const rcv = await receiver();
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    await createWebhook(api, { url: rcv.url, events: ['project.created'] });
    const r = await api.post('/presentations', { name: 'Quarterly review', brief: 'Results and plans' });
    expect(r.status).to.equal(201);
    const [req] = await rcv.waitFor(1);
    expect(req!.body.event).to.equal('project.created');
    expect(req!.body.data).to.include({ projectId: r.body.id, projectType: 'presentation', name: 'Quarterly review' });
    expect(req!.headers['x-service-event-id']).to.match(UUID);
    const stored = await stack.db.db.collection('event_outbox').findOne({ 'event.accountId': accountId });
    expect(stored!.publishedAt).to.be.an.instanceOf(Date);
  });

  it('when emitEvent cannot reach the broker, then the outbox keeps the event and the sweep publishes it', async () => {
    const { accountId } = await stack.createAccount();
    const seen = new Promise<{ event: string; webhooks: number }>((resolve) => {
      worker.on('fannedOut', (e) => {
        if (e.accountId === accountId) resolve(e);
      });
    });
    sinon.stub(stack.rt.amqp, 'publish').onFirstCall().rejects(new Error('broker away')).callThrough();
    const r = await emitEvent(stack.rt, accountId, 'project.created', { projectId: 'prj_1' });
    expect(r.published).to.equal(false);
    expect(r.eventId).to.match(UUID);
    sinon.restore();
    expect(await seen).to.deep.include({ event: 'project.created', webhooks: 0 });
    const stored = await eventually(() =>
      stack.db.db.collection('event_outbox').findOne({ _id: r.eventId as never, publishedAt: { $ne: null } }),
    );
    expect(stored!.event.data).to.deep.equal({ projectId: 'prj_1' });
  });
});

describe('webhook delivery of failed jobs', () => {
  let stack: Stack;
  let failing: Pool<CodeBuildRequest, never>;
  let rcv: Receiver;
  before(async () => {
    // No code engine here: a pool whose processor always fails takes the code queue.
    stack = await startStack({ env: { ...FAST, WORKER_POOLS: 'webhook' }, scheduler: false });
    failing = new Pool(
      stack.workers!.runtime,
      {
        pool: 'code',
        input: CodeBuildRequest,
        process: async () => {
          throw new UnrecoverableError('the build exploded');
        },
      },
      {
        concurrency: 1,
        leaseMs: 3000,
        maxAttempts: 1,
        retryDelayMs: 100,
        shutdownGraceMs: 1000,
      },
    );
    await failing.start();
    rcv = await startReceiver();
  });
  after(async () => {
    await failing.close();
    await rcv.close();
    await stack.stop();
  });

  it('when a code build fails, then code_build.failed is delivered with the error in data', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url: rcv.url, events: ['code_build.failed', 'code_build.completed'] });
    const job = await build(api);
    expect(job.status).to.equal('failed');
    const [req] = await rcv.waitFor(1);
    expect(req!.headers['x-service-event']).to.equal('code_build.failed');
    expect(await verifySignature(hook.secret, req!.raw, req!.headers['x-service-signature'] as string)).to.equal(true);
    expect(req!.body.event).to.equal('code_build.failed');
    expect(req!.body.data).to.include({
      jobId: job.jobId,
      status: 'failed',
      pollUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${job.jobId}`,
      error: 'the build exploded',
    });
  });
});
