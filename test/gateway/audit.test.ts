import { expect } from 'chai';
import amqplib from 'amqplib';
import type { CommandStartedEvent } from 'mongodb';
import sinon from 'sinon';
import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { createAuditWriter } from '../../platform/audit/audit.writer';
import { poolQueueArgs } from '../../platform/infra/amqp';
import { COLLECTIONS, type AuditDoc } from '../../platform/infra/mongo';
import { spawnApiProcess, type ApiProcess } from '../helpers/api-process';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const ENTRY_FIELDS = [
  '_id',
  'accountId',
  'at',
  'durationMs',
  'keyId',
  'method',
  'millicreditsCharged',
  'requestId',
  'route',
  'status',
];

describe('audit log', () => {
  let stack: Stack;
  let auditQueue: string;
  before(async () => {
    // The scheduler runs the dead-letter handler (poison messages are parked by it).
    stack = await startStack({ workers: false, env: { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '3600' } });
    auditQueue = broker.auditQueue(stack.config.QUEUE_PREFIX);
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  let seq = 0;
  const rid = (what: string) => `audit-${what}-${Date.now()}-${seq++}`;
  const entryOf = (requestId: string) =>
    eventually(() => stack.db.audit.findOne({ requestId }), 10_000, `audit entry ${requestId}`);
  const counter = async (c: { get(): Promise<{ values: { value: number }[] }> }) =>
    (await c.get()).values.reduce((n, v) => n + v.value, 0);
  const entry = (over: Partial<AuditDoc> = {}) => ({
    _id: `aud_test${seq++}`,
    at: new Date().toISOString(),
    accountId: 'acct_x',
    keyId: 'key_x',
    method: 'GET',
    route: '/api/v1/account',
    status: 200,
    durationMs: 1.5,
    millicreditsCharged: 0,
    requestId: rid('direct'),
    ...over,
  });

  it('when authenticated calls are answered (200, 404, 400, 429), then each has one entry without argument values, and a 401 has none', async () => {
    const { key, accountId, keyId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const ids = {
      unauthorized: rid('401'),
      ok: rid('200'),
      missing: rid('404'),
      invalid: rid('400'),
      limited: rid('429'),
    };

    expect(
      (await client(stack.baseUrl, 'svc_wrong').get('/account', { 'x-request-id': ids.unauthorized })).status,
    ).to.equal(401);
    expect((await api.get('/account', { 'x-request-id': ids.ok })).status).to.equal(200);
    expect((await api.get('/jobs/code_SECRETID?token=SECRET-QUERY', { 'x-request-id': ids.missing })).status).to.equal(
      404,
    );
    expect(
      (await api.post('/code-builds', { prompt: 42, extra: 'SECRET-BODY' }, { 'x-request-id': ids.invalid })).status,
    ).to.equal(400);
    expect((await api.get('/account', { 'x-request-id': ids.limited })).status).to.equal(429);

    const expected: [string, string, string, number][] = [
      [ids.ok, 'GET', '/api/v1/account', 200],
      [ids.missing, 'GET', '/api/v1/jobs/:id', 404],
      [ids.invalid, 'POST', '/api/v1/code-builds', 400],
      [ids.limited, 'GET', 'unmatched', 429], // refused before any route matched (as before)
    ];
    for (const [requestId, method, route, status] of expected) {
      const e = await entryOf(requestId);
      expect(Object.keys(e).sort()).to.deep.equal(ENTRY_FIELDS);
      expect(e).to.include({ accountId, keyId, method, route, status, millicreditsCharged: 0, requestId });
      expect(e._id).to.match(/^aud_/);
      expect(e.at).to.be.instanceOf(Date);
      expect(e.durationMs).to.be.a('number').and.at.least(0);
      expect(JSON.stringify(e)).not.to.match(/SECRET/);
    }
    expect(await stack.db.audit.countDocuments({ accountId })).to.equal(4);
    expect(await stack.db.audit.countDocuments({ requestId: ids.unauthorized })).to.equal(0);
  });

  it('when 60 calls are answered at once, then every entry is stored, with insertMany writes of several entries each rather than one write per call', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const written = await counter(metrics.auditEntriesWritten);
    const inserts: CommandStartedEvent[] = [];
    const listener = (e: CommandStartedEvent) =>
      void (e.commandName === 'insert' && e.command.insert === COLLECTIONS.audit && inserts.push(e));
    stack.db.client.on('commandStarted', listener);
    try {
      const statuses = (await Promise.all(Array.from({ length: 60 }, () => api.get('/account')))).map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).to.have.length(3); // the rest are 429, audited too
      await eventually(async () => (await stack.db.audit.countDocuments({ accountId })) === 60, 10_000, '60 entries');
    } finally {
      stack.db.client.off('commandStarted', listener);
    }
    // Batched: entries that arrive while a write is in flight go in the next one. How many batches
    // depends on how the 60 requests spread over time (a loaded machine spreads them), so the
    // check is that writes carried several entries each, not a fixed count.
    expect(inserts.length).to.be.within(1, 30);
    expect(Math.max(...inserts.map((e) => (e.command.documents as unknown[]).length))).to.be.greaterThan(1);
    expect(await counter(metrics.auditEntriesWritten)).to.be.at.least(written + 60);
  });

  it('when an entry is answered, then it is in audit_log before the answer, written by the API itself (no broker hop)', async () => {
    const { key } = await stack.createAccount();
    const direct = await counter(metrics.auditDirectWrites);
    const publish = sinon.spy(stack.rt.amqp, 'publish');
    const requestId = rid('direct');
    const r = await client(stack.baseUrl, key).get('/account', { 'x-request-id': requestId });
    expect(r.status).to.equal(200);
    // No waiting: it was stored before the response went out.
    expect(await stack.db.audit.findOne({ requestId })).to.include({ status: 200, route: '/api/v1/account' });
    expect(publish.calledWith('', auditQueue)).to.equal(false);
    expect(await counter(metrics.auditDirectWrites)).to.be.at.least(direct + 1);
  });

  it('when the database refuses the insert, then the entry goes to the audit queue before the answer, and the writer stores it', async () => {
    const { key } = await stack.createAccount();
    const queued = await counter(metrics.auditQueuedEntries);
    const insertMany = sinon.stub(stack.db.audit, 'insertMany');
    insertMany.onFirstCall().rejects(new Error('database away'));
    insertMany.callThrough();
    const publish = sinon.spy(stack.rt.amqp, 'publish');
    const requestId = rid('queued');
    const r = await client(stack.baseUrl, key).get('/account', { 'x-request-id': requestId });
    expect(r.status).to.equal(200);
    // Confirmed by the broker before the answer went out.
    expect(publish.calledWith('', auditQueue)).to.equal(true);
    expect(await counter(metrics.auditQueuedEntries)).to.equal(queued + 1);
    expect(await entryOf(requestId)).to.include({ status: 200, route: '/api/v1/account' });
  });

  it("when the database fails both the direct insert and the writer's batch, then the writer holds the entry and writes it once the database answers", async () => {
    const { key } = await stack.createAccount();
    const insertMany = sinon.stub(stack.db.audit, 'insertMany');
    insertMany.onFirstCall().rejects(new Error('database away'));
    insertMany.onSecondCall().rejects(new Error('database away'));
    insertMany.callThrough();
    const requestId = rid('retry');
    expect((await client(stack.baseUrl, key).get('/account', { 'x-request-id': requestId })).status).to.equal(200);
    expect(await entryOf(requestId)).to.include({ status: 200 });
    expect(insertMany.callCount).to.be.at.least(3);
  });

  it('when an entry is delivered more than once, then it is stored once and every copy is acked', async () => {
    const e = entry();
    let acks = 0;
    const onAck = ({ queue }: { queue: string }) => void (queue === auditQueue && acks++);
    stack.rt.amqp.on('ack', onAck);
    try {
      // Twice in one batch, then once more in a later batch.
      await Promise.all([stack.rt.amqp.publish('', auditQueue, e), stack.rt.amqp.publish('', auditQueue, e)]);
      await eventually(async () => acks >= 2, 10_000, 'two acks');
      await stack.rt.amqp.publish('', auditQueue, e);
      await eventually(async () => acks >= 3, 10_000, 'three acks');
    } finally {
      stack.rt.amqp.off('ack', onAck);
    }
    expect(await stack.db.audit.countDocuments({ _id: e._id })).to.equal(1);
    expect(await stack.db.audit.findOne({ _id: e._id })).to.deep.include({ at: new Date(e.at), status: 200 });
  });

  it('when a message is not an audit entry (poison), then it is dead-lettered and parked, and the writer carries on', async () => {
    let deadLettered = 0;
    const onDead = ({ queue }: { queue: string }) => void (queue === auditQueue && deadLettered++);
    stack.rt.amqp.on('deadLetter', onDead);
    try {
      await stack.rt.amqp.publish('', auditQueue, { hello: 'not an entry' });
      await eventually(async () => deadLettered === 1, 10_000, 'dead-letter');
    } finally {
      stack.rt.amqp.off('deadLetter', onDead);
    }
    await eventually(
      () => stack.db.db.collection(COLLECTIONS.deadLetters).findOne({ queue: auditQueue }),
      10_000,
      'parked message',
    );
    const good = entry();
    await stack.rt.amqp.publish('', auditQueue, good);
    await eventually(() => stack.db.audit.findOne({ _id: good._id }), 10_000, 'next entry');
  });

  it('when the writer stops, then it writes the entries it holds without waiting for the batch timer', async () => {
    // A writer of its own on a queue of its own, with a batch timer far away.
    const prefix = `${stack.config.QUEUE_PREFIX}solo.`;
    const queue = broker.auditQueue(prefix);
    const conn = await amqplib.connect(stack.config.AMQP_URL);
    const ch = await conn.createConfirmChannel();
    try {
      await ch.assertQueue(queue, {
        durable: true,
        arguments: poolQueueArgs({
          prefix: stack.config.QUEUE_PREFIX,
          queueType: stack.config.QUEUE_TYPE,
          deliveryLimit: stack.config.DELIVERY_LIMIT,
          pools: [],
        }),
      });
      const writer = createAuditWriter({
        store: stack.rt.store,
        health: stack.rt.dbHealth,
        amqp: stack.rt.amqp,
        log: stack.rt.log,
        prefix,
        flushMs: 60_000,
      });
      await writer.start();
      const entries = Array.from({ length: 5 }, () => entry());
      let acks = 0;
      const onAck = (x: { queue: string }) => void (x.queue === queue && acks++);
      stack.rt.amqp.on('ack', onAck);
      try {
        for (const e of entries) ch.sendToQueue(queue, Buffer.from(JSON.stringify(e)), { persistent: true });
        await ch.waitForConfirms();
        // Delivered and held (not written: the timer is a minute away).
        await eventually(async () => (await stack.rt.amqp.queueDepth(queue)) === 0, 10_000, 'deliveries');
        await new Promise((r) => setTimeout(r, 100));
        expect(await stack.db.audit.countDocuments({ _id: { $in: entries.map((e) => e._id) } })).to.equal(0);

        await writer.stop();

        expect(await stack.db.audit.countDocuments({ _id: { $in: entries.map((e) => e._id) } })).to.equal(5);
        expect(acks).to.equal(5);
        await writer.stop(); // twice is fine
      } finally {
        stack.rt.amqp.off('ack', onAck);
      }
    } finally {
      await ch.deleteQueue(queue).catch(() => {});
      await conn.close();
    }
  });

  describe('with a real API process', () => {
    let proc: ApiProcess | undefined;
    after(() => proc?.kill());

    it('when the API process is killed (SIGKILL) right after answering, then the entry still reaches the audit log', async function () {
      this.timeout(60_000);
      const { key, accountId } = await stack.createAccount();
      proc = await spawnApiProcess(stack);
      const requestId = rid('crash');
      const r = await client(proc.baseUrl, key).get('/account', { 'x-request-id': requestId });
      proc.child.kill('SIGKILL');
      expect(r.status).to.equal(200);
      await proc.kill();
      expect(proc.child.signalCode).to.equal('SIGKILL');
      // The in-process API of the same stack drains the audit queue (a copy the killed process
      // had taken but not acked comes back to it).
      expect(await entryOf(requestId)).to.include({ accountId, route: '/api/v1/account', status: 200, method: 'GET' });
    });
  });
});
