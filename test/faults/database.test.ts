import { expect } from 'chai';
import { startDbFaults, type DbFaults } from '../../scripts/harness/db-faults';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

/**
 * The database goes away under load, on a private PostgreSQL cluster and
 * FerretDB (scripts/db-faults.sh), never the machine's shared servers: FerretDB killed with
 * SIGKILL and started again, PostgreSQL stopped (fast) and started again. Requests meanwhile get
 * a fast 503 with the Error shape and Retry-After, readiness goes false and back, and a burst of
 * code builds retried by a careful client loses nothing, makes nothing twice, completes, and the
 * balance read is exact within 30 s of the database answering again.
 */

/** What no request may take while the database is away (the point is "no hang"; a loaded CI machine is slow). */
const FAST_MS = 10_000;
const PRICE = 5;

interface Answer {
  status: number;
  ms: number;
  retryAfter: string | null;
  body: any;
}

async function call(
  url: string,
  key: string,
  method = 'GET',
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const t = performance.now();
  const r = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await r.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: r.status, ms: performance.now() - t, retryAfter: r.headers.get('retry-after'), body: parsed };
}

/** A 503 as the contract says: the Error shape, service_unavailable, Retry-After. */
function expectUnavailable(a: Answer, what: string) {
  expect(a.status, `${what}: ${JSON.stringify(a.body)}`).to.equal(503);
  expect(a.body?.error?.code, what).to.equal('service_unavailable');
  expect(a.body.error.message, what).to.be.a('string');
  expect(a.body.error.requestId, what).to.match(/^req_/);
  expect(Number(a.retryAfter), `${what}: Retry-After`).to.be.greaterThan(0);
  expect(a.ms, `${what}: answered in ${Math.round(a.ms)} ms`).to.be.below(FAST_MS);
}

const readyz = (stack: Stack) =>
  fetch(stack.baseUrl.replace('/api/v1', '/readyz'), { signal: AbortSignal.timeout(15_000) }).then(
    (r) => r.status,
    () => 0,
  );

/** What the account should read: its credits less the price of every job it pays for. */
async function truth(stack: Stack, accountId: string, credits: number) {
  const jobs = await stack.db.jobs.find({ accountId }, { projection: { status: 1, credits: 1 } }).toArray();
  return (
    credits -
    jobs
      .filter((j) => j.credits.charged !== null && !(j.status === 'failed' && j.credits.refunded))
      .reduce((n, j) => n + fromUnits(j.credits.millicredits), 0)
  );
}

/**
 * `n` POST /code-builds at `perSecond`, each with its own Idempotency-Key, alternating between
 * the accounts; each retried after its Retry-After until it is accepted. `fault` runs after a
 * third of them and resolves once the database answers again.
 */
async function burst(
  stack: Stack,
  accounts: { key: string }[],
  n: number,
  perSecond: number,
  tag: string,
  fault: () => Promise<void>,
) {
  const keys = Array.from({ length: n }, (_, i) => `${tag}-${i}`);
  const statuses: number[] = [];
  const unshaped: Answer[] = [];
  const post = async (i: number): Promise<string> => {
    for (let tries = 0; tries < 200; tries++) {
      const a = await call(
        `${stack.baseUrl}/code-builds`,
        accounts[i % accounts.length]!.key,
        'POST',
        { prompt: keys[i] },
        { 'idempotency-key': keys[i]! },
      ).catch(() => null);
      statuses.push(a?.status ?? 0);
      if (a?.status === 202) return a.body.jobId as string;
      if (a && a.status >= 500 && (a.status !== 503 || !a.retryAfter || a.body?.error?.code !== 'service_unavailable'))
        unshaped.push(a);
      await new Promise((r) => setTimeout(r, a?.retryAfter ? Number(a.retryAfter) * 1000 : 250));
    }
    throw new Error(`${keys[i]} never accepted: ${statuses.join(',')}`);
  };
  const posts: Promise<string>[] = [];
  let recovered: Promise<number> | undefined;
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    posts.push(post(i));
    if (i === Math.floor(n / 3)) recovered = fault().then(() => Date.now());
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + ((i + 1) * 1000) / perSecond - Date.now())));
  }
  const jobIds = await Promise.all(posts);
  return { jobIds, keys, statuses, unshaped, recoveredAt: await recovered! };
}

