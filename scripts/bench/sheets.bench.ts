/**
 * Sheets benchmark, on a sheet of SHEETS_BENCH_ROWS=10,000 rows x 10 columns
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
import type http from 'node:http';
import { MongoClient } from 'mongodb';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount, compareRounds, type Figures, loadRun, percentile, type Target } from './load';
import { forkBaseline, serveBaselineWhen, startSupervisedApi } from './processes';

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

const BASELINE = 'BENCH_SHEETS_BASELINE';

await serveBaselineWhen(BASELINE, (mode, mongo) => {
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
  return (req, res) => {
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
        const rows = need
          .flatMap((n) => byId.get(n.id)!.map((r, i) => ({ i: n.from + i, v: r.slice(1) })))
          .filter((r) => r.i >= start && r.i < start + RANGE_ROWS);
        return { rows: rows.map((r) => r.v) };
      })(),
    );
  };
});

// ---- measuring -----------------------------------------------------------------------------

/** Each target in turn, ROUNDS rounds over CONNECTIONS connections, rotating which goes first, after one request each alone; `counts` requests per round each. */
const compare = (targets: Target[], counts: number[]) =>
  compareRounds(targets, {
    rounds: ROUNDS,
    connections: CONNECTIONS,
    requests: counts,
    warmup: { requests: 1, connections: 1 },
  });

const ms = (f: Figures) =>
  `p50 ${f.p50.toFixed(0)} ms, p99 ${f.p99.toFixed(0)} ms, ${f.rps.toFixed(1)} req/s (n = ${f.n}${f.errors ? `, ${f.errors} failed` : ''})`;

export const bench: Bench = {
  name: 'sheets ops and ranges',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const auth = { ...(await benchAccount(api.config.MONGODB_URL)).auth, 'content-type': 'application/json' };
      const columns = Array.from({ length: COLS }, (_, c) => ({
        name: `c${c}`,
        type: c === 0 ? 'string' : c === COLS - 1 ? 'date' : 'number',
      }));
      const rows = Array.from({ length: ROWS }, (_, r) =>
        Array.from({ length: COLS }, (_, c) => (c === 0 ? `item ${r}` : c === COLS - 1 ? '2024-05-01' : r * c)),
      );
      const t0 = performance.now();
      const created = await fetch(`${api.url}/sheets`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: 'bench', columns, rows }),
      });
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
      const baseline = (mode: 'cas' | 'naive' | 'range') => forkBaseline(import.meta.url, BASELINE, mode, env);
      const [cas, naive, range] = await Promise.all([baseline('cas'), baseline('naive'), baseline('range')]);
      try {
        const opTarget: Target = () => ({
          url: `${api.url}/sheets/${sheet.id}/ops`,
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ ops: [{ op: 'set', cell: `B${randomRow()}`, value: Math.random() }] }),
        });
        const [op, base, naiveBase] = await compare(
          [opTarget, () => ({ url: cas.url, method: 'POST' }), () => ({ url: naive.url, method: 'POST' })],
          [OPS, OPS, NAIVE_OPS],
        );

        const sortTarget: Target = () => ({
          url: `${api.url}/sheets/${sheet.id}/ops`,
          method: 'POST',
          headers: auth,
          body: JSON.stringify({
            ops: [{ op: 'sort', column: 'c1', direction: Math.random() < 0.5 ? 'asc' : 'desc' }],
          }),
        });
        const sorts = await loadRun(sortTarget, { requests: SORTS, connections: 1 });
        const sortP50 = percentile(sorts.latencies, 50);

        const rangeTarget: Target = () => {
          const r = randomRow();
          return { url: `${api.url}/sheets/${sheet.id}/range?range=A${r}:J${r + RANGE_ROWS - 1}`, headers: auth };
        };
        const [rg, rgBase] = await compare(
          [rangeTarget, () => ({ url: `${range.url}/?row=${randomRow()}` })],
          [RANGES, RANGES],
        );

        const versions = (await (await fetch(`${api.url}/sheets/${sheet.id}`, { headers: auth })).json()) as {
          version: number;
        };
        const note = `${ROWS} rows x ${COLS} columns (created in ${createMs.toFixed(0)} ms through POST /sheets); ${ROUNDS} rounds, ${CONNECTIONS} connections; sheet at version ${versions.version} after the run`;
        return [
          row(
            '(g) sheet ops (set one cell), 10,000-row sheet, ops/s',
            op!.rps,
            'ops/s',
            base!.rps,
            `each a merged commit; ${ms(op!)}; baseline: node:http + findOne + conditional updateOne of one small document, ${ms(base!)}; ${note}`,
          ),
          row(
            '(g) sheet ops, 10,000-row sheet, ops/s vs whole grid as one document',
            op!.rps,
            'ops/s',
            naiveBase!.rps,
            `baseline: node:http + findOne + conditional updateOne of the same 10,000 rows held as one document (the layout not chosen): ${ms(naiveBase!)}`,
          ),
          row(
            '(g) sheet ops, 10,000-row sheet, p50',
            op!.p50,
            'ms',
            base!.p50,
            `p99 ${op!.p99.toFixed(0)} ms vs ${base!.p99.toFixed(0)} ms`,
          ),
          row(
            '(g) whole-grid op (sort 10,000 rows), p50',
            sortP50,
            'ms',
            undefined,
            `${sorts.latencies.length} sorts, one at a time${sorts.errors ? `, ${sorts.errors} failed` : ''}`,
          ),
          row(
            '(h) range read of 1,000 cells, req/s',
            rg!.rps,
            'req/s',
            rgBase!.rps,
            `100 rows x 10 columns at a random place; ${ms(rg!)}; baseline: node:http + the same two reads (head, covering blocks) and the slice, ${ms(rgBase!)}`,
          ),
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
