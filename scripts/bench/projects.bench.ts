/**
 * Projects list benchmark: GET /projects of an account holding 10,000
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
import { connectMongo } from '../../platform/infra/mongo';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount, compareRounds, type Figures } from './load';
import { forkBaseline, serveBaselineWhen, startSupervisedApi } from './processes';

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

const BASELINE = 'BENCH_PROJECTS_BASELINE';

await serveBaselineWhen(
  BASELINE,
  (mode, mongo) => {
    const col = mongo.db().collection<Record<string, unknown> & { _id: string }>('projects');
    const filter = listFilter(process.env.BASELINE_ACCOUNT_ID!);
    return (_req, res) => {
      const page = col
        .find(filter, { projection: LIST_PROJECTION })
        .sort(LIST_SORT)
        .limit(PAGE + 1)
        .toArray();
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
    };
  },
  { maxPoolSize: Number(process.env.MONGODB_MAX_POOL_SIZE ?? 20) },
);

/** The bench account (key with every scope) and PROJECTS projects of it, inserted straight into the API's database. */
async function prepare(mongoUrl: string) {
  const db = await connectMongo(mongoUrl);
  try {
    const { accountId, auth } = await benchAccount(db);
    const col = db.db.collection<Record<string, unknown> & { _id: string }>('projects');
    const t0 = Date.now() - PROJECTS * 1000;
    const kinds = [
      {
        kind: 'flowchart',
        projectType: 'chart',
        content: {
          nodes: [
            { id: 'a', label: 'Start', shape: 'start', x: 40, y: 40 },
            { id: 'b', label: 'Do the thing', shape: 'process', x: 40, y: 184 },
          ],
          edges: [{ id: 'e1', from: 'a', to: 'b' }],
        },
      },
      { kind: 'whiteboard', projectType: 'chart', content: { background: '#ffffff', elements: [] } },
      {
        kind: 'notes',
        projectType: 'notes',
        content: { markdown: `# Notes\n\n${'Some words of a note. '.repeat(15)}` },
      },
    ];
    const started = Date.now();
    for (let from = 0; from < PROJECTS; from += 1000) {
      const batch = [];
      for (let i = from; i < Math.min(PROJECTS, from + 1000); i++) {
        const k = kinds[i % kinds.length]!;
        const at = new Date(t0 + i * 1000);
        batch.push({
          _id: `prj_bench${String(i).padStart(15, '0')}`,
          accountId,
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
    return { accountId, auth, insertSeconds: (Date.now() - started) / 1000 };
  } finally {
    await db.close();
  }
}

export const bench: Bench = {
  name: 'projects list',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const { accountId, auth, insertSeconds } = await prepare(api.config.MONGODB_URL);
      // One request first: it creates the list indexes, and checks the page is what we measure.
      const t0 = performance.now();
      const first = await fetch(`${api.url}/projects`, { headers: auth });
      const firstMs = performance.now() - t0;
      const body = (await first.json()) as { data: unknown[]; total: number };
      if (first.status !== 200 || body.total !== PROJECTS || body.data.length !== PAGE)
        throw new Error(`GET /projects answered ${first.status}, total ${body.total}, ${body.data?.length} items`);
      const env = { MONGODB_URL: api.config.MONGODB_URL, BASELINE_ACCOUNT_ID: accountId };
      const [find, findCount] = await Promise.all([
        forkBaseline(import.meta.url, BASELINE, 'find', env),
        forkBaseline(import.meta.url, BASELINE, 'find+count', env),
      ]);
      try {
        const [value, base, base2] = await compareRounds(
          [
            () => ({ url: `${api.url}/projects`, headers: auth }),
            () => ({ url: `${find.url}/projects` }),
            () => ({ url: `${findCount.url}/projects` }),
          ],
          {
            rounds: ROUNDS,
            requests: REQUESTS,
            connections: CONNECTIONS,
            warmup: { requests: WARMUP },
          },
        );
        const errs = value!.errors + base!.errors + base2!.errors;
        const note = `${PROJECTS} projects in the account (inserted in ${insertSeconds.toFixed(1)} s), first page of ${PAGE}; ${ROUNDS} rounds x ${REQUESTS} requests over ${CONNECTIONS} connections each; first request alone ${firstMs.toFixed(0)} ms${errs ? `; not 200 or failed: ${errs}` : ''}`;
        const ms = (f: Figures) =>
          `p50 ${f.p50.toFixed(0)} ms, p99 ${f.p99.toFixed(0)} ms, ${f.rps.toFixed(2)} req/s (n = ${f.n})`;
        return [
          row(
            '(f) GET /projects, 10,000 projects, req/s',
            value!.rps,
            'req/s',
            base!.rps,
            `baseline: node:http + the same find (filter, sort, limit ${PAGE + 1}, projection); ${note}`,
          ),
          row(
            '(f) GET /projects, 10,000 projects, req/s vs find + count',
            value!.rps,
            'req/s',
            base2!.rps,
            `baseline: node:http + the same find and countDocuments side by side, as the API page does (total): ${ms(base2!)}`,
          ),
          row(
            '(f) GET /projects, 10,000 projects, p50',
            value!.p50,
            'ms',
            base!.p50,
            `baseline: the bare find; n = ${value!.n} / ${base!.n}`,
          ),
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
