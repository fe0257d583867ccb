import { expect } from 'chai';
import { CHARGE_SETTLE_GRACE_MS, LEASE_VOUCH_MS } from '../../platform/credits/credits';
import { instanceId } from '../../platform/infra/instance';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { createTasks } from '../../scheduler/tasks';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { toUnits } from '../../platform/credits/credits';

/**
 * What kept the balance read wrong for minutes after a crash or an outage, each in isolation:
 * a dead API process's credit lease (its last batch of `spent` lost), a debit whose hold was never
 * made (given back after 5 minutes), and scheduler locks an outage left behind (the sweeps
 * stalled for 60 s).
 */
describe('balance after faults', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, env: { RATE_LIMIT_MAX: '100000', SWEEP_INTERVAL: '1 hour' } });
  });
  after(() => stack.stop());

  const balance = async (key: string) =>
    (await client(stack.baseUrl, key).get('/account/credits')).body.balance as number;

  it('when the process holding a credit lease dies before writing down its last jobs, then the balance read counts the lease from its jobs within LEASE_VOUCH_MS, not when the scheduler settles it', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 5000 });
    // As a holder leaves it when killed: a lease of 100, three jobs charged from it, the batch
    // with the spend of the last two never written.
    const lease = (await stack.rt.credits.takeLease({
      accountId,
      millicredits: toUnits(100),
      minBalance: 0,
      ttlMs: 60_000,
      owner: 'host:1:dead',
    }))!;
    for (const prompt of ['one', 'two', 'three']) {
      await stack.rt.jobs.create({
        accountId,
        type: 'code',
        input: { prompt },
        credits: { operation: 'code_build', millicredits: toUnits(5), charged: true, settling: null, lease: lease._id },
      });
    }
    await stack.rt.credits.addLeaseSpend(new Map([[lease._id, toUnits(5)]]));
    // While the holder's count is fresh it is trusted (one read per lease, no scan of the jobs).
    expect(await balance(key)).to.equal(5000 - 5);
    await new Promise((r) => setTimeout(r, LEASE_VOUCH_MS + 200));
    expect(await balance(key)).to.equal(5000 - 15);
    // The lease itself is still out (the scheduler settles it after it expires): nothing moved.
    expect((await stack.db.accounts.findOne({ _id: accountId }))!.millicredits).to.equal(toUnits(4900));
    expect(await stack.rt.credits.settleLease(lease._id)).to.deep.equal({ spent: 15_000, returned: 85_000 });
    expect(await balance(key)).to.equal(5000 - 15);
  });

  it(`when a debit's hold was never made (the database went away between them), then its credits come back ${CHARGE_SETTLE_GRACE_MS / 1000} s after, and the request can no longer make the hold`, async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const tasks = createTasks(stack.rt);
    const holds = stack.db.db.collection<Record<string, unknown>>(COLLECTIONS.creditHolds);
    const backdate = (id: string) =>
      stack.db.ledger.updateOne(
        { _id: `led_charge_${id}` },
        { $set: { at: new Date(Date.now() - CHARGE_SETTLE_GRACE_MS - 1000) } },
      );
    // Lost: debited, no hold. Made after all: debited, the hold there. Young: still in its request.
    await stack.rt.credits.debit({ accountId, operation: 'image', millicredits: toUnits(2), jobId: 'hold_lost' });
    await stack.rt.credits.debit({ accountId, operation: 'image', millicredits: toUnits(2), jobId: 'hold_made' });
    await holds.insertOne({
      _id: 'hold_made' as never,
      accountId,
      operation: 'image',
      millicredits: 2000,
      until: new Date(Date.now() + 60_000),
      deliveredBy: null,
    });
    await stack.rt.credits.debit({ accountId, operation: 'image', millicredits: toUnits(2), jobId: 'hold_young' });
    await backdate('hold_lost');
    await backdate('hold_made');
    expect(await balance(key)).to.equal(94);

    expect(await tasks.settleCredits()).to.include({ refunded: 1, applied: 1 });
    expect(await balance(key)).to.equal(96);
    // The request that stalled comes back: its hold cannot be made, so nothing is delivered free.
    const late = await holds
      .insertOne({
        _id: 'hold_lost' as never,
        accountId,
        operation: 'image',
        millicredits: 2000,
        until: new Date(),
        deliveredBy: null,
      })
      .then(
        () => 'inserted',
        (err: { code?: number }) => err.code,
      );
    expect(late).to.equal(11000);
    // Settling again gives nothing twice, and the fence is not taken for a hold.
    expect(await tasks.settleCredits()).to.include({ refunded: 0, released: 0, captured: 0 });
    expect(await balance(key)).to.equal(96);
    expect(await stack.db.ledger.countDocuments({ accountId, kind: 'refund' })).to.equal(1);
    expect((await stack.db.ledger.findOne({ _id: 'led_charge_hold_young' }))?.state).to.equal('pending');
  });

  it("when a scheduler task run held its lock as the database went away, then the scheduler releases its own stale locks once the database is back, and leaves another scheduler's", async () => {
    const agenda = stack.db.db.collection<Record<string, unknown>>(COLLECTIONS.agenda);
    await agenda.updateOne(
      { name: 'dead-letters.expire' },
      { $set: { lockedAt: new Date(Date.now() - 20_000), lastModifiedBy: instanceId } },
    );
    await agenda.updateOne(
      { name: 'audit.expire' },
      { $set: { lockedAt: new Date(Date.now() - 20_000), lastModifiedBy: 'another-scheduler' } },
    );
    // This process saw its database go 10 s ago and come back now.
    stack.scheduler!.runtime.dbHealth.emit('up', { downMs: 10_000 });
    const lockOf = async (name: string) => (await agenda.findOne({ name }))?.lockedAt ?? null;
    for (let i = 0; i < 50 && (await lockOf('dead-letters.expire')); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await lockOf('dead-letters.expire')).to.equal(null);
    expect(await lockOf('audit.expire')).to.be.instanceOf(Date);
  });
});
