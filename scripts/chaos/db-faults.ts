/**
 * The database-fault run (`npm run chaos -- --db-faults`), against the compiled supervisor on a
 * private PostgreSQL cluster and FerretDB (scripts/db-faults.sh; the machine's shared servers are
 * never touched):
 *   (a) a steady burst of POST /code-builds (CHAOS_DB_JOBS, 300, at CHAOS_DB_RATE, 20/s), each with
 *       its own Idempotency-Key; a third of the way through, FerretDB is killed with SIGKILL and
 *       started again CHAOS_DB_OUTAGE_MS (8 s) later;
 *   (b) the same burst again, PostgreSQL stopped (pg_ctl -m fast) a third of the way through and
 *       started again CHAOS_DB_OUTAGE_MS later;
 *   (c) the same again, the API process, a worker process holding jobs and FerretDB killed at once
 *       (SIGKILL), FerretDB started again CHAOS_DB_OUTAGE_MS later (the supervisor restarts the
 *       processes; they come up once the database answers).
 * The client is a careful one: a request without a 202 is sent again with the same key after its
 * Retry-After (250 ms when there is none). Requests alternate between an account large enough for
 * credit leases and one charged per job, so both charge paths go through the faults. While the
 * burst runs, GET /account/credits of both accounts is read every 250 ms against the truth counted
 * from the job documents (each job's price, unless it failed refunded or unpaid), and /readyz is
 * read every 200 ms.
 * CHAOS_DB_LOG=<file> keeps the processes' JSON log lines there (CHAOS_LOG_LEVEL=info adds the
 * access lines).
 * Figures per fault: accepted, completed, lost (0), duplicated (0), credits exact, how long after
 * recovery the balance read became exact (and how far off it was before), the 503s served during
 * the outage (with the Error shape and Retry-After) and their latency, any other failure, /readyz
 * false → true, p50/p99 accept latency before / during / after. Exit status 1 when a job is lost
 * or duplicated, a credit is off, an answer lacked the shape or Retry-After, or the balance read
 * was not exact within 30 s of recovery.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createAccountsRepository } from '../../platform/accounts/accounts.repository';
import { storeOf } from '../../platform/infra/mongo';
import { fromUnits } from '../../platform/credits/credits';
import { startDbFaults, type DbFaults } from '../harness/db-faults';
import { apiPid, pct, printFigures, sleep, startChaosRun, type ChaosRun } from './kit';

const JOBS = Number(process.env.CHAOS_DB_JOBS ?? 300);
const RATE = Number(process.env.CHAOS_DB_RATE ?? 20);
const OUTAGE_MS = Number(process.env.CHAOS_DB_OUTAGE_MS ?? 8000);
const PRICE = 5;
/** The requirement: the balance read is exact this long after the database is back. */
const EXACT_WITHIN_MS = 30_000;

interface Try {
  at: number;
  ms: number;
  status: number;
  /** The body is the Error shape (error.code, error.message, error.requestId). */
  shaped: boolean;
  retryAfter: string | null;
}

interface Logical {
  key: string;
  account: Account;
  tries: Try[];
  jobId?: string;
}

interface Account {
  id: string;
  key: string;
  credits: number;
  label: string;
}

interface BalanceTick {
  at: number;
  account: Account;
  read: number;
  before: number;
  after: number;
}

