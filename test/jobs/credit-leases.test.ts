import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { spawnApiProcess, type ApiProcess } from '../helpers/api-process';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { toUnits } from '../../platform/credits/credits';

/**
 * Credit leases (platform/credits/leases.ts): API processes charge job POSTs of accounts with a large
 * balance from credits they took in one update, and give back what they did not spend. Through
 * real API processes, one of them killed with SIGKILL: the balance shown stays exact, and the
 * scheduler returns exactly the dead process's unspent part.
 */
describe('credit leases', function () {
  this.timeout(120_000);
  const LEASE = { CREDIT_LEASE_CREDITS: '100', CREDIT_LEASE_MIN_BALANCE: '1000', CREDIT_LEASE_MS: '3000' };
  let stack: Stack;
  const procs: ApiProcess[] = [];
  before(async () => {
    stack = await startStack({ workers: false, env: { ...LEASE, RATE_LIMIT_MAX: '100000' } });
  });
  after(async () => {
    await Promise.all(procs.map((p) => p.kill()));
    await stack.stop();
  });

  const account = async (id: string) => (await stack.db.accounts.findOne({ _id: id }))!;
  const leases = () => stack.db.db.collection(COLLECTIONS.creditLeases);

  it('when two API processes spend from one account and one is killed, then the balance shown stays exact and the sweep returns exactly the unspent part', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 5000 });
    const [a, b] = await Promise.all([spawnApiProcess(stack, LEASE), spawnApiProcess(stack, LEASE)]);
    procs.push(a, b);
    // A first job on each is charged to the account (a process takes a lease for an account it
    // has seen holding enough), then 7 jobs on A and 5 on B, concurrently: 60 credits charged
    // from two leases of 100.
    for (const p of [a, b])
      expect((await client(p.baseUrl, key).post('/code-builds', { prompt: 'first' })).status).to.equal(202);
    const posts = [
      ...Array.from({ length: 7 }, (_, i) => client(a.baseUrl, key).post('/code-builds', { prompt: `a ${i}` })),
      ...Array.from({ length: 5 }, (_, i) => client(b.baseUrl, key).post('/code-builds', { prompt: `b ${i}` })),
    ];
    const rs = await Promise.all(posts);
    expect(rs.map((r) => r.status)).to.deep.equal(Array(12).fill(202));
    const jobs = await stack.db.jobs.find({ accountId }).toArray();
    expect(jobs).to.have.length(14);
    expect(new Set(jobs.filter((j) => j.credits.lease).map((j) => j.credits.lease)).size).to.equal(2);
    // The account itself was debited by the two leases; the balance shown is net of what was
    // spent, once the holders' batches (at most 20 ms after the answers, 100 ms under a stream) wrote it down.
    expect((await account(accountId)).millicredits).to.equal(toUnits(4790));
    await eventually(
      async () => (await client(stack.baseUrl, key).get('/account/credits')).body.balance === 4930,
      2000,
      'balance 4930',
    );

    a.child.kill('SIGKILL');
    await a.kill();
    expect((await client(stack.baseUrl, key).get('/account/credits')).body.balance).to.equal(4930);
    // B returns its own lease when its spending time ends; the scheduler settles A's 10 s after
    // it expired, counting A's jobs. Nothing is left leased, nothing given twice.
    await eventually(async () => (await leases().countDocuments({ accountId })) === 0, 30_000, 'leases settled');
    const settled = await account(accountId);
    expect(settled.millicredits).to.equal(toUnits(4930));
    expect(settled.chargedRefs ?? []).to.deep.equal([]);
    expect((await client(stack.baseUrl, key).get('/account/credits')).body.balance).to.equal(4930);
    // Every charge has its ledger entry (A's batch may have died with it: the settlement writes them).
    await eventually(
      async () => (await stack.db.ledger.countDocuments({ accountId, kind: 'charge' })) === 14,
      10_000,
      '14 ledger entries',
    );
    // A settlement run again gives nothing more.
    expect(await stack.rt.credits.settleExpiredLeases(new Date(Date.now() + 60_000))).to.deep.equal({
      settled: 0,
      returned: 0,
    });
    expect((await account(accountId)).millicredits).to.equal(toUnits(4930));
  });

  it('when an API process stops gracefully, then it gives its unspent lease back at once', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 2000 });
    const c = await spawnApiProcess(stack, LEASE);
    procs.push(c);
    for (let i = 0; i < 4; i++)
      expect((await client(c.baseUrl, key).post('/code-builds', { prompt: `c ${i}` })).status).to.equal(202);
    expect((await account(accountId)).millicredits).to.equal(toUnits(1895)); // one job charged per job, then a lease of 100
    expect(await leases().countDocuments({ accountId })).to.equal(1);
    c.child.kill('SIGTERM');
    await new Promise((r) => c.child.once('exit', r));
    expect(await leases().countDocuments({ accountId })).to.equal(0);
    expect((await account(accountId)).millicredits).to.equal(toUnits(1980));
    expect(await stack.db.ledger.countDocuments({ accountId, kind: 'charge' })).to.equal(4);
  });

  it('when the balance is under the lease threshold, then every charge is its own exact update: 50 racing jobs against a balance for 10 give exactly 10', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 50 });
    const api = client(stack.baseUrl, key);
    const rs = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api.post('/code-builds', { prompt: `small ${i}` })),
    );
    expect(rs.filter((r) => r.status === 202)).to.have.length(10);
    expect(rs.filter((r) => r.status === 402)).to.have.length(40);
    expect((await account(accountId)).millicredits).to.equal(toUnits(0));
    expect(await leases().countDocuments({ accountId })).to.equal(0);
  });

  it('when a lease-charged job never reached the broker, then the sweep publishes it and writes its ledger entry', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 5000 });
    const api = client(stack.baseUrl, key);
    for (const prompt of ['charged per job', 'takes a lease'])
      expect((await api.post('/code-builds', { prompt })).status).to.equal(202);
    const publish = (await import('sinon')).default
      .stub(stack.rt.amqp, 'publishToPool')
      .rejects(new Error('broker away'));
    let res: Awaited<ReturnType<typeof api.post<any>>>;
    try {
      res = await api.post('/code-builds', { prompt: 'lost publish' });
    } finally {
      publish.restore();
    }
    expect(res.status).to.equal(202);
    const job = await eventually(
      () => stack.db.jobs.findOne({ _id: res.body.jobId, dispatchedAt: { $ne: null } }),
      15_000,
      'dispatched by the sweep',
    );
    expect(job.credits.lease).to.match(/^lse_/);
    expect(await stack.db.ledger.countDocuments({ _id: `led_charge_${res.body.jobId}` })).to.equal(1);
    expect(await stack.db.ledger.countDocuments({ accountId, kind: 'charge' })).to.equal(3);
  });
});
