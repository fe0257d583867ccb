/**
 * Drive search benchmark (issue 11 item 9, search part): GET /drive/search latency over an account
 * holding 10,000 files with extracted text, against the bare query the index makes.
 *
 * The files, their texts, the posting lists and the text pages go straight into the API's database
 * in bulk (insertMany), built with the index's own encoding (platform/drive/search-index.ts): each
 * file has a name of three words, a tag, and a text of 50 to 100 words drawn from a vocabulary of
 * DRIVE_SEARCH_BENCH_VOCABULARY=3,000 made-up words with a Zipf distribution (the commonest word
 * is in nearly every file, the rarest in a handful), like the words of real documents.
 *
 * Queries: a fixed, seeded mix of one- and two-word queries over common, middling and rare words
 * (one in five holds one of the ten commonest words), default limit 20.
 *
 * Baseline: a bare node:http server in its own process making the same database reads the index
 * makes for a query, and nothing else: one findOne by `_id` per word (the posting list), the
 * intersection and ranking in memory, then the 21 best files by parallel findOne by `_id`, and the
 * text page of each hit (findOne by `_id`), answered as JSON (in the same collections). The API
 * adds authentication, the rate limit, the audit entry, the team lookup, re-checking each hit's
 * name, tags and description, snippets and the response contract.
 *
 * Measured in turn (rotating which goes first) DRIVE_SEARCH_BENCH_ROUNDS=2 rounds of
 * DRIVE_SEARCH_BENCH_REQUESTS=150 requests over DRIVE_SEARCH_BENCH_CONNECTIONS=2 keep-alive
 * connections, after 10 warm-up requests of each.
 *
 * This module is also the baseline server: forked with BENCH_DRIVE_SEARCH_BASELINE=1 it serves
 * `GET /?q=…` and reports `{ port }` over IPC.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { createAccountsRepository } from '../../platform/accounts';
import type { DriveFileDoc, DriveTextDoc } from '../../platform/drive/drive.types';
import { encodeEntry, FIELD_BITS, indexCollections, metaMasks, pageId, pageOf, postingsId, DRIVE_INDEX_LIMITS } from '../../platform/drive/search-index';
import { COLLECTIONS, connectMongo } from '../../platform/mongo';
import { row, type Bench, type BenchRow } from './bench';
import { startSupervisedApi } from './processes';

const FILES = Number(process.env.DRIVE_SEARCH_BENCH_FILES ?? 10_000);
const VOCABULARY = Number(process.env.DRIVE_SEARCH_BENCH_VOCABULARY ?? 3000);
const ROUNDS = Number(process.env.DRIVE_SEARCH_BENCH_ROUNDS ?? 2);
const REQUESTS = Number(process.env.DRIVE_SEARCH_BENCH_REQUESTS ?? 150);
const CONNECTIONS = Number(process.env.DRIVE_SEARCH_BENCH_CONNECTIONS ?? 2);
const WARMUP = 10;
const LIMIT = 20;

// ---- data ----------------------------------------------------------------------------------

/** Deterministic PRNG (mulberry32). */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** VOCABULARY distinct made-up words of two to four syllables. */
function vocabulary(n: number): string[] {
  const on = ['b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'br', 'st', 'tr', 'pl'];
  const nu = ['a', 'e', 'i', 'o', 'u', 'ai', 'ou'];
  const rand = rng(7);
  const out = new Set<string>();
  while (out.size < n) {
    const syl = 2 + Math.floor(rand() * 3);
    let w = '';
    for (let i = 0; i < syl; i++) w += on[Math.floor(rand() * on.length)]! + nu[Math.floor(rand() * nu.length)]!;
    out.add(w);
  }
  return [...out];
}

/** A Zipf (s = 1) sampler over ranks 0..n-1. */
function zipf(n: number, rand: () => number) {
  const cdf: number[] = [];
  let sum = 0;
  for (let i = 1; i <= n; i++) cdf.push((sum += 1 / i));
  return () => {
    const x = rand() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** The queries: seeded mix of one and two words, common to rare. */
function queries(words: string[]): string[] {
  const rand = rng(11);
  const pick = (lo: number, hi: number) => words[lo + Math.floor(rand() * (hi - lo))]!;
  const out: string[] = [];
  for (let i = 0; i < 50; i++) {
    const k = i % 5;
    if (k === 0) out.push(pick(0, 10)); // a very common word: long posting lists
    else if (k === 1) out.push(pick(10, 200));
    else if (k === 2) out.push(pick(200, words.length)); // rare
    else if (k === 3) out.push(`${pick(10, 200)} ${pick(10, 200)}`);
    else out.push(`${pick(0, 50)} ${pick(200, words.length)}`);
  }
  return out;
}

/** The bench account (a key with drive:read) and FILES files with their texts, postings and pages. */
export async function prepare(mongoUrl: string) {
  const db = await connectMongo(mongoUrl);
  try {
    const accounts = createAccountsRepository(db);
    const account = await accounts.createAccount({ name: 'bench', plan: 'pro', credits: 0 });
    const { key } = await accounts.createKey(account._id, { name: 'bench', scopes: ['drive:read'] });
    const words = vocabulary(VOCABULARY);
    const rand = rng(3);
    const draw = zipf(words.length, rand);
    const started = Date.now();
    const postings = new Map<string, string[]>();
    const files = db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
    const texts = db.db.collection<DriveTextDoc>(COLLECTIONS.driveTexts);
    /** Documents inserted in bulk, 500 a command. */
    const insertAll = async (docs: { _id: string }[], name: string) => {
      for (let i = 0; i < docs.length; i += 500) await db.db.collection<{ _id: string }>(name).insertMany(docs.slice(i, i + 500), { ordered: false });
    };
    const t0 = Date.now() - FILES * 1000;
    let fileBatch: DriveFileDoc[] = [];
    let textBatch: DriveTextDoc[] = [];
    let pageBatch: { _id: string; s: number; t: string }[] = [];
    const flush = async () => {
      await Promise.all([files.insertMany(fileBatch, { ordered: false }), texts.insertMany(textBatch, { ordered: false }), insertAll(pageBatch, indexCollections.pages)]);
      fileBatch = [];
      textBatch = [];
      pageBatch = [];
    };
    for (let i = 0; i < FILES; i++) {
      const id = `dfl_bench${String(i).padStart(15, '0')}`;
      const at = new Date(t0 + i * 1000);
      const n = 50 + Math.floor(rand() * 51);
      const body = Array.from({ length: n }, () => words[draw()]!).join(' ');
      const name = `${words[draw()]} ${words[draw()]} ${i}.txt`;
      const file: DriveFileDoc = {
        _id: id, accountId: account._id, teamId: null, name, nameKey: name.toLowerCase(), ext: 'txt', kind: 'text', mimeType: 'text/plain', sizeBytes: body.length, folderId: null,
        isStarred: false, tags: [words[draw()]!], description: '', blobId: `dbb_bench${i}`, sha256: '', trashedAt: null, lastAccessedAt: null,
        text: { status: 'ready', chars: body.length, truncated: false, engine: 'utf8-text-v1', error: null, at }, version: 1, createdAt: at, updatedAt: at,
      };
      fileBatch.push(file);
      textBatch.push({ _id: id, accountId: account._id, teamId: null, content: body, truncated: false, engine: 'utf8-text-v1', at });
      pageBatch.push({ _id: pageId(id, 0), ...pageOf(body, 0) });
      // The entries the drive pool would write (platform/drive/search-index.ts indexDriveFile).
      const meta = metaMasks(file);
      const offsets = new Map<string, number>();
      let at2 = 0;
      for (const w of body.split(' ')) {
        if (!offsets.has(w) && offsets.size < DRIVE_INDEX_LIMITS.textTokensMax) offsets.set(w, at2);
        at2 += w.length + 1;
      }
      for (const t of new Set([...meta.keys(), ...offsets.keys()])) {
        const offset = offsets.get(t) ?? -1;
        const e = encodeEntry({ fileId: id, mask: (meta.get(t) ?? 0) | (offset >= 0 ? FIELD_BITS.text : 0), kind: 'text', createdSec: Math.floor(at.getTime() / 1000), offset });
        const list = postings.get(t);
        if (list) list.push(e);
        else postings.set(t, [e]);
      }
      if (fileBatch.length === 1000) await flush();
    }
    if (fileBatch.length) await flush();
    const docs = [...postings].map(([t, es]) => ({ _id: postingsId(account._id, t), p: es.join(' '), v: 1 }));
    await insertAll(docs, indexCollections.postings);
    const longest = Math.max(...[...postings.values()].map((l) => l.length));
    return { accountId: account._id, auth: { authorization: `Bearer ${key}` }, words, insertSeconds: (Date.now() - started) / 1000, lists: docs.length, longest };
  } finally {
    await db.close();
  }
}

// ---- the baseline server (child process) ---------------------------------------------------

async function serveBaseline() {
  const mongo = await new MongoClient(process.env.MONGODB_URL!, { maxPoolSize: 20 }).connect();
  const db = mongo.db();
  const postings = db.collection<{ _id: string; p: string }>(indexCollections.postings);
  const textPages = db.collection<{ _id: string; s: number; t: string }>(indexCollections.pages);
  const files = db.collection<{ _id: string }>(COLLECTIONS.driveFiles);
  const accountId = process.env.BASELINE_ACCOUNT_ID!;
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams.get('q') ?? '';
    const terms = [...new Set(q.toLowerCase().split(/\s+/).filter(Boolean))];
    (async () => {
      // The index's reads: the posting list of each word (by _id), intersected and ranked in memory…
      const lists = await Promise.all(terms.map((t) => postings.findOne({ _id: `${accountId}:${t}` })));
      let scores: Map<string, { score: number; offset: number }> | null = null;
      for (const l of lists) {
        const next = new Map<string, { score: number; offset: number }>();
        for (const e of (l?.p ?? '').split(' ')) {
          const [id, packed, off] = e.split(':');
          if (!id || !packed) continue;
          if (scores && !scores.has(id)) continue;
          const mask = parseInt(packed, 36) % 16;
          const prev = scores?.get(id);
          next.set(id, { score: (prev?.score ?? 0) + (mask & 1 ? 16 : 0) + (mask & 2 ? 8 : 0) + (mask & 4 ? 3 : 0) + (mask & 8 ? 1 : 0), offset: off ? parseInt(off, 36) : (prev?.offset ?? -1) });
        }
        scores = next;
      }
      const ranked = [...(scores ?? new Map())].sort((a, b) => b[1].score - a[1].score).slice(0, LIMIT + 1);
      // …then the best files and their text pages, by _id.
      const docs = await Promise.all(ranked.map(([id]) => files.findOne({ _id: id })));
      const pages = await Promise.all(
        ranked.slice(0, LIMIT).map(([id, s]) => {
          if (s.offset < 0) return null;
          const pid = `pg:${id}:${Math.floor(s.offset / 4000)}`;
          return textPages.findOne({ _id: pid });
        }),
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: docs.slice(0, LIMIT).map((d, i) => ({ file: d, page: pages[i]?.t?.slice(0, 160) ?? '' })) }));
    })().catch((err) => {
      res.writeHead(500);
      res.end(String(err));
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void mongo.close().finally(() => process.exit(0)));
  });
}