/** POST /code-builds with one key until a 202, as a careful client: after Retry-After, else 250 ms. */
async function postTracked(run: ChaosRun, l: Logical, body: Record<string, unknown>): Promise<void> {
  for (let n = 0; n < 400; n++) {
    const at = Date.now();
    const t = performance.now();
    const r = await fetch(`${run.base}/code-builds`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${l.account.key}`,
        'content-type': 'application/json',
        'idempotency-key': l.key,
      },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    }).then(
      async (res) => ({
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        body: (await res.json().catch(() => null)) as Record<string, any> | null,
      }),
      () => ({ status: 0, retryAfter: null, body: null }),
    );
    const e = r.body?.error;
    l.tries.push({
      at,
      ms: performance.now() - t,
      status: r.status,
      shaped: typeof e?.code === 'string' && typeof e?.message === 'string' && typeof e?.requestId === 'string',
      retryAfter: r.retryAfter,
    });
    if (r.status === 202 && typeof r.body?.jobId === 'string') {
      l.jobId = r.body.jobId;
      return;
    }
    await sleep(r.retryAfter ? Math.min(5000, Number(r.retryAfter) * 1000) : 250);
  }
  throw new Error(`${l.key} never got a 202: ${l.tries.map((t) => t.status).join(',')}`);
}

/** What the account should read now: its credits less every job it pays for, from the job documents. */
async function truth(run: ChaosRun, a: Account): Promise<number> {
  const jobs = await run.db.jobs
    .find({ accountId: a.id }, { projection: { status: 1, credits: 1 }, timeoutMS: 2000 })
    .toArray();
  const paid = jobs.filter((j) => j.credits.charged !== null && !(j.status === 'failed' && j.credits.refunded));
  return a.credits - fromUnits(paid.reduce((n, j) => n + j.credits.millicredits, 0));
}

async function readBalance(run: ChaosRun, a: Account): Promise<number | null> {
  const r = await fetch(`${run.base}/account/credits`, {
    headers: { authorization: `Bearer ${a.key}` },
    signal: AbortSignal.timeout(10_000),
  }).catch(() => null);
  if (r?.status !== 200) return null;
  return ((await r.json()) as { balance: number }).balance;
}

/** Samples until stopped: the balance read against the truth (both sides of the read), and /readyz. */
function startWatchers(run: ChaosRun, accounts: Account[]) {
  const ticks: BalanceTick[] = [];
  const ready: { at: number; ok: boolean }[] = [];
  let stop = false;
  const balances = (async () => {
    while (!stop) {
      for (const a of accounts) {
        try {
          const before = await truth(run, a);
          const read = await readBalance(run, a);
          const after = await truth(run, a);
          if (read !== null) ticks.push({ at: Date.now(), account: a, read, before, after });
        } catch {
          // the database is away: no truth to compare with
        }
      }
      await sleep(250);
    }
  })();
  const readiness = (async () => {
    while (!stop) {
      const r = await fetch(`http://127.0.0.1:${run.port}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(
        () => null,
      );
      ready.push({ at: Date.now(), ok: r?.status === 200 });
      await sleep(200);
    }
  })();
  return {
    ticks,
    ready,
    stop: async () => {
      stop = true;
      await Promise.all([balances, readiness]);
    },
  };
}

interface Fault {
  name: string;
  /** The API process is killed too (its connections break; the supervisor holds new ones). */
  killsApi?: boolean;
  break(f: DbFaults): Promise<void>;
  mend(f: DbFaults): Promise<void>;
}

const fmt = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : 'n/a');
const msf = (ms: number) => (Number.isFinite(ms) ? `${Math.round(ms)} ms` : 'n/a');

async function burst(run: ChaosRun, faults: DbFaults, accounts: Account[], fault: Fault, tag: string) {
  const logical: Logical[] = [];
  const watch = startWatchers(run, accounts);
  const posts: Promise<void>[] = [];
  let brokeAt = 0;
  let mendedAt = 0;
  let outage: Promise<void> | undefined;
  const t0 = Date.now();
  for (let i = 0; i < JOBS; i++) {
    const l: Logical = { key: `dbf-${run.id}-${tag}-${i}`, account: accounts[i % accounts.length]!, tries: [] };
    logical.push(l);
    posts.push(postTracked(run, l, { prompt: l.key }));
    if (i === Math.floor(JOBS / 3)) {
      outage = (async () => {
        await fault.break(faults);
        brokeAt = Date.now();
        await sleep(OUTAGE_MS);
        await fault.mend(faults);
        mendedAt = Date.now();
      })();
    }
    // A steady rate: the i-th request leaves at i / RATE seconds, whatever the answers do.
    await sleep(Math.max(0, t0 + ((i + 1) * 1000) / RATE - Date.now()));
  }
  await outage;
  await Promise.all(posts);
  const acceptedAt = Date.now();
  await quiet(run, accounts);
  const quietAt = Date.now();
  // Keep reading the balance until it has been exact for 5 s in a row (or 60 s after the work ended).
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(500)) {
    const recent = watch.ticks.filter((t) => t.at > Date.now() - 5000);
    if (recent.length >= 10 && recent.every((t) => t.read === t.before && t.read === t.after)) break;
  }
  await watch.stop();

  return report(run, accounts, fault, { logical, watch, brokeAt, mendedAt, acceptedAt, quietAt });
}

