import { expect } from 'chai';
import sinon from 'sinon';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('Idempotency-Key on job POSTs', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { CREDIT_PRICES: '{"code_build":5}' } });
  });
  after(() => stack.stop());

  it('when a POST is retried with the same key and body, then the original response returns and is billed once', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const first = await api.post('/code-builds', { prompt: 'todo app' }, { 'idempotency-key': 'k-1' });
    const again = await api.post('/code-builds', { prompt: 'todo app' }, { 'idempotency-key': 'k-1' });
    expect(first.status).to.equal(202);
    expect(again.status).to.equal(202);
    expect(again.body.jobId).to.equal(first.body.jobId);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect((await api.get('/account/credits')).body.balance).to.equal(95);
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
  });

  it('when a retry arrives while the first request is storing its answer, then the retry replays that answer: one job, charged once', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const idem = { 'idempotency-key': 'k-finish-race' };
    const records = stack.db.idempotency;
    const write = records.updateOne.bind(records);
    const read = records.findOne.bind(records);
    // The first request's answer is held on its way to the database until the retry has looked
    // at the record (twice: it found it in flight and waited) or has answered by itself.
    let writing!: () => void;
    const windowOpen = new Promise<void>((r) => (writing = r));
    let letGo!: () => void;
    const released = new Promise<void>((r) => (letGo = r));
    let held = false;
    let reads = 0;
    let readTwice!: () => void;
    const retryWaited = new Promise<void>((r) => (readTwice = r));
    sinon.stub(records, 'updateOne').callsFake(async (...args: Parameters<typeof records.updateOne>) => {
      const update = args[1] as { $set?: { state?: string } };
      if (!held && update.$set?.state === 'done') {
        held = true;
        writing();
        await released;
      }
      return write(...args);
    });
    sinon.stub(records, 'findOne').callsFake(((...args: Parameters<typeof records.findOne>) => {
      if (held && ++reads === 2) readTwice();
      return read(...args);
    }) as typeof records.findOne);
    try {
      const first = api.post('/code-builds', { prompt: 'finish race' }, idem);
      await windowOpen;
      const retry = api.post('/code-builds', { prompt: 'finish race' }, idem);
      await Promise.race([retry, retryWaited]);
      letGo();
      const [a, b] = await Promise.all([first, retry]);
      expect(a.status).to.equal(202);
      expect(b.status).to.equal(202);
      expect(b.body).to.deep.equal(a.body);
      expect(b.headers.get('idempotent-replayed')).to.equal('true');
    } finally {
      sinon.restore();
      letGo();
    }
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
    await stack.rt.jobs.flushAccepted();
    expect((await api.get('/account/credits')).body.balance).to.equal(95);
  });

  it('when the same key comes with another body, then 422 idempotency_key_reused', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    await api.post('/code-builds', { prompt: 'a' }, { 'idempotency-key': 'k-2' });
    const r = await api.post('/code-builds', { prompt: 'b' }, { 'idempotency-key': 'k-2' });
    expect(r.status).to.equal(422);
    expect(r.body.error.code).to.equal('idempotency_key_reused');
  });

  it('when the same key races in 10 concurrent requests, then one job is created and billed', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const rs = await Promise.all(
      Array.from({ length: 10 }, () => api.post('/code-builds', { prompt: 'race' }, { 'idempotency-key': 'k-race' })),
    );
    const ids = new Set(rs.filter((r) => r.status === 202).map((r) => r.body.jobId));
    expect(ids.size).to.equal(1);
    for (const r of rs) expect([202, 409]).to.include(r.status);
    expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
    expect((await api.get('/account/credits')).body.balance).to.equal(95);
  });

  it('when two accounts use the same key string, then they do not see each other', async () => {
    const a = client(stack.baseUrl, (await stack.createAccount()).key);
    const b = client(stack.baseUrl, (await stack.createAccount()).key);
    const ra = await a.post('/code-builds', { prompt: 'same' }, { 'idempotency-key': 'shared' });
    const rb = await b.post('/code-builds', { prompt: 'same' }, { 'idempotency-key': 'shared' });
    expect(ra.body.jobId).not.to.equal(rb.body.jobId);
  });

  it('when the first attempt failed, then the key is free for a retry', async () => {
    const { key, accountId } = await stack.createAccount({ credits: 0 });
    const api = client(stack.baseUrl, key);
    expect((await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'k-3' })).status).to.equal(402);
    await stack.db.accounts.updateOne({ _id: accountId }, { $set: { millicredits: 10_000 } });
    expect((await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'k-3' })).status).to.equal(202);
  });

  it('when a key is stored, then it is kept at least 24 hours', async () => {
    const { key, accountId } = await stack.createAccount();
    await client(stack.baseUrl, key).post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'k-4' });
    const doc = await stack.db.idempotency.findOne({ accountId, key: 'k-4' });
    expect(doc!.expiresAt.getTime() - doc!.createdAt.getTime()).to.be.at.least(24 * 3600_000);
  });

  it('when the key is longer than 255 characters, then 400 names the header', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const r = await api.post('/code-builds', { prompt: 'x' }, { 'idempotency-key': 'k'.repeat(256) });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.match(/^Idempotency-Key:/);
  });
});
