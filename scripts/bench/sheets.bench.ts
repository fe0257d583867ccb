/**
 * Sheets benchmark (issue 10 item 12), on a sheet of SHEETS_BENCH_ROWS=10,000 rows x 10 columns
 * created through the API (one supervised API process, fresh database):
 *  (g) ops applied per second: POST /sheets/{id}/ops setting one cell of a random row, each a
 *      merged commit (validation, diff, one new row block, the commit, the head's
 *      compare-and-swap), over SHEETS_BENCH_CONNECTIONS=4 connections on the same sheet.
 *      Baseline 1: a bare node:http server doing findOne + conditional updateOne ($inc version)
 *      of one small document by _id: the least any versioned write costs on this database.
 *      Baseline 2 (for scale): the same find + updateOne of the whole 10,000-row grid held as
 *      one document of nested values, the naive layout (see platform/sheets/grid.ts).
 *      Also the latency of a whole-grid op (sort of the 10,000 rows).
 *  (h) range reads of 1,000 cells: GET /sheets/{id}/range for 100 rows x 10 columns at a random
 *      place, req/s, p50 and p99. Baseline: a bare node:http server making the same two reads
 *      (the head by _id, the covering blocks by _id) and slicing the cells.
 *
 * Each figure and its baselines are measured in turn, SHEETS_BENCH_ROUNDS=2 rounds of a fixed
 * number of requests (rotating which goes first), after one warm-up request each. The baselines
 * run in their own processes: this module forked with BENCH_SHEETS_BASELINE set.
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

const ROWS = Number(process.env.SHEETS_BENCH_ROWS ?? 10_000);
const COLS = 10;
const CONNECTIONS = Number(process.env.SHEETS_BENCH_CONNECTIONS ?? 4);
const ROUNDS = Number(process.env.SHEETS_BENCH_ROUNDS ?? 2);
const OPS = Number(process.env.SHEETS_BENCH_OPS ?? 60);
const NAIVE_OPS = Number(process.env.SHEETS_BENCH_NAIVE_OPS ?? 6);
const SORTS = Number(process.env.SHEETS_BENCH_SORTS ?? 3);
const RANGES = Number(process.env.SHEETS_BENCH_RANGES ?? 200);
const RANGE_ROWS = 100;

const randomRow = () => 1 + Math.floor(Math.random() * (ROWS - RANGE_ROWS));

// ---- baseline servers (child processes) ----------------------------------------------------

async function serveBaseline(mode: string) {
  const mongo = await new MongoClient(process.env.MONGODB_URL!, { maxPoolSize: 20 }).connect();
  const db = mongo.db();
  const heads = db.collection<Record<string, any> & { _id: string }>('sheets');
  const blocks = db.collection<Record<string, any> & { _id: string }>('sheet_blocks');
  const scratch = db.collection<Record<string, any> & { _id: string }>('bench_scratch');
  const sheetId = process.env.BENCH_SHEET_ID!;
  const answer = (res: http.ServerResponse, p: Promise<unknown>) =>
    p.then(
      (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
      (err) => res.writeHead(500).end(String(err)),
    );
  const server = http.createServer((req, res) => {
    if (mode === 'cas' || mode === 'naive') {
      // A versioned write of one document: read it, write it back conditionally.
      const id = mode === 'cas' ? 'small' : 'grid';
      return void answer(
        res,
        (async () => {
          const doc = await scratch.findOne({ _id: id });
          const r = Math.floor(Math.random() * ROWS);
          const set = mode === 'cas' ? { value: Math.random() } : { [`rows.${r}.v.1`]: Math.random() };
          const u = await scratch.updateOne({ _id: id, version: doc!.version }, { $set: set, $inc: { version: 1 } });
          return { ok: u.matchedCount };
        })(),
      );
    }
    // range: the head, then the blocks covering the rows, sliced.
    const url = new URL(req.url!, 'http://x');
    const start = Number(url.searchParams.get('row')) - 1;
    return void answer(
      res,
      (async () => {
        const head = await heads.findOne({ _id: sheetId });
        let at = 0;
        const need: { id: string; from: number }[] = [];
        for (const b of (JSON.parse(head!.tree as string) as { blocks: { id: string; rows: number }[] }).blocks) {
          if (at + b.rows > start && at < start + RANGE_ROWS) need.push({ id: b.id, from: at });
          at += b.rows;
        }
        const docs = await Promise.all(need.map((n) => blocks.findOne({ _id: n.id })));
        const byId = new Map(docs.map((d) => [d!._id, JSON.parse(d!.data as string) as unknown[][]]));
        const rows = need.flatMap((n) => byId.get(n.id)!.map((r, i) => ({ i: n.from + i, v: r.slice(1) }))).filter((r) => r.i >= start && r.i < start + RANGE_ROWS);
        return { rows: rows.map((r) => r.v) };
      })(),
    );
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void mongo.close().finally(() => process.exit(0)));
  });
}

if (process.env.BENCH_SHEETS_BASELINE) await serveBaseline(process.env.BENCH_SHEETS_BASELINE);

async function startBaseline(mode: 'cas' | 'naive' | 'range', env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, BENCH_SHEETS_BASELINE: mode },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => Promise.reject(new Error(`baseline ${mode} exited`)))])) as [{ port: number }];
  return {
    url: `http://127.0.0.1:${message.port}`,
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

/** One request: a fresh method, URL and body each time. */
type Target = () => { url: string; method?: string; headers?: Record<string, string>; body?: string };
interface Load {
  rps: number;
  latencies: number[];
  errors: number;
}

