/**
 * The database server's own lookups: `findOne({ _id })` against `findOne({ key })` (another
 * field, unique, no index) on the same collection, at 100 and at 20,000 documents, with 10
 * concurrent loops from this process. An `_id` lookup should be the fastest query there is: the
 * ratio (by `_id` / by the other field) says whether it is. CPU per lookup of FerretDB and of
 * PostgreSQL is read from /proc, and FerretDB's `explain` says whether the filter was pushed
 * down to PostgreSQL.
 *
 * Against MONGODB_URL (the patched FerretDB services.sh builds); BENCH_FERRETDB_URL points it at
 * another server (for instance a FerretDB built without scripts/ferretdb/id-equality.patch).
 * BENCH_SECONDS (default 3) per round, BENCH_ROUNDS (default 3) rounds each way, alternating.
 */
import { randomBytes } from 'node:crypto';
import { MongoClient, type Collection } from 'mongodb';
import { cpuMeter } from './cpu';
import { row, type Bench, type BenchRow } from './bench';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LOOPS = 10;

interface Doc {
  _id: string;
  key: string;
  accountId: string;
  status: string;
  body: string;
}

/** Lookups per second of `lookup(i)` over `seconds`, LOOPS at once; and FerretDB/PostgreSQL CPU ms per lookup. */
async function measure(lookup: (i: number) => Promise<unknown>, seconds: number) {
  let n = 0;
  const meter = cpuMeter({});
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, loop) => {
      for (let i = loop; performance.now() < end; i += LOOPS) {
        await lookup(i);
        n++;
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  const cpu = meter.stop();
  return { rate: n / s, ferretdb: ((cpu.ferretdb ?? 0) / n) * 1000, postgres: ((cpu.postgres ?? 0) / n) * 1000 };
}

async function compare(col: Collection<Doc>, size: number) {
  const docs = Array.from({ length: size }, (_, i) => ({
    _id: `job_${randomBytes(12).toString('base64url')}`,
    key: `k${i}`,
    accountId: `acct_${i % 10}`,
    status: 'complete',
    body: 'x'.repeat(600),
  }));
  for (let i = 0; i < docs.length; i += 1000) await col.insertMany(docs.slice(i, i + 1000));
  const byId = (i: number) => col.findOne({ _id: docs[i % size]!._id });
  const byKey = (i: number) => col.findOne({ key: docs[i % size]!.key });
  await measure(byId, 0.5);
  await measure(byKey, 0.5);
  const id = { rate: 0, ferretdb: 0, postgres: 0 };
  const key = { rate: 0, ferretdb: 0, postgres: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [byKey, byId] : [byId, byKey];
    for (const f of order) {
      const m = await measure(f, SECONDS);
      const into = f === byId ? id : key;
      into.rate += m.rate / ROUNDS;
      into.ferretdb += m.ferretdb / ROUNDS;
      into.postgres += m.postgres / ROUNDS;
    }
  }
  const explain = async (filter: Record<string, unknown>) => {
    const e = (await col.find(filter).limit(1).explain()) as { pushdown?: boolean; filterPushdown?: boolean };
    return e.filterPushdown ?? e.pushdown ?? 'unknown';
  };
  const cpu = (m: typeof id) =>
    `FerretDB ${m.ferretdb.toFixed(2)} ms, PostgreSQL ${m.postgres.toFixed(2)} ms CPU per lookup`;
  return [
    row(
      `findOne by _id against by another field, ${size} documents`,
      id.rate,
      'lookups/s',
      key.rate,
      `by _id: ${cpu(id)}, pushed down: ${await explain({ _id: docs[0]!._id })}; by key: ${cpu(key)}, pushed down: ${await explain({ key: 'k0' })}`,
      1,
    ),
  ];
}

export const bench: Bench = {
  name: 'database lookups by _id (FerretDB)',
  async run(): Promise<BenchRow[]> {
    const url = process.env.BENCH_FERRETDB_URL ?? process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc';
    const server = url.replace(/\/[^/?]*(\?.*)?$/, '');
    const client = await new MongoClient(`${server}/benchid_${randomBytes(4).toString('hex')}`, {
      maxPoolSize: LOOPS,
    }).connect();
    try {
      const rows: BenchRow[] = [];
      for (const size of [100, 20_000]) rows.push(...(await compare(client.db().collection<Doc>(`docs${size}`), size)));
      return rows;
    } finally {
      await client.db().dropDatabase();
      await client.close();
    }
  },
};
