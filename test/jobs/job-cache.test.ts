import { expect } from 'chai';
import type { CommandStartedEvent, MongoClient } from 'mongodb';
import sinon from 'sinon';
import { registry } from '../../monitoring/metrics';
import { start as startApi, type ApiServer } from '../../api/app';
import { openStore } from '../../platform/infra/mongo';
import { createJobCache, type CachedJob } from '../../platform/jobs/job-cache';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { startTcpProxy } from '../helpers/tcp-proxy';
import { within } from '../helpers/within';

describe('job cache (GET /jobs/{id} per API process: in-flight jobs with changes announced over a fanout, finished jobs by bytes)', function () {
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

  /** The `find` commands on `jobs` an API process (default: the first) sends while `fn` runs. */
  async function jobReads(fn: () => Promise<void>, db: { client: MongoClient } = stack.db): Promise<number> {
    let n = 0;
    const onStart = (e: CommandStartedEvent) => {
      if (e.commandName === 'find' && (e.command as Record<string, unknown>).find === 'jobs') n++;
    };
    db.client.on('commandStarted', onStart);
    try {
      await fn();
    } finally {
      db.client.off('commandStarted', onStart);
    }
    return n;
  }

  it('when a queued job is polled again and again, then only the first GET reads the database', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const { body } = await api.post('/code-builds', { prompt: 'a todo app' });
    const reads = await jobReads(async () => {
      for (let i = 0; i < 5; i++) {
        const r = await api.get(`/jobs/${body.jobId}`);
        expect(r.status).to.equal(200);
        expect(r.body).to.include({ jobId: body.jobId, status: 'queued' });
      }
    });
    expect(reads).to.equal(1);
  });

  it('when a worker claims, reports progress on and completes a job, then both API processes show each state at once', async () => {
    const { key } = await stack.createAccount();
    const one = client(stack.baseUrl, key);
    const two = client(url2(), key);
    const { body } = await one.post('/code-builds', { prompt: 'a todo app' });
    const path = `/jobs/${body.jobId}`;
    const status = async (api: typeof one) =>
      (await api.get(path)).body as { status: string; rawStatus: string; progressMessage: string; result: unknown };
    // Both caches hold it queued.
    for (const api of [one, two, one, two]) expect((await status(api)).status).to.equal('queued');

    const jobs = stack.rt.jobs; // the functions the worker pools call
    expect(await jobs.claim(body.jobId, 'worker-a', 30_000)).to.not.equal(null);
    await within(
      250,
      async () => (await status(one)).status === 'processing' && (await status(two)).status === 'processing',
    );

    expect(
      await jobs.progress(body.jobId, 'worker-a', { rawStatus: 'building', progressMessage: 'Building the app' }),
    ).to.equal(true);
    await within(
      250,
      async () =>
        (await status(one)).rawStatus === 'building' && (await status(two)).progressMessage === 'Building the app',
    );

    expect(await jobs.complete(body.jobId, 'worker-a', { ok: true })).to.not.equal(null);
    await within(
      250,
      async () => (await status(one)).status === 'complete' && (await status(two)).status === 'complete',
    );
    expect((await status(two)).result).to.deep.equal({ ok: true });
  });

  it('when a job has finished, then the first GET reads it and later GETs, from either account, read nothing', async () => {
    const { key } = await stack.createAccount();
    const other = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const { body } = await api.post('/code-builds', { prompt: 'x' });
    await stack.rt.jobs.fail(body.jobId, 'boom');
    await within(250, async () => (await api.get(`/jobs/${body.jobId}`)).body.status === 'failed');
    const reads = await jobReads(async () => {
      for (let i = 0; i < 3; i++) {
        const r = await api.get(`/jobs/${body.jobId}`);
        expect(r.body).to.include({ status: 'failed', error: 'boom' });
      }
      const theirs = await client(stack.baseUrl, other.key).get(`/jobs/${body.jobId}`);
      expect(theirs.status).to.equal(404); // the owner is checked on every hit
    });
    expect(reads).to.equal(0);
    const lookups = (await registry.getSingleMetric('job_cache_lookups_total')!.get()).values;
    expect(lookups.find((v) => v.labels.outcome === 'finished_hit')?.value).to.be.at.least(3);
  });

  it('when the fanout is interrupted, then finished jobs are still served from memory (they never change)', () => {
    const cache = createJobCache({ maxEntries: 10, ttlMs: 60_000, finishedMaxBytes: 1 << 20 });
    cache.ready();
    const done = {
      accountId: 'acct_a',
      envelope: { jobId: 'code_1', status: 'complete', result: { ok: true } },
    } as unknown as CachedJob;
    let reads = 0;
    const read = async () => {
      reads++;
      return done;
    };
    return (async () => {
      await cache.get('acct_a', 'code_1', read);
      cache.lost();
      cache.clear();
      expect((await cache.get('acct_a', 'code_1', read))?.status).to.equal('complete');
      expect(reads).to.equal(1);
      cache.invalidate({ jobId: 'code_1' }); // a path that deletes a job announces it
      await cache.get('acct_a', 'code_1', read);
      expect(reads).to.equal(2);
    })();
  });

  it('when finished jobs outgrow JOB_CACHE_FINISHED_BYTES, then the least recently used go first and are counted', async () => {
    const big = 'x'.repeat(2_000);
    const job = (id: string) =>
      ({
        accountId: 'acct_a',
        envelope: { jobId: id, status: 'complete', result: { text: big } },
      }) as unknown as CachedJob;
    const cache = createJobCache({ maxEntries: 10, ttlMs: 60_000, finishedMaxBytes: 7_500 }); // three entries fit
    const reads: string[] = [];
    const get = (id: string) =>
      cache.get('acct_a', id, async () => {
        reads.push(id);
        return job(id);
      });
    const evictions = async () =>
      (await registry.getSingleMetric('job_cache_finished_evictions_total')!.get()).values[0]?.value ?? 0;
    const before = await evictions();
    for (const id of ['a', 'b', 'c', 'a', 'd']) await get(id); // a is used again, so d evicts b
    expect(reads).to.deep.equal(['a', 'b', 'c', 'd']);
    expect(cache.finished.entries).to.equal(3);
    expect(cache.finished.bytes).to.be.at.most(7_500);
    expect((await evictions()) - before).to.equal(1);
    await get('b');
    await get('a');
    expect(reads).to.deep.equal(['a', 'b', 'c', 'd', 'b']); // b read again; a still held

    const tiny = createJobCache({ maxEntries: 10, ttlMs: 60_000, finishedMaxBytes: 100 }); // smaller than one job
    await tiny.get('acct_a', 'a', async () => job('a'));
    expect(tiny.finished.entries).to.equal(0);
    const off = createJobCache({ maxEntries: 10, ttlMs: 60_000, finishedMaxBytes: 0 }); // JOB_CACHE_FINISHED_BYTES=0
    await off.get('acct_a', 'a', async () => job('a'));
    expect(off.finished.entries).to.equal(0);
  });

  it('when another account asks for a cached job, then 404 not_found, and the owner still gets it', async () => {
    const a = await stack.createAccount();
    const b = await stack.createAccount();
    const apiA = client(stack.baseUrl, a.key);
    const apiB = client(stack.baseUrl, b.key);
    const { body } = await apiA.post('/code-builds', { prompt: 'x' });
    expect((await apiA.get(`/jobs/${body.jobId}`)).status).to.equal(200); // cached now
    const r = await apiB.get(`/jobs/${body.jobId}`);
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal('not_found');
    expect(JSON.stringify(r.body)).to.not.include('code-builds');
    expect((await apiA.get(`/jobs/${body.jobId}`)).status).to.equal(200);
  });

  it('when the fanout is interrupted, then the job cache is dropped and a change made meanwhile is seen at once, and caching resumes after the reconnect', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: 5672 });
    const third = await startApi(stack.config2({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${proxy.port}` }));
    try {
      const { key } = await stack.createAccount();
      const three = client(`http://127.0.0.1:${third.port}/api/v1`, key);
      const { body } = await client(stack.baseUrl, key).post('/code-builds', { prompt: 'x' });
      expect((await three.get(`/jobs/${body.jobId}`)).body.status).to.equal('queued'); // cached in the third process

      await proxy.cut(); // the third process can no longer hear announcements
      await within(5000, async () => !third.runtime.amqp.isReady());
      await stack.rt.jobs.claim(body.jobId, 'worker-b', 30_000); // announced while it was deaf
      expect((await three.get(`/jobs/${body.jobId}`)).body.status).to.equal('processing');

      await proxy.restore();
      await within(15_000, async () => third.runtime.amqp.isReady());
      // Cached again once the subscription is back: of two GETs in a row only the first reads.
      let statuses: unknown[] = [];
      await within(10_000, async () => {
        await new Promise((r) => setTimeout(r, 100)); // a few tries, well inside the rate limit
        statuses = [];
        const reads = await jobReads(async () => {
          for (let i = 0; i < 2; i++) statuses.push((await three.get(`/jobs/${body.jobId}`)).body.status);
        }, openStore(third.runtime.store));
        return reads === 1;
      });
      expect(statuses).to.deep.equal(['processing', 'processing']);
      await stack.rt.jobs.complete(body.jobId, 'worker-b', { done: 1 });
      await within(250, async () => (await three.get(`/jobs/${body.jobId}`)).body.status === 'complete');
    } finally {
      await third.stop();
      await proxy.close();
    }
  });

  it('when this process has no broker link, then moving a job does not wait for it: the announcement is counted as failed', async () => {
    const { key } = await stack.createAccount();
    const { body } = await client(stack.baseUrl, key).post('/code-builds', { prompt: 'x' });
    const failedBefore = await announced('failed');
    const ready = sinon.stub(stack.rt.amqp, 'isReady').returns(false);
    const broadcast = sinon.spy(stack.rt.amqp, 'broadcast');
    try {
      expect(await stack.rt.jobs.claim(body.jobId, 'worker-c', 30_000)).to.not.equal(null);
    } finally {
      ready.restore();
      broadcast.restore();
    }
    expect(broadcast.called).to.equal(false);
    expect(await announced('failed')).to.equal(failedBefore + 1);
  });

  /** job_changes_announced_total{outcome} of this process. */
  async function announced(outcome: 'sent' | 'failed'): Promise<number> {
    const m = await registry.getSingleMetric('job_changes_announced_total')!.get();
    return m.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
  }

  it('when a read was in flight while its job changed, then what it read is not kept', async () => {
    const cache = createJobCache({ maxEntries: 10, ttlMs: 60_000 });
    cache.ready();
    const envelope = (status: string) =>
      ({ accountId: 'acct_a', envelope: { jobId: 'code_1', status } }) as unknown as CachedJob;
    let release!: (v: CachedJob) => void;
    const slow = cache.get('acct_a', 'code_1', () => new Promise<CachedJob>((r) => (release = r)));
    cache.invalidate({ jobId: 'code_1' }); // the job moved while the read was on its way
    release(envelope('queued'));
    expect((await slow)?.status).to.equal('queued'); // the caller gets what it read
    let reads = 0;
    const fresh = await cache.get('acct_a', 'code_1', async () => {
      reads++;
      return envelope('processing');
    });
    expect(reads).to.equal(1); // the stale read was not stored
    expect(fresh?.status).to.equal('processing');
    expect(
      (
        await cache.get('acct_a', 'code_1', async () => {
          reads++;
          return envelope('x');
        })
      )?.status,
    ).to.equal('processing');
    expect(reads).to.equal(1); // and the fresh one was
  });

  it('when other jobs change while a read is in flight, then what it read is still kept', async () => {
    const cache = createJobCache({ maxEntries: 10, ttlMs: 60_000 });
    cache.ready();
    const job = { accountId: 'acct_a', envelope: { jobId: 'code_1', status: 'queued' } } as unknown as CachedJob;
    let release!: (v: CachedJob) => void;
    const slow = cache.get('acct_a', 'code_1', () => new Promise<CachedJob>((r) => (release = r)));
    for (let i = 0; i < 50; i++) cache.invalidate({ jobId: `code_other_${i}` });
    release(job);
    await slow;
    let reads = 0;
    await cache.get('acct_a', 'code_1', async () => {
      reads++;
      return job;
    });
    expect(reads).to.equal(0);
  });

  it('when the cache is full, expired, off or cleared, then it reads again', async () => {
    const job = (id: string) =>
      ({ accountId: 'acct_a', envelope: { jobId: id, status: 'processing' } }) as unknown as CachedJob;
    let reads = 0;
    const get = (cache: ReturnType<typeof createJobCache>, id: string) =>
      cache.get('acct_a', id, async () => {
        reads++;
        return job(id);
      });

    const small = createJobCache({ maxEntries: 2, ttlMs: 60_000 });
    small.ready();
    for (const id of ['a', 'b', 'c', 'c', 'b']) await get(small, id); // c evicts a (oldest)
    expect(reads).to.equal(3);
    await get(small, 'a');
    expect(reads).to.equal(4);

    reads = 0;
    const off = createJobCache({ maxEntries: 0, ttlMs: 60_000 }); // JOB_CACHE_ENTRIES=0
    off.ready();
    await get(off, 'a');
    await get(off, 'a');
    expect(reads).to.equal(2);

    reads = 0;
    const short = createJobCache({ maxEntries: 10, ttlMs: 20 });
    short.ready();
    await get(short, 'a');
    await get(short, 'a');
    await new Promise((r) => setTimeout(r, 30));
    await get(short, 'a');
    expect(reads).to.equal(2);

    reads = 0;
    const cleared = createJobCache({ maxEntries: 10, ttlMs: 60_000 });
    cleared.ready();
    await get(cleared, 'a');
    cleared.clear(); // an unreadable announcement
    await get(cleared, 'a');
    await get(cleared, 'a'); // still live after a clear
    expect(reads).to.equal(2);
  });
});