if (process.env.BENCH_DRIVE_SEARCH_BASELINE) await serveBaseline();

async function startBaseline(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, BENCH_DRIVE_SEARCH_BASELINE: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => Promise.reject(new Error('drive search baseline exited')))])) as [{ port: number }];
  return {
    url: `http://127.0.0.1:${message.port}/`,
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
  url: (q: string) => string;
  headers?: Record<string, string>;
}
interface Load {
  rps: number;
  latencies: number[];
  errors: number;
  hits: number;
}

/** `requests` GETs over CONNECTIONS keep-alive connections, cycling through `qs`. */
async function burst(t: Target, qs: string[], requests: number): Promise<Load> {
  const latencies: number[] = [];
  let errors = 0;
  let hits = 0;
  let issued = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (issued < requests) {
        const q = qs[issued++ % qs.length]!;
        const start = performance.now();
        try {
          const r = await fetch(t.url(q), { headers: t.headers });
          const body = (await r.json()) as { data?: unknown[] };
          if (r.status === 200) {
            latencies.push(performance.now() - start);
            hits += body.data?.length ?? 0;
          } else errors++;
        } catch {
          errors++;
        }
      }
    }),
  );
  return { rps: latencies.length / ((performance.now() - t0) / 1000), latencies, errors, hits };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