/** The figures of one burst (printed) and whether it passed: nothing lost or doubled, credits exact, answers well-formed. */
async function report(
  run: ChaosRun,
  accounts: Account[],
  fault: Fault,
  b: {
    logical: Logical[];
    watch: ReturnType<typeof startWatchers>;
    brokeAt: number;
    mendedAt: number;
    acceptedAt: number;
    quietAt: number;
  },
) {
  const { logical, watch, brokeAt, mendedAt, acceptedAt, quietAt } = b;
  const jobs = await run.db.jobs
    .find({ accountId: { $in: accounts.map((a) => a.id) }, _id: { $regex: /^code_/ } })
    .toArray();
  const ours = new Set(logical.map((l) => l.key));
  // This burst's jobs, by their prompt (the request's key): a job made by an attempt that never got
  // its 202 counts too (as a duplicate when another attempt made a second one).
  const mine = jobs.filter((j) => ours.has(String(j.input.prompt)));
  const byId = new Map(mine.map((j) => [j._id, j]));
  const lost = logical.filter((l) => !l.jobId || byId.get(l.jobId)?.status !== 'complete');
  const tries = logical.flatMap((l) => l.tries);
  const during = (t: Try) => t.at >= brokeAt && t.at < mendedAt;
  const in503 = tries.filter((t) => t.status === 503);
  const unshaped = tries.filter((t) => t.status !== 202 && !t.shaped);
  const no503RetryAfter = in503.filter((t) => !t.retryAfter);
  const others = tries.filter((t) => t.status !== 202 && t.status !== 503);
  const lat = (xs: Try[]) => xs.filter((t) => t.status === 202).map((t) => t.ms);
  const before = lat(tries.filter((t) => t.at + t.ms < brokeAt));
  const dur = lat(tries.filter(during));
  const after = lat(tries.filter((t) => t.at >= mendedAt));
  // Readiness: the first false after the fault, the first true after recovery that stays true.
  const notReady = watch.ready.find((r) => r.at >= brokeAt && !r.ok);
  const lastFalse = [...watch.ready].reverse().find((r) => !r.ok);
  const readyAgain = lastFalse ? watch.ready.find((r) => r.at > lastFalse.at && r.ok) : undefined;
  // The balance: the last wrong read after recovery; exact from the next unambiguous read on.
  const clear = watch.ticks.filter((t) => t.before === t.after);
  const wrong = clear.filter((t) => t.read !== t.before);
  const wrongAfter = wrong.filter((t) => t.at >= mendedAt);
  const exactAt = wrongAfter.length
    ? (clear.find((t) => t.at > wrongAfter[wrongAfter.length - 1]!.at)?.at ?? Infinity)
    : mendedAt;
  const dev = (xs: BalanceTick[]) =>
    xs.length
      ? accounts
          .filter((a) => xs.some((t) => t.account === a))
          .map((a) => {
            const d = xs.filter((t) => t.account === a).map((t) => t.read - t.before);
            return `${a.label} ${Math.min(...d)} … ${Math.max(...d)}`;
          })
          .join('; ')
      : '0';
  const finals = await Promise.all(
    accounts.map(async (a) => ({
      a,
      read: await readBalance(run, a),
      expected: a.credits - PRICE * jobs.filter((j) => j.accountId === a.id && j.status === 'complete').length,
    })),
  );
  const creditsExact = finals.every((f) => f.read === f.expected);
  const figures: [string, string | number][] = [
    [
      'logical requests (each its own Idempotency-Key) / accepted',
      `${logical.length} / ${logical.filter((l) => l.jobId).length}`,
    ],
    ['jobs created / duplicated', `${mine.length} / ${mine.length - logical.length}`],
    [
      'jobs complete / failed / lost',
      `${mine.filter((j) => j.status === 'complete').length} / ${mine.filter((j) => j.status === 'failed').length} / ${lost.length}`,
    ],
    [
      'credits: final read = expected (both accounts)',
      finals.map((f) => `${f.a.label} ${f.read} = ${f.expected}`).join('; ') + (creditsExact ? '' : ' MISMATCH'),
    ],
    ['balance read exact after recovery', exactAt === Infinity ? 'never' : fmt(Math.max(0, exactAt - mendedAt))],
    [
      'balance read − truth during the outage / after recovery (credits)',
      `${dev(wrong.filter((t) => t.at < mendedAt))} / ${dev(wrongAfter)}`,
    ],
    ['outage (fault → database answering again)', fmt(mendedAt - brokeAt)],
    [
      'answers during the outage: 503 / other non-202 / 202',
      `${tries.filter(during).filter((t) => t.status === 503).length} / ${tries.filter(during).filter((t) => t.status !== 503 && t.status !== 202).length} / ${tries.filter(during).filter((t) => t.status === 202).length}`,
    ],
    [
      '503 latency p50 / max (all 503s)',
      `${msf(
        pct(
          in503.map((t) => t.ms),
          50,
        ),
      )} / ${msf(in503.length ? Math.max(...in503.map((t) => t.ms)) : NaN)}`,
    ],
    [
      'non-202 answers without the Error shape / 503s without Retry-After',
      `${unshaped.length} / ${no503RetryAfter.length}`,
    ],
    [
      'other failures (status: count)',
      [...new Set(others.map((t) => t.status))]
        .map((s) => `${s}: ${others.filter((t) => t.status === s).length}`)
        .join(', ') || 'none',
    ],
    [
      '/readyz false after the fault / true after recovery',
      `${notReady ? msf(notReady.at - brokeAt) : 'never false'} / ${readyAgain ? msf(readyAgain.at - mendedAt) : 'n/a'}`,
    ],
    ['accept latency p50 / p99 before', `${msf(pct(before, 50))} / ${msf(pct(before, 99))}`],
    ['accept latency p50 / p99 during (202s)', `${msf(pct(dur, 50))} / ${msf(pct(dur, 99))} (n=${dur.length})`],
    ['accept latency p50 / p99 after', `${msf(pct(after, 50))} / ${msf(pct(after, 99))}`],
    [
      'last request accepted after recovery / every job finished',
      `${fmt(acceptedAt - mendedAt)} / ${fmt(quietAt - mendedAt)}`,
    ],
  ];
  printFigures(
    `chaos run (database fault: ${fault.name}; ${JOBS} code builds at ${RATE}/s, outage ${OUTAGE_MS} ms)`,
    figures,
  );
  // With the API process killed on purpose, its requests in flight lose their connection and the
  // supervisor holds new ones until a process is up: the answers' rules are the database faults'.
  const answersOk =
    fault.killsApi ||
    (unshaped.length === 0 && no503RetryAfter.length === 0 && !others.some((t) => t.status >= 500 || t.status === 0));
  const ok =
    lost.length === 0 &&
    mine.length === logical.length &&
    creditsExact &&
    answersOk &&
    exactAt - mendedAt <= EXACT_WITHIN_MS;
  if (!ok) console.log(`FAILED: ${fault.name}`);
  return ok;
}

