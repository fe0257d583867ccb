/**
 * Drive transfer benchmark (issue 11 item 9, upload and download parts), one supervised API
 * process on a fresh database:
 *  (u) uploads of 1 MB files: POST /drive/files with contentBase64 (validation, base64 decode,
 *      type sniffing, quota reservation, sha256, GridFS write, the record, the text request),
 *      files/s and MB/s. Baseline: a bare node:http server in its own process that reads the same
 *      JSON body, decodes the base64 and writes the bytes into a GridFS bucket on the same server
 *      (the least an upload through JSON costs on this database).
 *  (d) downloads of those files through their signed links (the public stream: signature, the key
 *      read fresh, the file lookup with pins, GridFS read), files/s and MB/s. Baseline: a bare
 *      node:http server streaming the same GridFS file by id.
 *
 * DRIVE_BENCH_FILES=24 files per round, DRIVE_BENCH_ROUNDS=2 rounds (rotating which goes first),
 * DRIVE_BENCH_CONNECTIONS=2 connections. The search part of item 9 is scripts/bench/drive-search.bench.ts.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { GridFSBucket, MongoClient } from 'mongodb';
import { SCOPES } from '../../contracts/registry';
import { createAccountsRepository } from '../../platform/accounts';
import { connectMongo } from '../../platform/mongo';
import { row, type Bench, type BenchRow } from './bench';
import { startSupervisedApi } from './processes';

const FILES = Number(process.env.DRIVE_BENCH_FILES ?? 24);
const ROUNDS = Number(process.env.DRIVE_BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.DRIVE_BENCH_CONNECTIONS ?? 2);
const SIZE = 1024 * 1024;
const MB = SIZE / 1e6;
const BUCKET = 'bench_drive_blobs';

// ---- baseline server (child process) -------------------------------------------------------

async function serveBaseline() {
  const mongo = await new MongoClient(process.env.MONGODB_URL!, { maxPoolSize: 20 }).connect();
  const bucket = new GridFSBucket(mongo.db(), { bucketName: BUCKET });
  const server = http.createServer((req, res) => {
    const fail = (err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
      else res.destroy();
    };
    if (req.method === 'POST') {
      // The same JSON body as POST /drive/files, decoded and written to GridFS.
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => {
        try {
          const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { name: string; contentBase64: string };
          const bytes = Buffer.from(body.contentBase64, 'base64');
          const id = `bbb_${randomBytes(12).toString('hex')}`;
          const up = bucket.openUploadStreamWithId(id as never, body.name);
          up.once('finish', () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id, sizeBytes: bytes.length })));
          up.once('error', fail);
          up.end(bytes);
        } catch (err) {
          fail(err);
        }
      });
      return;
    }
    // GET /<blob id>: the bytes, streamed.
    const id = decodeURIComponent(req.url!.slice(1));
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(SIZE) });
    const s = bucket.openDownloadStream(id as never);
    s.on('error', fail);
    s.pipe(res);
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void mongo.close().finally(() => process.exit(0)));
  });
}

if (process.env.BENCH_DRIVE_BASELINE) await serveBaseline();

async function startBaseline(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, BENCH_DRIVE_BASELINE: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => Promise.reject(new Error('drive baseline exited')))])) as [{ port: number }];
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

type Target = (i: number) => { url: string; method?: string; headers?: Record<string, string>; body?: string };
interface Load {
  filesPerSec: number;
  latencies: number[];
  errors: number;
  /** What each successful answer said (JSON), or nothing for byte streams. */
  answers: unknown[];
}

/** `requests` requests over CONNECTIONS connections; `expect` is the success status. */
async function burst(t: Target, requests: number, expect: number, json: boolean): Promise<Load> {
  const latencies: number[] = [];
  const answers: unknown[] = [];
  let errors = 0;
  let issued = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (issued < requests) {
        const q = t(issued++);
        const start = performance.now();
        try {
          const r = await fetch(q.url, { method: q.method ?? 'GET', headers: q.headers, body: q.body });
          const buf = Buffer.from(await r.arrayBuffer());
          if (r.status !== expect) {
            errors++;
            if (errors === 1) console.warn(`  ${q.method ?? 'GET'} answered ${r.status}: ${buf.toString('utf8').slice(0, 300)}`);
            continue;
          }
          if (!json && buf.length !== SIZE) {
            errors++;
            continue;
          }
          latencies.push(performance.now() - start);
          if (json) answers.push(JSON.parse(buf.toString('utf8')));
        } catch (err) {
          errors++;
          if (errors === 1) console.warn(`  request failed: ${String(err)}`);
        }
      }
    }),
  );
  return { filesPerSec: latencies.length / ((performance.now() - t0) / 1000), latencies, errors, answers };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

