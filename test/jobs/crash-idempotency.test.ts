import { expect } from 'chai';
import sinon from 'sinon';
import { spawnApiProcess } from '../helpers/api-process';
import { client, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

/**
 * SPEC 4 rule 3, through a real crash: an API process killed with SIGKILL at a fixed point of
 * the accept path (FAULT_POINT, a test-only setting), the client retrying with the same
 * Idempotency-Key on another API process. The retry must find the job the dead request made,
 * answer with its id, and the account must be charged exactly once.
 */
describe('a crash in the middle of a job POST (SIGKILL at a fixed point, retried with the same key)', function () {
  this.timeout(120_000);
  let stack: Stack;
  const LEASE_MS = 1500;
  before(async () => {
    stack = await startStack({ env: { IDEMPOTENCY_LEASE_MS: String(LEASE_MS) } });
  });
  after(() => stack.stop());

  for (const point of [
    'accept.after-insert',
    'accept.after-charge',
    'accept.after-publish',
    'idempotency.before-finish',
  ] as const) {
    it(`when the API dies at ${point}, then the retry gets the one job, charged once, and it completes`, async () => {
      const { key, accountId } = await stack.createAccount({ credits: 100 });
      const doomed = await spawnApiProcess(stack, { FAULT_POINT: point, IDEMPOTENCY_LEASE_MS: String(LEASE_MS) });
      const idem = { 'idempotency-key': `crash-${point}` };
      const body = { prompt: `crash at ${point}` };
      const first = await client(doomed.baseUrl, key)
        .post('/code-builds', body, idem)
        .then(
          () => 'answered',
          () => 'no answer',
        );
      await doomed.kill();
      const killedAt = Date.now();
      expect(first).to.equal('no answer');

      // The client retries against the API that is still up, as it would after a restart.
      const api = client(stack.baseUrl, key);
      let retry = await api.post('/code-builds', body, idem);
      const statuses = [retry.status];
      while (retry.status === 409 && Date.now() - killedAt < 15_000) {
        expect(retry.body.error.code).to.equal('idempotency_in_flight');
        await new Promise((r) => setTimeout(r, 200));
        retry = await api.post('/code-builds', body, idem);
        statuses.push(retry.status);
      }
      expect(retry.status, `statuses ${statuses.join(',')}`).to.equal(202);
      // The record's owner died: it is taken over once its lease ran out, not after a minute.
      expect(Date.now() - killedAt).to.be.below(LEASE_MS + 5000 + 1000);

      const jobs = await stack.db.jobs.find({ accountId }).toArray();
      expect(jobs.map((j) => j._id)).to.deep.equal([retry.body.jobId]);
      expect(retry.body.status).to.equal('queued');

      // Once more: now a replay of the stored answer, same job.
      const again = await api.post('/code-builds', body, idem);
      expect(again.status).to.equal(202);
      expect(again.body.jobId).to.equal(retry.body.jobId);

      expect((await waitForJob(api, retry.body.jobId)).status).to.equal('complete');
      await stack.rt.jobs.flushAccepted();
      expect(await stack.rt.credits.balance(accountId)).to.equal(95_000);
      const ledger = await stack.db.ledger.find({ accountId }).toArray();
      expect(ledger.map((e) => [e.kind, e.jobId, fromUnits(e.millicredits)])).to.deep.equal([
        ['charge', retry.body.jobId, 5],
      ]);
    });
  }

  it('when a request without a key dies after its job was stored, then the job is completed and charged once by the sweep (a retry without a key would make a second job)', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const doomed = await spawnApiProcess(stack, { FAULT_POINT: 'accept.after-insert' });
    await client(doomed.baseUrl, key)
      .post('/code-builds', { prompt: 'no key' })
      .catch(() => undefined);
    await doomed.kill();
    const [job] = await stack.db.jobs.find({ accountId }).toArray();
    expect(job?.credits.charged).to.equal(false);
    const api = client(stack.baseUrl, key);
    expect((await waitForJob(api, job!._id)).status).to.equal('complete');
    expect(await stack.rt.credits.balance(accountId)).to.equal(95_000);
  });

  it('when the stored job cannot be paid for any more, then the sweep fails it unpaid and charges nothing', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const doomed = await spawnApiProcess(stack, { FAULT_POINT: 'accept.after-insert' });
    await client(doomed.baseUrl, key)
      .post('/code-builds', { prompt: 'unpaid' })
      .catch(() => undefined);
    await doomed.kill();
    await stack.db.accounts.updateOne({ _id: accountId }, { $set: { millicredits: 1000 } });
    const [job] = await stack.db.jobs.find({ accountId }).toArray();
    const api = client(stack.baseUrl, key);
    const done = await waitForJob(api, job!._id);
    expect(done.status).to.equal('failed');
    expect(done.error).to.match(/enough credits/);
    expect(await stack.rt.credits.balance(accountId)).to.equal(1000);
    expect(await stack.db.ledger.countDocuments({ accountId })).to.equal(0);

    // Topped up later: the failed job stays failed and unpaid; no sweep charges it now.
    await stack.db.accounts.updateOne({ _id: accountId }, { $set: { millicredits: 100_000 } });
    await new Promise((r) => setTimeout(r, 2500)); // a few sweeps (SWEEP_INTERVAL 1 s in tests)
    expect(await stack.rt.credits.balance(accountId)).to.equal(100_000);
    expect((await api.get(`/jobs/${job!._id}`)).body.status).to.equal('failed');
  });

  it('when a POST fails after its job was stored (the charge timed out), then the retry with the same key continues that job: one job, one charge', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const idem = { 'idempotency-key': 'fails-after-insert' };
    const stub = sinon.stub(stack.rt.credits, 'chargeJob').rejects(new Error('socket timeout'));
    const first = await api.post('/code-builds', { prompt: 'timeout' }, idem);
    stub.restore();
    expect(first.status).to.equal(500);
    const stored = await stack.db.jobs.find({ accountId }).toArray();
    expect(stored).to.have.length(1);

    const retry = await api.post('/code-builds', { prompt: 'timeout' }, idem);
    expect(retry.status).to.equal(202);
    expect(retry.body.jobId).to.equal(stored[0]!._id);
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
    expect((await waitForJob(api, retry.body.jobId)).status).to.equal('complete');
    expect(await stack.rt.credits.balance(accountId)).to.equal(95_000);
  });
});
