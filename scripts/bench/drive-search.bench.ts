/**
 * Drive search benchmark: GET /drive/search latency over an account
 * holding 10,000 files with extracted text, against the bare query the index makes.
 *
 * The files, their texts, the posting lists and the text pages go straight into the API's database
 * in bulk (insertMany), built with the index's own encoding (platform/drive/search-index.repository.ts): each
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
import type { DriveFileDoc, DriveTextDoc } from '../../platform/drive/drive.types';
import {
  encodeEntry,
  FIELD_BITS,
  indexCollections,
  metaMasks,
  pageId,
  pageOf,
  postingsId,
  DRIVE_INDEX_LIMITS,
} from '../../platform/drive/search-index.repository';
import { COLLECTIONS, connectMongo } from '../../platform/infra/mongo';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount, compareRounds, type Figures, type Reader, type Target } from './load';
import { forkBaseline, serveBaselineWhen, startSupervisedApi } from './processes';
import { mulberry32 } from '../../workers/engines/songs/local.engine';

const FILES = Number(process.env.DRIVE_SEARCH_BENCH_FILES ?? 10_000);
const VOCABULARY = Number(process.env.DRIVE_SEARCH_BENCH_VOCABULARY ?? 3000);
const ROUNDS = Number(process.env.DRIVE_SEARCH_BENCH_ROUNDS ?? 2);
const REQUESTS = Number(process.env.DRIVE_SEARCH_BENCH_REQUESTS ?? 150);
const CONNECTIONS = Number(process.env.DRIVE_SEARCH_BENCH_CONNECTIONS ?? 2);
const WARMUP = 10;
const LIMIT = 20;

// ---- data ----------------------------------------------------------------------------------

/** VOCABULARY distinct made-up words of two to four syllables. */
function vocabulary(n: number): string[] {
  const on = ['b', 'd', 'f', 'g', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'br', 'st', 'tr', 'pl'];
  const nu = ['a', 'e', 'i', 'o', 'u', 'ai', 'ou'];
  const rand = mulberry32(7);
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
  for (let i = 1; i <= n; i++) {
    sum += 1 / i;
    cdf.push(sum);
  }
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
  const rand = mulberry32(11);
  const pick = (lo: number, hi: number) => words[lo + Math.floor(rand() * (hi - lo))]!;
  const out: string[] = [];
  for (let i = 0; i < 50; i++) {
    const k = i % 5;
    if (k === 0)
      out.push(pick(0, 10)); // a very common word: long posting lists
    else if (k === 1) out.push(pick(10, 200));
    else if (k === 2)
      out.push(pick(200, words.length)); // rare
    else if (k === 3) out.push(`${pick(10, 200)} ${pick(10, 200)}`);
    else out.push(`${pick(0, 50)} ${pick(200, words.length)}`);
  }
  return out;
}

/** The bench account (a key with drive:read) and FILES files with their texts, postings and pages. */
export async function prepare(mongoUrl: string) {
  const db = await connectMongo(mongoUrl);
  try {
    const { accountId, auth } = await benchAccount(db, { scopes: ['drive:read'] });
    const words = vocabulary(VOCABULARY);
    const rand = mulberry32(3);
    const draw = zipf(words.length, rand);
    const started = Date.now();
    const postings = new Map<string, string[]>();
    const files = db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
    const texts = db.db.collection<DriveTextDoc>(COLLECTIONS.driveTexts);
    /** Documents inserted in bulk, 500 a command. */
    const insertAll = async (docs: { _id: string }[], name: string) => {
      for (let i = 0; i < docs.length; i += 500)
        await db.db.collection<{ _id: string }>(name).insertMany(docs.slice(i, i + 500), { ordered: false });
    };
    const t0 = Date.now() - FILES * 1000;
    let fileBatch: DriveFileDoc[] = [];
    let textBatch: DriveTextDoc[] = [];
    let pageBatch: { _id: string; s: number; t: string }[] = [];
    const flush = async () => {
      await Promise.all([
        files.insertMany(fileBatch, { ordered: false }),
        texts.insertMany(textBatch, { ordered: false }),
        insertAll(pageBatch, indexCollections.pages),
      ]);
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
        _id: id,
        accountId,
        teamId: null,
        name,
        nameKey: name.toLowerCase(),
        ext: 'txt',
        kind: 'text',
        mimeType: 'text/plain',
        sizeBytes: body.length,
        folderId: null,
        isStarred: false,
        tags: [words[draw()]!],
        description: '',
        blobId: `dbb_bench${i}`,
        sha256: '',
        trashedAt: null,
        lastAccessedAt: null,
        text: { status: 'ready', chars: body.length, truncated: false, engine: 'utf8-text-v1', error: null, at },
        version: 1,
        createdAt: at,
        updatedAt: at,
      };
      fileBatch.push(file);
      textBatch.push({ _id: id, accountId, teamId: null, content: body, truncated: false, engine: 'utf8-text-v1', at });
      pageBatch.push({ _id: pageId(id, 0), ...pageOf(body, 0) });
      // The entries the drive pool would write (platform/drive/search-index.repository.ts indexDriveFile).
      const meta = metaMasks(file);
      const offsets = new Map<string, number>();
      let at2 = 0;
      for (const w of body.split(' ')) {
        if (!offsets.has(w) && offsets.size < DRIVE_INDEX_LIMITS.textTokensMax) offsets.set(w, at2);
        at2 += w.length + 1;
      }
      for (const t of new Set([...meta.keys(), ...offsets.keys()])) {
        const offset = offsets.get(t) ?? -1;
        const e = encodeEntry({
          fileId: id,
          mask: (meta.get(t) ?? 0) | (offset >= 0 ? FIELD_BITS.text : 0),
          kind: 'text',
          createdSec: Math.floor(at.getTime() / 1000),
          offset,
        });
        const list = postings.get(t);
        if (list) list.push(e);
        else postings.set(t, [e]);
      }
      if (fileBatch.length === 1000) await flush();
    }
    if (fileBatch.length) await flush();
    const docs = [...postings].map(([t, es]) => ({ _id: postingsId(accountId, t), p: es.join(' '), v: 1 }));
    await insertAll(docs, indexCollections.postings);
    const longest = Math.max(...[...postings.values()].map((l) => l.length));
    return { accountId, auth, words, insertSeconds: (Date.now() - started) / 1000, lists: docs.length, longest };
  } finally {
    await db.close();
  }
}

