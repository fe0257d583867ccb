import { expect } from 'chai';
import sinon from 'sinon';
import type { CommandStartedEvent } from 'mongodb';
import { start as startApi, type ApiServer } from '../../api/app';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { startTcpProxy } from '../helpers/tcp-proxy';
import { within } from '../helpers/within';

describe('authentication cache (keys and accounts cached per API process, invalidated over a fanout)', function () {
  this.timeout(60_000);
  let stack: Stack;
  let second: ApiServer;
  const url2 = () => `http://127.0.0.1:${second.port}/api/v1`;

  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    second = await startApi(stack.config2());
  });
  after(async () => {
    await second?.stop();
    await stack.stop();
  });

  it('when a key was seen once, then the next request reads neither the key nor the account from the database', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    expect((await api.get('/account')).status).to.equal(200);
    const seen: string[] = [];
    const onStart = (e: CommandStartedEvent) =>
      seen.push(`${e.commandName}:${String((e.command as Record<string, unknown>)[e.commandName])}`);
    stack.db.client.on('commandStarted', onStart);
    try {
      expect((await api.get('/account')).status).to.equal(200);
    } finally {
      stack.db.client.off('commandStarted', onStart);
    }
    expect(seen.filter((c) => c === 'find:api_keys' || c === 'find:accounts')).to.deep.equal([]);
  });

  it('when a key is revoked through the accounts repository, then both API processes refuse it within 250 ms', async () => {
    const { key, keyId, accountId } = await stack.createAccount();
    const one = client(stack.baseUrl, key);
    const two = client(url2(), key);
    // Warm both caches.
    expect((await one.get('/account')).status).to.equal(200);
    expect((await two.get('/account')).status).to.equal(200);
    expect((await two.get('/account')).status).to.equal(200);

    const t0 = Date.now();
    await stack.rt.accounts.forAccount(accountId).revokeKey(keyId);
    const [a, b] = await Promise.all([
      within(2000, async () => (await one.get('/account')).status === 401),
      within(2000, async () => (await two.get('/account')).status === 401),
    ]);
    expect(Date.now() - t0, `process 1 after ${a} ms, process 2 after ${b} ms`).to.be.below(250 + 100); // + the revocation's own write
    expect(b).to.be.below(250);
  });

  it('when the plan changes to Free or the scopes shrink, then the other process applies it within 250 ms', async () => {
    const { key, keyId, accountId } = await stack.createAccount();
    const two = client(url2(), key);
    expect((await two.get('/jobs/code_unknown')).status).to.equal(404);
    await stack.rt.accounts.forAccount(accountId).setScopes(keyId, ['drive:read']);
    await within(250, async () => (await two.get('/jobs/code_unknown')).status === 403);
    expect((await two.get('/jobs/code_unknown')).body.error.code).to.equal('forbidden');

    await stack.rt.accounts.forAccount(accountId).setPlan('free');
    await within(250, async () => (await two.get('/account/credits')).status === 403);
    expect((await two.get('/account/credits')).body.error.code).to.equal('plan_required');
  });

  it('when the revoking process cannot broadcast, then the invalidation is kept and the scheduler sweep delivers it to the other process', async () => {
    const { key, keyId, accountId } = await stack.createAccount();
    const two = client(url2(), key);
    expect((await two.get('/account')).status).to.equal(200);
    const stub = sinon.stub(stack.rt.amqp, 'broadcast').rejects(new Error('broker away'));
    try {
      await stack.rt.accounts.forAccount(accountId).revokeKey(keyId);
    } finally {
      stub.restore();
    }
    expect((await client(stack.baseUrl, key).get('/account')).status).to.equal(401); // this process at once
    expect((await two.get('/account')).status).to.equal(200); // the other has not heard
    await new Promise((r) => setTimeout(r, 20));
    expect(await stack.rt.sweepAuthInvalidations(10)).to.equal(1);
    await within(250, async () => (await two.get('/account')).status === 401);
    expect(await stack.rt.sweepAuthInvalidations(0)).to.equal(0); // sent once, then gone
  });

  it('when the fanout is interrupted, then the cache is dropped, a revocation missed meanwhile is applied at once, and caching resumes after the reconnect', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: 5672 });
    const third = await startApi(stack.config2({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${proxy.port}` }));
    try {
      const { key, keyId, accountId } = await stack.createAccount();
      const three = client(`http://127.0.0.1:${third.port}/api/v1`, key);
      expect((await three.get('/account')).status).to.equal(200);

      await proxy.cut(); // the third process loses the broker: it cannot hear invalidations
      await within(5000, async () => !third.runtime.amqp.isReady());
      await stack.rt.accounts.forAccount(accountId).revokeKey(keyId); // announced while it was deaf
      expect((await three.get('/account')).status).to.equal(401);

      await proxy.restore();
      await within(15_000, async () => third.runtime.amqp.isReady());
      expect((await three.get('/account')).status).to.equal(401);

      // After the reconnect the fanout works again: a second key is cached and then revoked.
      const k2 = await stack.rt.accounts.forAccount(accountId).createKey();
      const three2 = client(`http://127.0.0.1:${third.port}/api/v1`, k2.key);
      await within(5000, async () => (await three2.get('/account')).status === 200);
      await stack.rt.accounts.forAccount(accountId).revokeKey(k2.doc._id);
      await within(250, async () => (await three2.get('/account')).status === 401);
    } finally {
      await third.stop();
      await proxy.close();
    }
  });
});
