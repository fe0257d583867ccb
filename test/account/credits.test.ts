import { expect } from 'chai';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('credits', () => {
  let stack: Stack;
  before(async () => {
    // No workers: the jobs stay queued, so only the debits are under test here.
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { CREDIT_PRICES: '{"code_build":3}', RATE_LIMIT_MAX: '1000' },
    });
  });
  after(() => stack.stop());

  it('when GET /account/credits is called, then it shows plan, balance and the price list', async () => {
    const { key } = await stack.createAccount({ credits: 42 });
    const r = await client(stack.baseUrl, key).get('/account/credits');
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ plan: 'pro', balance: 42 });
    expect(r.body.prices.code_build).to.equal(3);
    expect(r.body.prices.video_premium).to.be.greaterThan(r.body.prices.video_standard);
  });

  it('when 50 dispatches race against a balance that covers 10, then exactly 10 are accepted and the balance ends at 0', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 30 });
    const api = client(stack.baseUrl, key);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api.post('/code-builds', { prompt: `app ${i}` })),
    );
    const accepted = results.filter((r) => r.status === 202);
    const refused = results.filter((r) => r.status === 402);
    expect(accepted).to.have.length(10);
    expect(refused).to.have.length(40);
    for (const r of refused) expect(r.body.error.code).to.equal('insufficient_credits');
    expect((await api.get('/account/credits')).body.balance).to.equal(0);
    await stack.rt.jobs.flushAccepted(); // the ledger entries follow the answers in a batch
    const charges = await stack.db.ledger.find({ accountId, kind: 'charge' }).toArray();
    expect(charges).to.have.length(10);
    expect(charges.map((c) => c.jobId).sort()).to.deep.equal(accepted.map((r) => r.body.jobId).sort());
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(10);
  });

  it('when the balance is short, then 402 insufficient_credits and nothing is stored', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 2 });
    const r = await client(stack.baseUrl, key).post('/code-builds', { prompt: 'x' });
    expect(r.status).to.equal(402);
    expect(r.body.error.message).to.include('code_build costs 3');
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(0);
    expect(await stack.db.ledger.countDocuments({ accountId })).to.equal(0);
  });
});