export const bench: Bench = {
  name: 'drive search (issue 11)',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const { accountId, auth, words, insertSeconds, lists, longest } = await prepare(api.config.MONGODB_URL);
      const qs = queries(words);
      const first = await fetch(`${api.url}/drive/search?q=${encodeURIComponent(qs[1]!)}`, { headers: auth });
      const firstBody = (await first.json()) as { data?: unknown[] };
      if (first.status !== 200 || !firstBody.data?.length) throw new Error(`GET /drive/search answered ${first.status} with ${firstBody.data?.length ?? 0} hits`);
      const base = await startBaseline({ MONGODB_URL: api.config.MONGODB_URL, BASELINE_ACCOUNT_ID: accountId });
      try {
        const subject: Target = { url: (q) => `${api.url}/drive/search?q=${encodeURIComponent(q)}&limit=${LIMIT}`, headers: auth };
        const bare: Target = { url: (q) => `${base.url}?q=${encodeURIComponent(q)}` };
        const all = [subject, bare];
        for (const t of all) await burst(t, qs, WARMUP);
        const results: Load[][] = [[], []];
        for (let i = 0; i < ROUNDS; i++) {
          for (let k = 0; k < all.length; k++) {
            const j = (k + i) % all.length;
            results[j]!.push(await burst(all[j]!, qs, REQUESTS));
          }
        }
        const fig = (ls: Load[]) => {
          const lat = ls.flatMap((l) => l.latencies);
          return { rps: ls.reduce((a, l) => a + l.rps, 0) / ls.length, p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length, errors: ls.reduce((a, l) => a + l.errors, 0), hits: ls.reduce((a, l) => a + l.hits, 0) };
        };
        const [v, b] = [fig(results[0]!), fig(results[1]!)];
        const note = `${FILES} files with text (50-100 words each from ${VOCABULARY} Zipf-distributed words; ${lists} posting lists, the longest ${longest} files; inserted in ${insertSeconds.toFixed(1)} s), ${qs.length} one- and two-word queries, limit ${LIMIT}; ${ROUNDS} rounds x ${REQUESTS} requests over ${CONNECTIONS} connections; avg hits ${(v.hits / Math.max(1, v.n)).toFixed(1)} / ${(b.hits / Math.max(1, b.n)).toFixed(1)}${v.errors + b.errors ? `; failed: ${v.errors + b.errors}` : ''}`;
        return [
          row('(s) GET /drive/search, 10,000 files, p50', v.p50, 'ms', b.p50, `baseline: node:http + the index's own reads (posting lists by _id, ${LIMIT + 1} files and ${LIMIT} text pages by _id); ${note}`),
          row('(s) GET /drive/search, 10,000 files, p99', v.p99, 'ms', b.p99, `n = ${v.n} / ${b.n}`),
          row('(s) GET /drive/search, 10,000 files, req/s', v.rps, 'req/s', b.rps, 'the same runs'),
        ];
      } finally {
        await base.stop();
      }
    } finally {
      await api.stop();
    }
  },
};
