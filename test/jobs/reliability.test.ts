import sinon from 'sinon';
import { expect } from 'chai';
import amqplib from 'amqplib';
import { CodeBuildRequest } from '../../contracts/code-builds';
import { broker } from '../../contracts/registry';
import { createRuntime, type Runtime } from '../../platform/runtime';
import { createLogger } from '../../platform/infra/log';
import { UnrecoverableError } from '../../workers/pool/errors';
import { Pool, type PoolDefinition } from '../../workers/pool/pool';
import { client, eventually, waitForJob, type Client } from '../../scripts/harness/http';
import { listenToEvents } from '../helpers/events';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits, toUnits } from '../../platform/credits/credits';

const POOL_OPTS = { concurrency: 2, leaseMs: 1500, maxAttempts: 3, retryDelayMs: 100, shutdownGraceMs: 5000 };

describe('job reliability', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  const pools: Pool<any, any>[] = [];
  const runtimes: Runtime[] = [];

  /** A code pool in its own runtime (its own broker connection), like a separate worker process. */
  const startPool = async (
    process: PoolDefinition<CodeBuildRequest, any>['process'],
    opts: Partial<typeof POOL_OPTS> = {},
  ) => {
    const rt = await createRuntime(stack.config, createLogger('silent'));
    runtimes.push(rt);
    const pool = new Pool(rt, { pool: 'code', input: CodeBuildRequest, process }, { ...POOL_OPTS, ...opts });
    await pool.start();
    pools.push(pool);
    return { pool, rt };
  };

  before(async () => {
    stack = await startStack({
      workers: false,
      env: { QUEUE_TYPE: 'quorum', JOB_LEASE_MS: '1500', CREDIT_PRICES: '{"code_build":5}' },
    });
  });
  beforeEach(async () => {
    const a = await stack.createAccount({ credits: 100 });
    api = client(stack.baseUrl, a.key);
    accountId = a.accountId;
  });
  afterEach(async () => {
    sinon.restore();
    await Promise.all(pools.splice(0).map((p) => p.close()));
    await Promise.all(runtimes.splice(0).map((r) => r.close()));
  });
  after(() => stack.stop());

  const balance = async () => (await api.get('/account/credits')).body.balance;

  it('when the engine fails for good, then the job fails with its error, the credits come back and code_build.failed is sent', async () => {
    await startPool(async () => {
      throw new UnrecoverableError('the prompt asks for something the engine cannot build');
    });
    const events = await listenToEvents(stack.config, 'code_build.*');
    try {
      const r = await api.post('/code-builds', { prompt: 'x' });
      expect(r.status).to.equal(202);
      const job = await waitForJob(api, r.body.jobId);
      expect(job).to.include({
        status: 'failed',
        error: 'the prompt asks for something the engine cannot build',
        rawStatus: 'failed',
      });
      expect(job.result).to.equal(null);
      await eventually(async () => (await balance()) === 100, 5000, 'the refund'); // lands just after the status change
      // The refund follows the status change; it lands moments later.
      const ledger = await eventually(async () => {
        const l = await stack.db.ledger.find({ accountId, jobId: r.body.jobId }).sort({ at: 1 }).toArray();
        return l.length === 2 ? l : null;
      });
      expect(ledger.map((l) => [l.kind, fromUnits(l.millicredits)])).to.deep.equal([
        ['charge', 5],
        ['refund', 5],
      ]);
      const e = await events.waitFor((x) => x.body.data.jobId === r.body.jobId);
      expect(e.routingKey).to.equal('code_build.failed');
      expect(e.body.data.error).to.include('cannot build');
    } finally {
      await events.close();
    }
  });

  it('when an attempt hits a transient error, then the job is retried and completes', async () => {
    let calls = 0;
    await startPool(async () => {
      calls++;
      if (calls === 1) throw new Error('provider briefly unavailable');
      return { ok: true };
    });
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
    expect(calls).to.equal(2);
    const doc = await stack.db.jobs.findOne({ _id: r.body.jobId });
    expect(doc!.attempts).to.equal(2);
    expect(await balance()).to.equal(95);
  });

  it('when every attempt fails, then the job fails after JOB_MAX_ATTEMPTS and is refunded once', async () => {
    let calls = 0;
    await startPool(async () => {
      calls++;
      throw new Error('always down');
    });
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('failed');
    expect(job.error).to.equal('failed after 3 attempts: always down');
    expect(calls).to.equal(3);
    await eventually(async () => (await balance()) === 100, 5000, 'the refund'); // lands just after the status change
    await eventually(
      async () => (await stack.db.ledger.countDocuments({ jobId: r.body.jobId, kind: 'refund' })) === 1,
      5000,
      'the refund ledger entry',
    );
  });

  it('when work runs, then GET /jobs/{id} shows rawStatus and progressMessage moving', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await startPool(async (_input, ctx) => {
      await ctx.progress('rendering', 'Rendering step 1 of 2');
      await gate;
      return { ok: true };
    });
    const r = await api.post('/code-builds', { prompt: 'x' });
    const seen = await eventually(async () => {
      const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
      return j.rawStatus === 'rendering' ? j : null;
    });
    expect(seen).to.include({ status: 'processing', progressMessage: 'Rendering step 1 of 2' });
    release();
    expect((await waitForJob(api, r.body.jobId)).status).to.equal('complete');
  });

  it('when a worker dies mid-job, then another worker takes the job over and completes it', async () => {
    const { rt: doomed } = await startPool(async () => new Promise(() => {}), { leaseMs: 1500 }); // never finishes
    const r = await api.post('/code-builds', { prompt: 'x' });
    await eventually(async () => (await api.get(`/jobs/${r.body.jobId}`)).body.status === 'processing');
    // Kill the worker's connections without any cleanup, as a crash would.
    pools.splice(0);
    runtimes.splice(runtimes.indexOf(doomed), 1);
    await doomed.close();
    await startPool(async () => ({ tookOver: true }));
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 20_000);
    expect(job.status).to.equal('complete');
    expect(job.result).to.deep.equal({ tookOver: true });
    const doc = await stack.db.jobs.findOne({ _id: r.body.jobId });
    expect(doc!.attempts).to.equal(2);
  });

  it('when a job was stored but never published, then the sweep publishes it and it completes', async () => {
    const job = await stack.rt.jobs.create({
      accountId,
      type: 'code',
      input: { prompt: 'orphan' },
      credits: { operation: 'code_build', millicredits: toUnits(0) },
    });
    await startPool(async () => ({ swept: true }));
    const done = await waitForJob(api, job._id);
    expect(done.status).to.equal('complete');
    expect((await stack.db.jobs.findOne({ _id: job._id }))!.dispatchedAt).to.be.an.instanceOf(Date);
  });

  it('when a poison message reaches a pool, then it is dead-lettered once and parked, not redelivered', async () => {
    const { pool } = await startPool(async () => ({ ok: true }));
    const dead = new Promise((r) => pool.once('deadLettered', r));
    const conn = await amqplib.connect(stack.config.AMQP_URL);
    try {
      const ch = await conn.createConfirmChannel();
      ch.sendToQueue(broker.poolQueue(stack.config.QUEUE_PREFIX, 'code'), Buffer.from('{not json'), {
        persistent: true,
      });
      await ch.waitForConfirms();
    } finally {
      await conn.close();
    }
    expect(await dead).to.deep.equal({ reason: 'invalid_json' });
    const parked = await eventually(() => stack.db.db.collection('dead_letters').findOne({}), 10_000, 'parked message');
    expect(parked).to.include({ reason: 'rejected', bytes: 9 });
    expect(Buffer.from(parked!.contentBase64, 'base64').toString()).to.equal('{not json');
  });

  it("when a job's message is dead-lettered, then the job fails with a clear error and is refunded", async () => {
    const r = await api.post('/code-builds', { prompt: 'x' });
    // A message for the code job arriving on the wrong pool is refused by that pool.
    const rt = await createRuntime(stack.config, createLogger('silent'));
    runtimes.push(rt);
    const wrong = new Pool(rt, { pool: 'song', input: CodeBuildRequest, process: async () => ({}) }, POOL_OPTS);
    await wrong.start();
    pools.push(wrong);
    await rt.amqp.publishToPool('song', { jobId: r.body.jobId, accountId, type: 'code' });
    const job = await eventually(async () => {
      const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
      return j.status === 'failed' ? j : null;
    });
    expect(job.error).to.match(/dead-lettered \(rejected\)/);
    await eventually(async () => (await balance()) === 100, 5000, 'the refund'); // lands just after the status change
  });

  it('when a quorum queue redelivers a message past the delivery limit, then the broker dead-letters it', async function () {
    if (stack.config.QUEUE_TYPE !== 'quorum') this.skip();
    const conn = await amqplib.connect(stack.config.AMQP_URL);
    try {
      const ch = await conn.createChannel();
      const q = broker.poolQueue(stack.config.QUEUE_PREFIX, 'agent'); // no consumer in this stack
      ch.sendToQueue(q, Buffer.from(JSON.stringify({ crash: 'me' })), { persistent: true });
      // Simulate a consumer that dies on every delivery: get and requeue until it is gone.
      let deliveries = 0;
      for (; deliveries < 20; deliveries++) {
        const m = await eventually(async () => ch.get(q, { noAck: false }), 1500).catch(() => null);
        if (!m) break;
        ch.nack(m, false, true);
      }
      expect(deliveries).to.equal(stack.config.DELIVERY_LIMIT + 1);
      await eventually(
        () => stack.db.db.collection('dead_letters').findOne({ reason: 'delivery_limit' }),
        10_000,
        'dead-lettered message',
      );
    } finally {
      await conn.close();
    }
  });

  it('when a worker stops gracefully, then the job in flight finishes before it goes', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { pool } = await startPool(async () => {
      await gate;
      return { finished: true };
    });
    const r = await api.post('/code-builds', { prompt: 'x' });
    await eventually(async () => (await api.get(`/jobs/${r.body.jobId}`)).body.status === 'processing');
    const closing = pool.close();
    setTimeout(release, 100);
    await closing;
    expect((await api.get(`/jobs/${r.body.jobId}`)).body.status).to.equal('complete');
  });

  it('when the database blinks while a worker takes a job, then the message waits and is retried, not dead-lettered', async () => {
    const { rt } = await startPool(async () => ({ ok: true }));
    let down = true;
    const realClaim = rt.jobs.claim.bind(rt.jobs);
    const claim = sinon.stub(rt.jobs, 'claim').callsFake(async (...args: Parameters<typeof realClaim>) => {
      if (down) throw new Error('MongoServerSelectionError: connection refused');
      return realClaim(...args);
    });
    const r = await api.post('/code-builds', { prompt: 'x' });
    await eventually(async () => claim.callCount >= 1);
    setTimeout(() => (down = false), 2500).unref(); // an outage longer than an instant redelivery loop
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 20_000);
    expect(job.status).to.equal('complete');
    expect(claim.callCount).to.be.within(2, stack.config.DELIVERY_LIMIT); // backed off, not spun
  });

  it('when a crash interrupted a refund, then the sweep completes it, and a second refund gives nothing twice', async () => {
    const r = await api.post('/code-builds', { prompt: 'x' });
    expect(await balance()).to.equal(95);
    // As a crash right after the status change would leave it: failed, credits not given back.
    await stack.db.jobs.updateOne(
      { _id: r.body.jobId },
      { $set: { status: 'failed', error: 'boom', completedAt: new Date(Date.now() - 5000) } },
    );
    await eventually(async () => (await balance()) === 100, 10_000, 'the sweep to refund');
    // The flag follows the refund.
    await eventually(
      async () => (await stack.db.jobs.findOne({ _id: r.body.jobId }))?.credits.refunded === true,
      5000,
      'the refunded flag',
    );
    await stack.rt.credits.refund({
      accountId,
      operation: 'code_build',
      millicredits: toUnits(5),
      jobId: r.body.jobId,
    });
    expect(await balance()).to.equal(100);
    expect(await stack.db.ledger.countDocuments({ jobId: r.body.jobId, kind: 'refund' })).to.equal(1);
  });

  it('when a job has finished, then it can neither complete again nor fail nor move back', async () => {
    await startPool(async () => ({ first: true }));
    const r = await api.post('/code-builds', { prompt: 'x' });
    await waitForJob(api, r.body.jobId);
    expect(await stack.rt.jobs.complete(r.body.jobId, 'someone', { second: true })).to.equal(null);
    expect(await stack.rt.jobs.fail(r.body.jobId, 'late failure')).to.equal(null);
    expect(await stack.rt.jobs.claim(r.body.jobId, 'someone', 1000)).to.equal(null);
    const job = (await api.get(`/jobs/${r.body.jobId}`)).body;
    expect(job).to.include({ status: 'complete' });
    expect(job.result).to.deep.equal({ first: true });
  });
});