// ---- the baseline server (child process) ---------------------------------------------------

const BASELINE = 'BENCH_DRIVE_SEARCH_BASELINE';

await serveBaselineWhen(BASELINE, (_mode, mongo) => {
  const db = mongo.db();
  const postings = db.collection<{ _id: string; p: string }>(indexCollections.postings);
  const textPages = db.collection<{ _id: string; s: number; t: string }>(indexCollections.pages);
  const files = db.collection<{ _id: string }>(COLLECTIONS.driveFiles);
  const accountId = process.env.BASELINE_ACCOUNT_ID!;
  return (req, res) => {
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
          next.set(id, {
            score:
              (prev?.score ?? 0) + (mask & 1 ? 16 : 0) + (mask & 2 ? 8 : 0) + (mask & 4 ? 3 : 0) + (mask & 8 ? 1 : 0),
            offset: off ? parseInt(off, 36) : (prev?.offset ?? -1),
          });
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
      res.end(
        JSON.stringify({
          data: docs.slice(0, LIMIT).map((d, i) => ({ file: d, page: pages[i]?.t?.slice(0, 160) ?? '' })),
        }),
      );
    })().catch((err) => {
      res.writeHead(500);
      res.end(String(err));
    });
  };
});

// ---- measuring -----------------------------------------------------------------------------

/** A 200 with its `data`: the number of hits is kept. */
const hits: Reader<number> = async (r) => {
  const body = (await r.json()) as { data?: unknown[] };
  return r.status === 200 ? { ok: true, value: body.data?.length ?? 0 } : { ok: false };
};

export const bench: Bench = {
  name: 'drive search',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' });
    try {
      const { accountId, auth, words, insertSeconds, lists, longest } = await prepare(api.config.MONGODB_URL);
      const qs = queries(words);
      const first = await fetch(`${api.url}/drive/search?q=${encodeURIComponent(qs[1]!)}`, { headers: auth });
      const firstBody = (await first.json()) as { data?: unknown[] };
      if (first.status !== 200 || !firstBody.data?.length)
        throw new Error(`GET /drive/search answered ${first.status} with ${firstBody.data?.length ?? 0} hits`);
      const base = await forkBaseline(import.meta.url, BASELINE, '1', {
        MONGODB_URL: api.config.MONGODB_URL,
        BASELINE_ACCOUNT_ID: accountId,
      });
      try {
        // The queries in turn, the same for both (request i asks qs[i % qs.length]).
        const subject: Target = (i) => ({
          url: `${api.url}/drive/search?q=${encodeURIComponent(qs[i % qs.length]!)}&limit=${LIMIT}`,
          headers: auth,
        });
        const bare: Target = (i) => ({ url: `${base.url}/?q=${encodeURIComponent(qs[i % qs.length]!)}` });
        const [v, b] = (await compareRounds([subject, bare], {
          rounds: ROUNDS,
          requests: REQUESTS,
          connections: CONNECTIONS,
          warmup: { requests: WARMUP },
          read: hits,
        })) as [Figures<number>, Figures<number>];
        const avgHits = (f: Figures<number>) => (f.values.reduce((a, n) => a + n, 0) / Math.max(1, f.n)).toFixed(1);
        const note = `${FILES} files with text (50-100 words each from ${VOCABULARY} Zipf-distributed words; ${lists} posting lists, the longest ${longest} files; inserted in ${insertSeconds.toFixed(1)} s), ${qs.length} one- and two-word queries, limit ${LIMIT}; ${ROUNDS} rounds x ${REQUESTS} requests over ${CONNECTIONS} connections; avg hits ${avgHits(v)} / ${avgHits(b)}${v.errors + b.errors ? `; failed: ${v.errors + b.errors}` : ''}`;
        return [
          row(
            '(s) GET /drive/search, 10,000 files, p50',
            v.p50,
            'ms',
            b.p50,
            `baseline: node:http + the index's own reads (posting lists by _id, ${LIMIT + 1} files and ${LIMIT} text pages by _id); ${note}`,
          ),
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