interface Figures {
  filesPerSec: number;
  mbPerSec: number;
  p50: number;
  n: number;
  errors: number;
  answers: unknown[];
}

/** Both targets in turn, ROUNDS rounds, rotating which goes first. */
async function compare(targets: [Target, Target], expect: [number, number], json: boolean): Promise<[Figures, Figures]> {
  const results: Load[][] = [[], []];
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < 2; k++) {
      const j = (k + i) % 2;
      results[j]!.push(await burst(targets[j]!, FILES, expect[j]!, json));
    }
  }
  return results.map((ls) => {
    const fps = ls.reduce((a, l) => a + l.filesPerSec, 0) / ls.length;
    const lat = ls.flatMap((l) => l.latencies);
    return { filesPerSec: fps, mbPerSec: fps * MB, p50: percentile(lat, 50), n: lat.length, errors: ls.reduce((a, l) => a + l.errors, 0), answers: ls.flatMap((l) => l.answers) };
  }) as [Figures, Figures];
}

const desc = (f: Figures) => `${f.filesPerSec.toFixed(1)} files/s, ${f.mbPerSec.toFixed(1)} MB/s, p50 ${f.p50.toFixed(0)} ms (n = ${f.n}${f.errors ? `, ${f.errors} failed` : ''})`;

export const bench: Bench = {
  name: 'drive uploads and downloads (issue 11)',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000', DRIVE_QUOTA_BYTES: JSON.stringify({ free: 1e12, pro: 1e12, teams: 1e12 }) });
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
      // Random bytes (nothing to sniff, nothing to compress): one 1 MB file, sent under new names.
      const body = (i: number) => JSON.stringify({ name: `bench-${i}-${randomBytes(4).toString('hex')}.bin`, contentBase64: randomBytes(SIZE).toString('base64') });
      const payloads = Array.from({ length: 8 }, (_, i) => body(i));
      const base = await startBaseline({ MONGODB_URL: api.config.MONGODB_URL });
      try {
        // Warm-up: one of each.
        await burst(() => ({ url: `${api.url}/drive/files`, method: 'POST', headers: auth, body: payloads[0] }), 1, 201, true);
        await burst(() => ({ url: base.url, method: 'POST', body: payloads[0] }), 1, 201, true);
        const [up, upBase] = await compare(
          [(i) => ({ url: `${api.url}/drive/files`, method: 'POST', headers: auth, body: payloads[i % payloads.length] }), (i) => ({ url: base.url, method: 'POST', body: payloads[i % payloads.length] })],
          [201, 201],
          true,
        );

        // Downloads: the signed link of each uploaded file (GET /drive/files/{id} → downloadUrl).
        const fileIds = (up.answers as { id: string }[]).map((a) => a.id);
        const links: string[] = [];
        for (const id of fileIds) {
          const h = (await (await fetch(`${api.url}/drive/files/${id}`, { headers: auth })).json()) as { downloadUrl: string };
          links.push(h.downloadUrl);
        }
        const blobIds = (upBase.answers as { id: string }[]).map((a) => a.id);
        const [down, downBase] = await compare([(i) => ({ url: links[i % links.length]! }), (i) => ({ url: `${base.url}/${blobIds[i % blobIds.length]}` })], [200, 200], false);

        const note = `1 MB (1,048,576 random bytes) per file, ${FILES} files per round, ${ROUNDS} rounds, ${CONNECTIONS} connections, one API process`;
        return [
          row('(u) Drive upload of 1 MB files (POST /drive/files, base64), files/s', up.filesPerSec, 'files/s', upBase.filesPerSec, `${desc(up)}; baseline: bare node:http reading the same JSON, decoding the base64, GridFS upload on the same server: ${desc(upBase)}; ${note}`),
          row('(u) Drive upload of 1 MB files, MB/s', up.mbPerSec, 'MB/s', upBase.mbPerSec),
          row('(d) Drive download of 1 MB files (signed link), files/s', down.filesPerSec, 'files/s', downBase.filesPerSec, `${desc(down)}; every fetch re-checks the signature, the key (read fresh) and the file; baseline: bare node:http streaming the same GridFS file by id: ${desc(downBase)}`),
          row('(d) Drive download of 1 MB files, MB/s', down.mbPerSec, 'MB/s', downBase.mbPerSec),
        ];
      } finally {
        await base.stop();
      }
    } finally {
      await api.stop();
    }
  },
};
