import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { start as startApi, type ApiServer } from '../../api/app';
import { metrics } from '../../monitoring/metrics';
import { COLLECTIONS, openStore } from '../../platform/infra/mongo';
import { client } from '../../scripts/harness/http';
import { freePort, startStack, type Stack } from '../../scripts/harness/stack';

describe('rate limit', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '3600' },
    });
  });
  after(() => stack.stop());

  it('when a key stays under the limit, then every response carries the three headers', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const r = await api.get('/account');
    expect(r.headers.get('x-ratelimit-limit')).to.equal('5');
    expect(r.headers.get('x-ratelimit-remaining')).to.equal('4');
    const reset = Number(r.headers.get('x-ratelimit-reset'));
    expect(reset).to.be.within(1, 3600);
  });

  it('when a key exceeds the limit, then 429 rate_limited with Retry-After, and other keys are unaffected', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    for (let i = 0; i < 5; i++) expect((await api.get('/account')).status).to.equal(200);
    const r = await api.get('/account');
    expect(r.status).to.equal(429);
    expect(r.body.error.code).to.equal('rate_limited');
    expect(Number(r.headers.get('retry-after'))).to.be.within(1, 3600);
    expect(r.headers.get('x-ratelimit-remaining')).to.equal('0');
    const other = client(stack.baseUrl, (await stack.createAccount()).key);
    expect((await other.get('/account')).status).to.equal(200);
  });

  it('when 20 requests of one key race, then exactly the limit passes', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const statuses = (await Promise.all(Array.from({ length: 20 }, () => api.get('/account')))).map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).to.have.length(5);
    expect(statuses.filter((s) => s === 429)).to.have.length(15);
  });

  it('when two API processes serve one key, then they share one count (kept in MongoDB)', async () => {
    const port = await freePort();
    const second = await startApi(stack.config2({ PORT: String(port) }));
    try {
      const { key } = await stack.createAccount();
      const a = client(stack.baseUrl, key);
      const b = client(`http://127.0.0.1:${port}/api/v1`, key);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await (i % 2 ? b : a).get('/account')).status);
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429]);
    } finally {
      await second.stop();
    }
  });

  /** Every command the runtime's MongoDB client starts while `act` runs. */
  const commandsDuring = async <T>(act: () => Promise<T>): Promise<{ result: T; commands: CommandStartedEvent[] }> => {
    const commands: CommandStartedEvent[] = [];
    const listener = (e: CommandStartedEvent) => void commands.push(e);
    stack.db.client.on('commandStarted', listener);
    try {
      return { result: await act(), commands };
    } finally {
      stack.db.client.off('commandStarted', listener);
    }
  };
  const collectionOf = (e: CommandStartedEvent) => (e.command as Record<string, unknown>)[e.commandName];
  const WRITES = new Set(['insert', 'update', 'delete', 'findAndModify']);

  it('when a key is over the limit, then the refusal needs no database write and is counted in the metric', async () => {
    const { key, keyId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    for (let i = 0; i < 5; i++) expect((await api.get('/account')).status).to.equal(200);
    expect((await api.get('/account')).status).to.equal(429); // learns that the window is full
    const before = (await metrics.rateLimited.get()).values.find((v) => v.labels.route === '/account')?.value ?? 0;

    const { result: r, commands } = await commandsDuring(() => api.get('/account'));

    expect(r.status).to.equal(429);
    expect(r.headers.get('x-ratelimit-remaining')).to.equal('0');
    expect(commands.filter((e) => collectionOf(e) === COLLECTIONS.rateLimits)).to.deep.equal([]);
    // The audit writer's batch inserts run beside requests, off their path; nothing else writes.
    const writes = commands.filter(
      (e) => WRITES.has(e.commandName) && !(e.commandName === 'insert' && collectionOf(e) === COLLECTIONS.audit),
    );
    expect(writes.map((e) => `${e.commandName} ${String(collectionOf(e))}`)).to.deep.equal([]);
    const after = (await metrics.rateLimited.get()).values.find((v) => v.labels.route === '/account')?.value ?? 0;
    expect(after - before).to.equal(1);
    // One counter document for the window: the leases of this key, never past the limit by a lease.
    const docs = await stack.db.rateLimits.find({ _id: { $regex: `^${keyId}:` } }).toArray();
    expect(docs).to.have.length(1);
    expect(docs[0]!.count).to.equal(5);
    expect(docs[0]!.expiresAt.getTime()).to.be.above(Date.now());
  });

  describe('with a limit of 100 (leases of 5) on two API processes', () => {
    let a: ApiServer;
    let b: ApiServer;
    const urlOf = (s: ApiServer) => `http://127.0.0.1:${s.port}/api/v1`;
    before(async () => {
      a = await startApi(stack.config2({ RATE_LIMIT_MAX: '100' }));
      b = await startApi(stack.config2({ RATE_LIMIT_MAX: '100' }));
    });
    after(async () => {
      await Promise.allSettled([a?.stop(), b?.stop()]);
    });

    it('when 20 requests of one key race in one process, then they share leases (a few database calls) and Remaining counts down exactly', async () => {
      const { key } = await stack.createAccount();
      const api = client(urlOf(a), key);
      const calls: CommandStartedEvent[] = [];
      const listener = (e: CommandStartedEvent) => void (collectionOf(e) === COLLECTIONS.rateLimits && calls.push(e));
      openStore(a.runtime.store).client.on('commandStarted', listener);
      let results: Awaited<ReturnType<typeof api.get>>[];
      try {
        results = await Promise.all(Array.from({ length: 20 }, () => api.get('/account')));
      } finally {
        openStore(a.runtime.store).client.off('commandStarted', listener);
      }
      expect(results.map((r) => r.status)).to.deep.equal(Array(20).fill(200));
      const remaining = results.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y);
      expect(remaining).to.deep.equal(Array.from({ length: 20 }, (_, i) => 80 + i));
      // 4 leases of 5 (the first one also creates the document), not one call per request.
      expect(calls.length).to.be.within(4, 6);
    });

    it('when two API processes share a key under concurrent load, then no more than the limit passes and at least 90% of it does', async () => {
      const { key, keyId } = await stack.createAccount();
      const apis = [client(urlOf(a), key), client(urlOf(b), key)];
      const statuses: number[] = [];
      let next = 0;
      // 300 requests, 30 at a time, alternating between the processes.
      await Promise.all(
        Array.from({ length: 30 }, async () => {
          while (next < 300) {
            const i = next++;
            statuses.push((await apis[i % 2]!.get('/account')).status);
          }
        }),
      );
      const passed = statuses.filter((s) => s === 200).length;
      expect(statuses.filter((s) => s !== 200 && s !== 429)).to.deep.equal([]);
      expect(passed).to.be.at.most(100);
      expect(passed).to.be.at.least(90);
      const doc = await stack.db.rateLimits.findOne({ _id: { $regex: `^${keyId}:` } });
      expect(doc!.count).to.be.within(100, 104);
      // Both processes now know the window is full.
      for (const api of apis) expect((await api.get('/account')).status).to.equal(429);
    });
  });
});
