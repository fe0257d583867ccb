import { expect } from 'chai';
import { client, eventually } from '../helpers/http';
import { startStack, type Stack } from '../helpers/stack';
import { newId } from '../../platform/ids';

describe('scheduler', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false });
  });
  after(() => stack.stop());

  it('when audit entries pass 90 days, then the expiry task deletes them and keeps the rest', async () => {
    const day = 86_400_000;
    const base = { accountId: 'acct_x', keyId: 'key_x', method: 'GET', route: '/api/v1/account', status: 200, durationMs: 1, creditsCharged: 0, requestId: 'r' };
    await stack.rt.db.audit.insertMany([
      { _id: newId('aud'), at: new Date(Date.now() - 91 * day), ...base },
      { _id: newId('aud'), at: new Date(Date.now() - 89 * day), ...base },
    ]);
    expect(await stack.scheduler!.tasks.expireAudit()).to.equal(1);
    expect(await stack.rt.db.audit.countDocuments({ accountId: 'acct_x' })).to.equal(1);
  });

  it('when Idempotency-Key records pass their expiry, then they are deleted and the key is free again', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const first = await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'exp-1' });
    await stack.rt.db.idempotency.updateOne({ accountId, key: 'exp-1' }, { $set: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await stack.scheduler!.tasks.expireIdempotencyKeys()).to.equal(1);
    const second = await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'exp-1' });
    expect(second.body.jobId).not.to.equal(first.body.jobId);
  });

  it('when the process waiting for a synchronous render dies, then the held credits come back', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 50 });
    const api = client(stack.baseUrl, key);
    // As POST /images does before its request/reply call, then nothing: the process "died".
    const hold = await stack.rt.credits.hold({ accountId, operation: 'image', amount: 2, requestId: 'req_x', ttlMs: 1 });
    expect((await api.get('/account/credits')).body.balance).to.equal(48);
    await eventually(async () => (await api.get('/account/credits')).body.balance === 50, 10_000, 'the hold to be released');
    expect(await stack.rt.db.ledger.countDocuments({ jobId: hold, kind: 'refund' })).to.equal(1);
    expect(await stack.rt.credits.release(hold)).to.equal(false); // already released: nothing twice
  });

  it('when the scheduler runs, then Agenda keeps the recurring tasks and runs the sweep', async () => {
    const tasks = await eventually(async () => {
      const docs = await stack.rt.db.db.collection('scheduler_jobs').find({}).toArray();
      const sweep = docs.find((d) => d.name === 'jobs.sweep');
      return sweep?.lastRunAt ? docs : null;
    });
    expect(tasks.map((d) => d.name).sort()).to.include.members(['audit.expire', 'credits.holds', 'dead-letters.expire', 'events.sweep', 'idempotency.expire', 'jobs.sweep', 'ratelimits.expire']);
  });
});