describe('database faults', function () {
  this.timeout(180_000);
  let faults: DbFaults;
  let stack: Stack;

  before(async () => {
    faults = await startDbFaults();
    stack = await startStack({
      env: { MONGODB_URL: faults.url.replace(/\/svc$/, '/faults'), RATE_LIMIT_MAX: '100000' },
    });
    // Every collection the runs below write made before the first kill: FerretDB 1.24 creates a
    // collection in two steps (its PostgreSQL table, then its metadata), and a SIGKILL between
    // them leaves a table it can no longer use ("relation … already exists", SQLSTATE 42P07).
    // One job charged per job, one from a credit lease: jobs, ledger, leases, the blob bucket.
    const warm = client(stack.baseUrl, (await stack.createAccount({ credits: 100_000 })).key);
    for (const prompt of ['warm per job', 'warm from a lease']) {
      const r = await warm.post('/code-builds', { prompt });
      expect(r.status).to.equal(202);
      await eventually(
        async () => (await warm.get(`/jobs/${r.body.jobId}`)).body.status === 'complete',
        30_000,
        'the warm-up job',
      );
    }
  });
  after(async () => {
    // The stack drops its database and queues, so the database must be up; then the cluster goes.
    await faults?.startPostgres().catch(() => {});
    await faults?.startFerretDb().catch(() => {});
    await stack?.stop().catch(() => {});
    await faults?.down();
  });

  it('when FerretDB is killed, then requests answer a fast 503 with the Error shape and Retry-After, never a 500, /readyz goes 503, and both come back when it is started again', async () => {
    const { key } = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, key);
    expect((await api.post('/code-builds', { prompt: 'before' })).status).to.equal(202);
    expect(await readyz(stack)).to.equal(200);

    await faults.killFerretDb();
    try {
      // The first request may be the one that finds it gone; every one is a 503 in time.
      for (let round = 0; round < 3; round++) {
        expectUnavailable(
          await call(
            `${stack.baseUrl}/code-builds`,
            key,
            'POST',
            { prompt: `during ${round}` },
            { 'idempotency-key': `k-${round}` },
          ),
          `POST /code-builds #${round}`,
        );
        expectUnavailable(await call(`${stack.baseUrl}/account/credits`, key), `GET /account/credits #${round}`);
        expectUnavailable(await call(`${stack.baseUrl}/jobs/code_doesnotexist`, key), `GET /jobs/{id} #${round}`);
      }
      // A key the API has not seen yet: its lookup would need the database.
      const stranger = await call(`${stack.baseUrl}/account`, 'svc_notcachedyetnotcachedyetnotcachedyet12345');
      expectUnavailable(stranger, 'an unknown key');
      expect(stack.rt.dbHealth.up).to.equal(false);
      await eventually(async () => (await readyz(stack)) === 503, 10_000, '/readyz 503');
    } finally {
      await faults.startFerretDb();
    }
    const back = Date.now();
    await eventually(async () => (await readyz(stack)) === 200, 15_000, '/readyz 200 again');
    await eventually(
      async () => (await api.post('/code-builds', { prompt: 'after' })).status === 202,
      15_000,
      'a 202 again',
    );
    expect(Date.now() - back).to.be.below(15_000);
  });

  const across = (name: string, fault: () => Promise<void>) =>
    it(`when ${name} during a burst of code builds with Idempotency-Keys, then every one is accepted once (retried by the client), all complete, and the balance read is exact within 30 s of recovery`, async () => {
      // One account charged per job, one large enough for credit leases: both charge paths.
      const perJob = { ...(await stack.createAccount({ credits: 1000 })), credits: 1000 };
      const leased = { ...(await stack.createAccount({ credits: 100_000 })), credits: 100_000 };
      const accounts = [perJob, leased];
      const tag = `b${Date.now().toString(36)}`;
      const r = await burst(stack, accounts, 45, 15, tag, fault);

      expect(
        r.unshaped.map((a) => `${a.status} ${JSON.stringify(a.body)}`),
        'a 5xx that is not a 503 with the shape and Retry-After',
      ).to.deep.equal([]);
      expect(
        r.statuses.filter((s) => s === 0),
        'no answer at all',
      ).to.deep.equal([]);
      expect(
        r.statuses.some((s) => s === 503),
        'the burst met the outage',
      ).to.equal(true);
      expect(new Set(r.jobIds).size).to.equal(r.keys.length);
      const jobs = await stack.db.jobs
        .find({ accountId: { $in: accounts.map((a) => a.accountId) }, 'input.prompt': { $regex: `^${tag}-` } })
        .toArray();
      expect(jobs.map((j) => j.input.prompt).sort(), 'one job per key').to.deep.equal([...r.keys].sort());
      await eventually(
        async () =>
          (await stack.db.jobs.countDocuments({ _id: { $in: r.jobIds }, status: 'complete' })) === r.jobIds.length,
        60_000,
        'every job complete',
      ).catch(async (err) => {
        const open = await stack.db.jobs
          .find(
            { _id: { $in: r.jobIds }, status: { $ne: 'complete' } },
            { projection: { status: 1, error: 1, attempts: 1, rawStatus: 1 } },
          )
          .toArray();
        throw new Error(`${(err as Error).message}: ${JSON.stringify(open.slice(0, 5))}`);
      });

      // Exact within 30 s of the database answering again, as read through the API.
      for (const a of accounts) {
        const expected = a.credits - PRICE * (await stack.db.jobs.countDocuments({ accountId: a.accountId }));
        expect(await truth(stack, a.accountId, a.credits)).to.equal(expected);
        await eventually(
          async () => (await client(stack.baseUrl, a.key).get('/account/credits')).body.balance === expected,
          Math.max(1000, r.recoveredAt + 30_000 - Date.now()),
          `balance ${expected}`,
        );
      }
    });

  across('FerretDB is killed (SIGKILL) and started again', async () => {
    await faults.killFerretDb();
    await new Promise((r) => setTimeout(r, 3000));
    await faults.startFerretDb();
  });

  across('PostgreSQL is stopped (fast) and started again', async () => {
    await faults.stopPostgres();
    await new Promise((r) => setTimeout(r, 3000));
    await faults.startPostgres();
  });
});
