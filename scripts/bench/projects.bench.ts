/**
 * Projects list benchmark (issue 10 item 12): GET /projects of an account holding 10,000
 * projects (the first page, default limit 20, newest change first), against a bare node:http
 * server running the same find (same filter, sort, limit and projection) on the same database,
 * in its own process. A second baseline runs that find and the count beside it, as the API's
 * page does (the list envelope's `total`). The API runs as `supervisor.ts api` (one API process)
 * on a fresh database; the 10,000 projects go straight into it with insertMany.
 *
 * Measured in turn (value and baselines, rotating which goes first), PROJECTS_BENCH_ROUNDS=2
 * rounds of PROJECTS_BENCH_REQUESTS=8 requests over PROJECTS_BENCH_CONNECTIONS=2 keep-alive
 * connections each, after PROJECTS_BENCH_WARMUP_REQUESTS=1 of each; req/s is requests over wall
 * time, p50 and p99 over every request of every round. Fixed request counts rather than the
 * gateway bench's fixed durations: FerretDB 1.24 does not push sorts down to PostgreSQL (explain
 * says sortPushdown: false), so every page reads and sorts all of the account's documents, and
 * the page's count reads them again; that is half a second or more per request here, for the API
 * and the bare find alike.
 *
 * This module is also the baseline server: forked with BENCH_PROJECTS_BASELINE=find or
 * find+count, it serves `GET /projects` and reports `{ port }` over IPC.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { SCOPES } from '../../contracts/registry';
import { createAccountsRepository } from '../../platform/accounts';
import { connectMongo } from '../../platform/mongo';
import { row, type Bench, type BenchRow } from './bench';
import { startSupervisedApi } from './processes';

// On FerretDB 1.24 one page of a 10,000-project account takes about half a second or more (see
// the header), so a round is a fixed number of requests rather than a fixed duration: enough
// samples whatever the speed, and a known run time.
const CONNECTIONS = Number(process.env.PROJECTS_BENCH_CONNECTIONS ?? 2);
const REQUESTS = Number(process.env.PROJECTS_BENCH_REQUESTS ?? 8);
const ROUNDS = Number(process.env.PROJECTS_BENCH_ROUNDS ?? 2);
const WARMUP = Number(process.env.PROJECTS_BENCH_WARMUP_REQUESTS ?? 1);
const PROJECTS = Number(process.env.BENCH_PROJECTS ?? 10_000);
const PAGE = 20;

/** What the API's first page asks the database (platform/projects/projects.repository.ts list). */
const listFilter = (accountId: string) => ({ accountId, deletedAt: null });
const LIST_SORT = { updatedAt: -1, _id: -1 } as const;
const LIST_PROJECTION = { content: 0, presentation: 0, shares: 0 } as const;

// ---- the baseline server (child process) ---------------------------------------------------

async function serveBaseline(mode: string) {
  const mongo = await new MongoClient(process.env.MONGODB_URL!, { maxPoolSize: Number(process.env.MONGODB_MAX_POOL_SIZE ?? 20) }).connect();
  const col = mongo.db().collection<Record<string, unknown> & { _id: string }>('projects');
  const filter = listFilter(process.env.BASELINE_ACCOUNT_ID!);
  const server = http.createServer((_req, res) => {
    const page = col.find(filter, { projection: LIST_PROJECTION }).sort(LIST_SORT).limit(PAGE + 1).toArray();
    const total = mode === 'find+count' ? col.countDocuments(filter) : Promise.resolve(-1);
    Promise.all([page, total]).then(
      ([rows, n]) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data: rows.slice(0, PAGE), total: n, cursor: rows.length > PAGE ? 'more' : null }));
      },
      (err) => {
        res.writeHead(500);
        res.end(String(err));
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void mongo.close().finally(() => process.exit(0)));
  });
}

if (process.env.BENCH_PROJECTS_BASELINE) await serveBaseline(process.env.BENCH_PROJECTS_BASELINE);

async function startBaseline(mode: 'find' | 'find+count', env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, BENCH_PROJECTS_BASELINE: mode },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => Promise.reject(new Error(`baseline ${mode} exited`)))])) as [{ port: number }];
  return {
    url: `http://127.0.0.1:${message.port}/projects`,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    },
  };
}

// ---- measuring -----------------------------------------------------------------------------

interface Target {
  url: string;
  headers?: Record<string, string>;
}
interface Load {
  rps: number;
  latencies: number[];
  errors: number;
}

/** `requests` GETs over `CONNECTIONS` concurrent keep-alive connections. */
async function burst(t: Target, requests: number): Promise<Load> {
  const latencies: number[] = [];
  let errors = 0;
  let issued = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (issued < requests) {
        issued++;
        const start = performance.now();
        try {
          const r = await fetch(t.url, { headers: t.headers });
          await r.arrayBuffer();
          if (r.status === 200) latencies.push(performance.now() - start);
          else errors++;
        } catch {
          errors++;
        }
      }
    }),
  );
  return { rps: latencies.length / ((performance.now() - t0) / 1000), latencies, errors };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  n: number;
  errors: number;
}