async function burst(t: Target, requests: number, connections = CONNECTIONS): Promise<Load> {
  const latencies: number[] = [];
  let errors = 0;
  let issued = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (issued < requests) {
        issued++;
        const q = t();
        const start = performance.now();
        try {
          const r = await fetch(q.url, { method: q.method ?? 'GET', headers: q.headers, body: q.body });
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

/** Each target in turn, ROUNDS rounds, rotating which goes first; `counts` requests per round each. */
async function compare(targets: Target[], counts: number[]): Promise<Figures[]> {
  for (const t of targets) await burst(t, 1, 1);
  const results: Load[][] = targets.map(() => []);
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < targets.length; k++) {
      const j = (k + i) % targets.length;
      results[j]!.push(await burst(targets[j]!, counts[j]!));
    }
  }
  return results.map((ls) => {
    const lat = ls.flatMap((l) => l.latencies);
    return { rps: ls.reduce((a, l) => a + l.rps, 0) / ls.length, p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length, errors: ls.reduce((a, l) => a + l.errors, 0) };
  });
}

const ms = (f: Figures) => `p50 ${f.p50.toFixed(0)} ms, p99 ${f.p99.toFixed(0)} ms, ${f.rps.toFixed(1)} req/s (n = ${f.n}${f.errors ? `, ${f.errors} failed` : ''})`;

export const bench: Bench = {
  name: 'sheets ops and ranges (issue 10)',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const db = await connectMongo(api.config.MONGODB_URL);
      let auth: Record<string, string>;
      try {
        const accounts = createAccountsRepository(db);
        const account = await accounts.createAccount({ name: 'bench', plan: 'pro', credits: 0 });
        const { key } = await accounts.createKey(account._id, { name: 'bench', scopes: [...SCOPES] });
        auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      } finally {
        await db.close();
      }
      const columns = Array.from({ length: COLS }, (_, c) => ({ name: `c${c}`, type: c === 0 ? 'string' : c === COLS - 1 ? 'date' : 'number' }));
      const rows = Array.from({ length: ROWS }, (_, r) => Array.from({ length: COLS }, (_, c) => (c === 0 ? `item ${r}` : c === COLS - 1 ? '2024-05-01' : r * c)));
      const t0 = performance.now();
      const created = await fetch(`${api.url}/sheets`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'bench', columns, rows }) });
      const createMs = performance.now() - t0;
      if (created.status !== 201) throw new Error(`POST /sheets answered ${created.status}: ${await created.text()}`);
      const sheet = (await created.json()) as { id: string };

      // Scratch documents of the write baselines, beside the API's data in the same database.
      const mongo = await new MongoClient(api.config.MONGODB_URL).connect();
      try {
        const scratch = mongo.db().collection<Record<string, unknown> & { _id: string }>('bench_scratch');
        await scratch.insertMany([
          { _id: 'small', version: 1, value: 0 },
          { _id: 'grid', version: 1, rows: rows.map((v, i) => ({ id: i + 1, v })) },
        ]);
      } finally {
        await mongo.close();
      }

      const env = { MONGODB_URL: api.config.MONGODB_URL, BENCH_SHEET_ID: sheet.id };
      const [cas, naive, range] = await Promise.all([startBaseline('cas', env), startBaseline('naive', env), startBaseline('range', env)]);
      try {
        const opTarget: Target = () => ({ url: `${api.url}/sheets/${sheet.id}/ops`, method: 'POST', headers: auth, body: JSON.stringify({ ops: [{ op: 'set', cell: `B${randomRow()}`, value: Math.random() }] }) });
        const [op, base, naiveBase] = await compare([opTarget, () => ({ url: cas.url, method: 'POST' }), () => ({ url: naive.url, method: 'POST' })], [OPS, OPS, NAIVE_OPS]);

        const sortTarget: Target = () => ({ url: `${api.url}/sheets/${sheet.id}/ops`, method: 'POST', headers: auth, body: JSON.stringify({ ops: [{ op: 'sort', column: 'c1', direction: Math.random() < 0.5 ? 'asc' : 'desc' }] }) });
        const sorts = await burst(sortTarget, SORTS, 1);
        const sortP50 = percentile(sorts.latencies, 50);

        const rangeTarget: Target = () => {
          const r = randomRow();
          return { url: `${api.url}/sheets/${sheet.id}/range?range=A${r}:J${r + RANGE_ROWS - 1}`, headers: auth };
        };
        const [rg, rgBase] = await compare([rangeTarget, () => ({ url: `${range.url}/?row=${randomRow()}` })], [RANGES, RANGES]);

        const versions = (await (await fetch(`${api.url}/sheets/${sheet.id}`, { headers: auth })).json()) as { version: number };
        const note = `${ROWS} rows x ${COLS} columns (created in ${createMs.toFixed(0)} ms through POST /sheets); ${ROUNDS} rounds, ${CONNECTIONS} connections; sheet at version ${versions.version} after the run`;
        return [
          row('(g) sheet ops (set one cell), 10,000-row sheet, ops/s', op!.rps, 'ops/s', base!.rps, `each a merged commit; ${ms(op!)}; baseline: node:http + findOne + conditional updateOne of one small document, ${ms(base!)}; ${note}`),
          row('(g) sheet ops, 10,000-row sheet, ops/s vs whole grid as one document', op!.rps, 'ops/s', naiveBase!.rps, `baseline: node:http + findOne + conditional updateOne of the same 10,000 rows held as one document (the layout not chosen): ${ms(naiveBase!)}`),
          row('(g) sheet ops, 10,000-row sheet, p50', op!.p50, 'ms', base!.p50, `p99 ${op!.p99.toFixed(0)} ms vs ${base!.p99.toFixed(0)} ms`),
          row('(g) whole-grid op (sort 10,000 rows), p50', sortP50, 'ms', undefined, `${sorts.latencies.length} sorts, one at a time${sorts.errors ? `, ${sorts.errors} failed` : ''}`),
          row('(h) range read of 1,000 cells, req/s', rg!.rps, 'req/s', rgBase!.rps, `100 rows x 10 columns at a random place; ${ms(rg!)}; baseline: node:http + the same two reads (head, covering blocks) and the slice, ${ms(rgBase!)}`),
          row('(h) range read of 1,000 cells, p50', rg!.p50, 'ms', rgBase!.p50),
          row('(h) range read of 1,000 cells, p99', rg!.p99, 'ms', rgBase!.p99),
        ];
      } finally {
        await Promise.all([cas.stop(), naive.stop(), range.stop()]);
      }
    } finally {
      await api.stop();
    }
  },
};
