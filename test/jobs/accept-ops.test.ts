import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

/**
 * The request hot path, counted with the driver's command monitoring: what a request costs in
 * database commands is part of the design, so it is asserted, not hoped for.
 * Audit entries are not on the request path (confirmed by the broker, written in batches by the
 * audit writer), so its batch inserts are left out of the per-request counts.
 */
describe('database commands on the request hot path', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { RATE_LIMIT_MAX: '100000' } });
  });
  after(() => stack.stop());

  const record = () => {
    const seen: string[] = [];
    const on = (e: CommandStartedEvent) => {
      const coll = (e.command as Record<string, unknown>)[e.commandName];
      const name = `${e.commandName}:${typeof coll === 'string' ? coll : '-'}`;
      if (name !== 'insert:audit_log') seen.push(name);
    };
    stack.db.client.on('commandStarted', on);
    return { seen, stop: () => stack.db.client.off('commandStarted', on) };
  };

  it('when GET /jobs/{id} is called with a known key, then it reads the job once and nothing else, and not at all while the job is cached', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const created = await api.post('/code-builds', { prompt: 'one read' });
    expect(created.status).to.equal(202);
    const other = await api.post('/code-builds', { prompt: 'another' });
    await api.get(`/jobs/${other.body.jobId}`); // warms the key cache and the rate-limit lease
    await stack.rt.jobs.flushAccepted();

    const r = record();
    const res = await api.get(`/jobs/${created.body.jobId}`);
    r.stop();
    expect(res.status).to.equal(200);
    expect(r.seen).to.deep.equal(['find:jobs']);

    const again = record(); // the queued job is in this process's job cache now
    expect((await api.get(`/jobs/${created.body.jobId}`)).status).to.equal(200);
    again.stop();
    expect(again.seen).to.deep.equal([]);
  });

  it('when GET /account is called with a known key, then no database command runs', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    await api.get('/account');
    const r = record();
    const res = await api.get('/account');
    r.stop();
    expect(res.status).to.equal(200);
    expect(r.seen).to.deep.equal([]);
  });

  it('when a job is posted by an account under the lease threshold, then the answer costs two commands (insert the job, charge the account) and the ledger entry, the dispatch mark and the marker release follow in one batch', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, key);
    await api.get('/account'); // warm the key cache and the rate-limit lease

    const r = record();
    const res = await api.post('/code-builds', { prompt: 'two commands' });
    const onAnswer = [...r.seen];
    await stack.rt.jobs.flushAccepted();
    r.stop();
    expect(res.status).to.equal(202);
    expect(onAnswer).to.deep.equal(['insert:jobs', 'findAndModify:accounts']);
    expect(r.seen.slice(2)).to.deep.equal(['insert:credit_ledger', 'update:jobs', 'update:accounts']);
    // The account's charge marker is released once the job records its charge: the document stays small.
    expect((await stack.db.accounts.findOne({ _id: accountId }))?.chargedRefs).to.deep.equal([]);

    const job = await stack.db.jobs.findOne({ _id: res.body.jobId });
    expect(job?.credits.charged).to.equal(true);
    expect(job?.dispatchedAt).to.be.instanceOf(Date);
    const ledger = await stack.db.ledger.find({ accountId }).toArray();
    expect(ledger.map((e) => [e.kind, e.state, e.jobId, fromUnits(e.millicredits)])).to.deep.equal([
      ['charge', 'applied', res.body.jobId, 5],
    ]);
  });

  it("when an account with a large balance posts a job, then the answer costs one command (the job insert, charged from the process's credit lease) and the ledger entry follows in a batch", async () => {
    const { key, accountId } = await stack.createAccount({ credits: 1_000_000 });
    const api = client(stack.baseUrl, key);
    await api.get('/account'); // warm the key cache and the rate-limit lease
    // The first job is charged to the account, which shows the balance; the second takes a
    // lease (stored, then debited from the account in one update).
    const first = await api.post('/code-builds', { prompt: 'charged per job' });
    await stack.rt.jobs.flushAccepted();
    const r0 = record();
    const second = await api.post('/code-builds', { prompt: 'takes the lease' });
    r0.stop();
    expect([first.status, second.status]).to.deep.equal([202, 202]);
    // The lease's spend is written behind (update:credit_leases), in a batch that a loaded machine
    // may flush before the answer is read: it is not part of the answer's cost.
    const answerCost = (seen: string[]) => seen.filter((c) => c !== 'update:credit_leases');
    expect(answerCost(r0.seen)).to.deep.equal(['insert:credit_leases', 'update:accounts', 'insert:jobs']);
    await stack.rt.jobs.flushAccepted();

    const r = record();
    const res = await api.post('/code-builds', { prompt: 'one command' });
    const onAnswer = [...r.seen];
    await stack.rt.jobs.flushAccepted();
    r.stop();
    expect(res.status).to.equal(202);
    expect(answerCost(onAnswer)).to.deep.equal(['insert:jobs']);
    // The batch: the lease's spend written down (for the balance shown), the ledger entry.
    expect(r.seen.slice(1)).to.deep.equal(['update:credit_leases', 'insert:credit_ledger']);

    const job = await stack.db.jobs.findOne({ _id: res.body.jobId });
    expect(job?.credits).to.include({ charged: true, millicredits: 5000 });
    expect(job?.credits.lease).to.match(/^lse_/);
    const ledger = await stack.db.ledger.find({ accountId }).toArray();
    expect(ledger.map((e) => [e.kind, e.state, e.jobId, fromUnits(e.millicredits)]).sort()).to.deep.equal(
      [first, second, res].map((x) => ['charge', 'applied', x.body.jobId, 5]).sort(),
    );
    // The balance shown counts what the lease has not spent, read from the lease and not from
    // its jobs: one read of the account, one of each lease it holds.
    const rb = record();
    expect((await api.get('/account/credits')).body.balance).to.equal(1_000_000 - 15);
    rb.stop();
    expect(rb.seen).to.deep.equal(['find:accounts', 'find:credit_leases']);
  });

  it('when a charged job keeps its account marker (its batch lost the settlement claim), then the sweep releases it, and never a marker of a job still unpaid', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, key);
    const a = await api.post('/code-builds', { prompt: 'marker kept' });
    const b = await api.post('/code-builds', { prompt: 'still unpaid' });
    await stack.rt.jobs.flushAccepted();
    // As a lost claim would leave them: job a recorded as charged, job b not yet, both markers kept.
    await stack.db.jobs.updateOne({ _id: b.body.jobId }, { $set: { 'credits.charged': false } });
    await stack.db.accounts.updateOne({ _id: accountId }, { $set: { chargedRefs: [a.body.jobId, b.body.jobId] } });
    expect(await stack.rt.jobs.releaseSettledMarkers()).to.equal(1);
    expect((await stack.db.accounts.findOne({ _id: accountId }))?.chargedRefs).to.deep.equal([b.body.jobId]);
  });

  it('when 30 jobs are posted at once, then the ledger and dispatch marks of all of them take a handful of batched commands', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, key);
    await api.get('/account');
    const r = record();
    const rs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => api.post('/code-builds', { prompt: `batch ${i}` })),
    );
    await stack.rt.jobs.flushAccepted();
    r.stop();
    expect(rs.map((x) => x.status)).to.deep.equal(Array(30).fill(202));
    const count = (name: string) => r.seen.filter((s) => s === name).length;
    expect(count('insert:jobs')).to.equal(30);
    expect(count('findAndModify:accounts')).to.equal(30); // 30 charges
    expect(count('update:accounts')).to.be.within(1, 10); // a marker release per batch
    expect(count('insert:credit_ledger')).to.be.within(1, 10);
    expect(count('update:jobs')).to.be.within(1, 10);
    expect(await stack.db.ledger.countDocuments({ accountId, kind: 'charge', state: 'applied' })).to.equal(30);
    expect(
      await stack.db.jobs.countDocuments({ accountId, 'credits.charged': true, dispatchedAt: { $ne: null } }),
    ).to.equal(30);
    expect((await stack.db.accounts.findOne({ _id: accountId }))?.chargedRefs).to.deep.equal([]);
  });
});