/** Subject and each baseline in turn, ROUNDS rounds, rotating which goes first. */
async function compare(subject: Target, baselines: Target[]): Promise<Figures[]> {
  const all = [subject, ...baselines];
  if (WARMUP > 0) for (const t of all) await burst(t, WARMUP);
  const results: Load[][] = all.map(() => []);
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < all.length; k++) {
      const j = (k + i) % all.length;
      results[j]!.push(await burst(all[j]!, REQUESTS));
    }
  }
  return results.map((ls) => {
    const lat = ls.flatMap((l) => l.latencies);
    return { rps: ls.reduce((a, l) => a + l.rps, 0) / ls.length, p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length, errors: ls.reduce((a, l) => a + l.errors, 0) };
  });
}

/** The bench account (key with every scope) and PROJECTS projects of it, inserted straight into the API's database. */
async function prepare(mongoUrl: string) {
  const db = await connectMongo(mongoUrl);
  try {
    const accounts = createAccountsRepository(db);
    const account = await accounts.createAccount({ name: 'bench', plan: 'pro', credits: 0 });
    const { key } = await accounts.createKey(account._id, { name: 'bench', scopes: [...SCOPES] });
    const col = db.db.collection<Record<string, unknown> & { _id: string }>('projects');
    const t0 = Date.now() - PROJECTS * 1000;
    const kinds = [
      { kind: 'flowchart', projectType: 'chart', content: { nodes: [{ id: 'a', label: 'Start', shape: 'start', x: 40, y: 40 }, { id: 'b', label: 'Do the thing', shape: 'process', x: 40, y: 184 }], edges: [{ id: 'e1', from: 'a', to: 'b' }] } },
      { kind: 'whiteboard', projectType: 'chart', content: { background: '#ffffff', elements: [] } },
      { kind: 'notes', projectType: 'notes', content: { markdown: '# Notes\n\n' + 'Some words of a note. '.repeat(15) } },
    ];
    const started = Date.now();
    for (let from = 0; from < PROJECTS; from += 1000) {
      const batch = [];
      for (let i = from; i < Math.min(PROJECTS, from + 1000); i++) {
        const k = kinds[i % kinds.length]!;
        const at = new Date(t0 + i * 1000);
        batch.push({
          _id: `prj_bench${String(i).padStart(15, '0')}`,
          accountId: account._id,
          name: `Project ${i}`,
          description: i % 2 ? 'A project made for the bench' : '',
          kind: k.kind,
          projectType: k.projectType,
          version: 1,
          content: k.content,
          shares: [],
          canvasMode: k.kind,
          tags: i % 5 ? ['bench'] : ['bench', 'five'],
          isStarred: i % 7 === 0,
          createdAt: at,
          updatedAt: at,
          deletedAt: null,
        });
      }
      await col.insertMany(batch, { ordered: false });
    }
    return { accountId: account._id, auth: { authorization: `Bearer ${key}` }, insertSeconds: (Date.now() - started) / 1000 };
  } finally {
    await db.close();
  }
}

export const bench: Bench = {
  name: 'projects list (issue 10)',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const { accountId, auth, insertSeconds } = await prepare(api.config.MONGODB_URL);
      // One request first: it creates the list indexes, and checks the page is what we measure.
      const t0 = performance.now();
      const first = await fetch(`${api.url}/projects`, { headers: auth });
      const firstMs = performance.now() - t0;
      const body = (await first.json()) as { data: unknown[]; total: number };
      if (first.status !== 200 || body.total !== PROJECTS || body.data.length !== PAGE) throw new Error(`GET /projects answered ${first.status}, total ${body.total}, ${body.data?.length} items`);
      const env = { MONGODB_URL: api.config.MONGODB_URL, BASELINE_ACCOUNT_ID: accountId };
      const [find, findCount] = await Promise.all([startBaseline('find', env), startBaseline('find+count', env)]);
      try {
        const [value, base, base2] = await compare({ url: `${api.url}/projects`, headers: auth }, [{ url: find.url }, { url: findCount.url }]);
        const errs = value!.errors + base!.errors + base2!.errors;
        const note = `${PROJECTS} projects in the account (inserted in ${insertSeconds.toFixed(1)} s), first page of ${PAGE}; ${ROUNDS} rounds x ${REQUESTS} requests over ${CONNECTIONS} connections each; first request alone ${firstMs.toFixed(0)} ms${errs ? `; not 200 or failed: ${errs}` : ''}`;
        const ms = (f: Figures) => `p50 ${f.p50.toFixed(0)} ms, p99 ${f.p99.toFixed(0)} ms, ${f.rps.toFixed(2)} req/s (n = ${f.n})`;
        return [
          row('(f) GET /projects, 10,000 projects, req/s', value!.rps, 'req/s', base!.rps, `baseline: node:http + the same find (filter, sort, limit ${PAGE + 1}, projection); ${note}`),
          row('(f) GET /projects, 10,000 projects, req/s vs find + count', value!.rps, 'req/s', base2!.rps, `baseline: node:http + the same find and countDocuments side by side, as the API page does (total): ${ms(base2!)}`),
          row('(f) GET /projects, 10,000 projects, p50', value!.p50, 'ms', base!.p50, `baseline: the bare find; n = ${value!.n} / ${base!.n}`),
          row('(f) GET /projects, 10,000 projects, p99', value!.p99, 'ms', base!.p99, 'baseline: the bare find'),
        ];
      } finally {
        await Promise.all([find.stop(), findCount.stop()]);
      }
    } finally {
      await api.stop();
    }
  },
};
