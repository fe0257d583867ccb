import { expect } from 'chai';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { newId } from '../../platform/infra/ids';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { toUnits } from '../../platform/credits/credits';

describe('scheduler', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false });
  });
  after(() => stack.stop());

  it('when audit entries pass 90 days, then the expiry task deletes them and keeps the rest', async () => {
    const day = 86_400_000;
    const base = {
      accountId: 'acct_x',
      keyId: 'key_x',
      method: 'GET',
      route: '/api/v1/account',
      status: 200,
      durationMs: 1,
      millicreditsCharged: 0,
      requestId: 'r',
    };
    await stack.db.audit.insertMany([
      { _id: newId('aud'), at: new Date(Date.now() - 91 * day), ...base },
      { _id: newId('aud'), at: new Date(Date.now() - 89 * day), ...base },
    ]);
    expect(await stack.scheduler!.tasks.expireAudit()).to.equal(1);
    expect(await stack.db.audit.countDocuments({ accountId: 'acct_x' })).to.equal(1);
  });

  it('when Idempotency-Key records pass their expiry, then they are deleted and the key is free again', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const first = await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'exp-1' });
    await stack.db.idempotency.updateOne(
      { accountId, key: 'exp-1' },
      { $set: { expiresAt: new Date(Date.now() - 1000) } },
    );
    expect(await stack.scheduler!.tasks.expireIdempotencyKeys()).to.equal(1);
    const second = await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'exp-1' });
    expect(second.body.jobId).not.to.equal(first.body.jobId);
  });

  it('when the process waiting for a synchronous render dies, then the held credits come back', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 50 });
    const api = client(stack.baseUrl, key);
    // As POST /images does before its request/reply call, then nothing: the process "died".
    const hold = await stack.rt.credits.hold({
      accountId,
      operation: 'image',
      millicredits: toUnits(2),
      requestId: 'req_x',
      ttlMs: 1,
    });
    expect((await api.get('/account/credits')).body.balance).to.equal(48);
    await eventually(
      async () => (await api.get('/account/credits')).body.balance === 50,
      10_000,
      'the hold to be released',
    );
    // The balance moves first, the refund's ledger entry right after it.
    await eventually(
      async () => (await stack.db.ledger.countDocuments({ jobId: hold, kind: 'refund' })) === 1,
      5_000,
      'the refund entry',
    );
    await stack.rt.credits.release(hold); // released again (as a second scheduler might): nothing twice
    expect((await api.get('/account/credits')).body.balance).to.equal(50);
    expect(await stack.db.ledger.countDocuments({ jobId: hold, kind: 'refund' })).to.equal(1);
  });

  it('when the process died after a synchronous call delivered but before capturing its hold, then the scheduler captures it (the delivery exists) instead of giving it back', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 50 });
    const api = client(stack.baseUrl, key);
    const projects = stack.db.db.collection<any>(COLLECTIONS.projects);
    const delivered = newId('prj');
    const hold = await stack.rt.credits.hold({
      accountId,
      operation: 'extract_flowchart',
      millicredits: toUnits(3),
      requestId: 'req_y',
      ttlMs: 1,
      deliveredBy: { collection: COLLECTIONS.projects, id: delivered },
    });
    await projects.insertOne({ _id: delivered, accountId, name: 'made before the crash' });
    const lost = await stack.rt.credits.hold({
      accountId,
      operation: 'extract_flowchart',
      millicredits: toUnits(3),
      requestId: 'req_z',
      ttlMs: 1,
      deliveredBy: { collection: COLLECTIONS.projects, id: newId('prj') },
    });
    expect((await api.get('/account/credits')).body.balance).to.equal(44);
    const holds = stack.db.db.collection<any>(COLLECTIONS.creditHolds);
    await eventually(
      async () => (await holds.countDocuments({ _id: { $in: [hold, lost] } })) === 0,
      10_000,
      'both holds to be settled',
    );
    // The delivered one stays charged, the other comes back.
    await eventually(
      async () => (await api.get('/account/credits')).body.balance === 47,
      5_000,
      'the undelivered hold to be refunded',
    );
    expect(await stack.db.ledger.countDocuments({ jobId: hold, kind: 'refund' })).to.equal(0);
    // A settled hold can no longer be extended: a late writer learns it must not deliver.
    expect(await stack.rt.credits.extend(hold, 60_000)).to.equal(false);
  });

  it('when a process died between a debit and the job it paid for, then settlement gives the credits back', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 50 });
    const api = client(stack.baseUrl, key);
    const ago = new Date(Date.now() - 10 * 60_000);
    // 1. debited, then the process died before inserting the job
    await stack.rt.credits.debit({
      accountId,
      operation: 'code_build',
      millicredits: toUnits(5),
      jobId: 'code_neverinserted',
    });
    // 2. debited, the job exists, the process died before confirming
    const live = await stack.rt.jobs.create({
      accountId,
      type: 'code',
      input: { prompt: 'x' },
      credits: { operation: 'code_build', millicredits: toUnits(5) },
    });
    await stack.rt.credits.debit({ accountId, operation: 'code_build', millicredits: toUnits(5), jobId: live._id });
    // 3. the ledger entry was written, then the process died before the balance moved
    await stack.db.ledger.insertOne({
      _id: 'led_charge_code_neverdebited',
      accountId,
      kind: 'charge',
      state: 'pending',
      operation: 'code_build',
      millicredits: toUnits(5),
      jobId: 'code_neverdebited',
      requestId: null,
      at: ago,
    });
    await stack.db.ledger.updateMany({ accountId }, { $set: { at: ago } });
    expect((await api.get('/account/credits')).body.balance).to.equal(40);

    // The scheduler settles them on its own; settling again (as two schedulers might) is harmless.
    await stack.scheduler!.tasks.settleCredits();
    await eventually(async () => (await api.get('/account/credits')).body.balance === 45, 20_000, 'the settlement');
    const want = [
      `charge:${live._id}:applied`,
      'charge:code_neverinserted:applied',
      'refund:code_neverinserted:',
    ].sort();
    const entries = async () =>
      (await stack.db.ledger.find({ accountId }).toArray()).map((l) => `${l.kind}:${l.jobId}:${l.state ?? ''}`).sort();
    await eventually(
      async () => JSON.stringify(await entries()) === JSON.stringify(want),
      20_000,
      'the settled ledger',
    );
    expect(await stack.scheduler!.tasks.settleCredits()).to.include({ refunded: 0, applied: 0, dropped: 0 });
  });

  it('when the scheduler runs, then Agenda keeps the recurring tasks and runs the sweep', async () => {
    const tasks = await eventually(async () => {
      const docs = await stack.db.db.collection('scheduler_jobs').find({}).toArray();
      const sweep = docs.find((d) => d.name === 'jobs.sweep');
      return sweep?.lastRunAt ? docs : null;
    });
    expect(tasks.map((d) => d.name).sort()).to.include.members([
      'audit.expire',
      'credits.settle',
      'dead-letters.expire',
      'events.sweep',
      'idempotency.expire',
      'jobs.sweep',
      'ratelimits.expire',
    ]);
  });
});