/** Until no job of the accounts is queued or processing (5 minutes at most). */
async function quiet(run: ChaosRun, accounts: Account[]): Promise<void> {
  for (const deadline = Date.now() + 300_000; ; await sleep(250)) {
    const open = await run.db.jobs
      .countDocuments({ accountId: { $in: accounts.map((a) => a.id) }, status: { $in: ['queued', 'processing'] } })
      .catch(() => -1);
    if (open === 0) return;
    if (Date.now() > deadline) throw new Error(`${open} jobs still open`);
  }
}

/** What the processes logged at warn and above, by process and message: what an operator saw. */
function printLogSummary(run: ChaosRun): void {
  const counts = new Map<string, number>();
  for (const l of run.lines()) {
    if (l.level !== 'warn' && l.level !== 'error' && l.level !== 'fatal') continue;
    const k = `${l.service ?? '?'} | ${l.level} | ${l.msg}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  console.log('\nLog lines at warn and above over both runs (process | level | message: count)\n');
  for (const [k, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`- ${k}: ${n}`);
}

export async function runDbFaults(): Promise<boolean> {
  const faults = await startDbFaults(`chaos${randomBytes(3).toString('hex')}`);
  try {
    const run = await startChaosRun({
      name: 'dbfaults',
      jobMs: Number(process.env.CHAOS_JOB_MS ?? 250),
      credits: 100_000,
      env: {
        MONGODB_URL: faults.url,
        POOL_CONCURRENCY: 'code=8',
        ...(process.env.CHAOS_LOG_LEVEL ? { LOG_LEVEL: process.env.CHAOS_LOG_LEVEL } : {}),
      },
    });
    try {
      const accounts = createAccountsRepository(storeOf(run.db));
      const small = await accounts.createAccount({ name: 'dbfaults per-job', plan: 'pro', credits: 5000 });
      const smallKey = (await accounts.forAccount(small._id).createKey()).key;
      const list: Account[] = [
        { id: run.accountId, key: run.key, credits: 100_000, label: 'leased' },
        { id: small._id, key: smallKey, credits: 5000, label: 'per-job' },
      ];
      // Every collection the burst writes exists before the first kill: FerretDB 1.24 creates a
      // collection in two steps, and a SIGKILL between them leaves it unusable (docs/operations.md,
      // "Database outages").
      await Promise.all(
        list.flatMap((a) =>
          [0, 1].map((i) =>
            postTracked(
              run,
              { key: `dbf-${run.id}-warm-${a.label}-${i}`, account: a, tries: [] },
              { prompt: `warm ${a.label} ${i}` },
            ),
          ),
        ),
      );
      await quiet(run, list);
      const a = await burst(
        run,
        faults,
        list,
        {
          name: 'FerretDB killed (SIGKILL) and started again',
          break: (f) => f.killFerretDb(),
          mend: (f) => f.startFerretDb(),
        },
        'a',
      );
      const b = await burst(
        run,
        faults,
        list,
        {
          name: 'PostgreSQL stopped (fast) and started again',
          break: (f) => f.stopPostgres(),
          mend: (f) => f.startPostgres(),
        },
        'b',
      );
      // The crash run of the issue: the API process, the worker process holding jobs and FerretDB
      // killed at once; the supervisor restarts the processes, which start once FerretDB is back.
      const crash: Fault = {
        name: 'API, worker and FerretDB killed at once (SIGKILL), FerretDB started again',
        killsApi: true,
        async break(f) {
          const api = await apiPid(run);
          const held = await run.db.jobs.findOne(
            { status: 'processing', 'lease.owner': { $not: /^retry$/ } },
            { projection: { lease: 1 } },
          );
          const worker = Number(held?.lease?.owner.split(':')[1] ?? 0);
          for (const pid of [api, worker]) if (pid) process.kill(pid, 'SIGKILL');
          await f.killFerretDb();
        },
        mend: (f) => f.startFerretDb(),
      };
      const c = await burst(run, faults, list, crash, 'c');
      printLogSummary(run);
      return a && b && c;
    } finally {
      if (process.env.CHAOS_DB_LOG) writeFileSync(process.env.CHAOS_DB_LOG, run.output());
      await run.close();
    }
  } finally {
    await faults.down();
  }
}
