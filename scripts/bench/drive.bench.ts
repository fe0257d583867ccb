/**
 * Drive transfer benchmark (uploads and downloads), one supervised API
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
import { randomBytes } from 'node:crypto';
import { GridFSBucket } from 'mongodb';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount, compareRounds, type Figures, type Reader, type Target } from './load';
import { forkBaseline, serveBaselineWhen, startSupervisedApi } from './processes';

const FILES = Number(process.env.DRIVE_BENCH_FILES ?? 24);
const ROUNDS = Number(process.env.DRIVE_BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.DRIVE_BENCH_CONNECTIONS ?? 2);
const SIZE = 1024 * 1024;
const MB = SIZE / 1e6;
const BUCKET = 'bench_drive_blobs';

// ---- baseline server (child process) -------------------------------------------------------

const BASELINE = 'BENCH_DRIVE_BASELINE';

await serveBaselineWhen(BASELINE, (_mode, mongo) => {
  const bucket = new GridFSBucket(mongo.db(), { bucketName: BUCKET });
  return (req, res) => {
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
          up.once('finish', () =>
            res
              .writeHead(201, { 'content-type': 'application/json' })
              .end(JSON.stringify({ id, sizeBytes: bytes.length })),
          );
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
  };
});

// ---- measuring -----------------------------------------------------------------------------

/**
 * An answer with status `expect`: for uploads (`json`) its body is kept (parsed once the rounds are
 * over), for downloads it must be the SIZE bytes. The run's first wrong status is printed.
 */
const answer =
  (expect: number, json: boolean): Reader<Buffer> =>
  async (r, q) => {
    const buf = Buffer.from(await r.arrayBuffer());
    if (r.status !== expect)
      return { ok: false, why: `${q.method ?? 'GET'} answered ${r.status}: ${buf.toString('utf8').slice(0, 300)}` };
    if (!json && buf.length !== SIZE) return { ok: false };
    return { ok: true, value: json ? buf : undefined };
  };

/** Both targets in turn, ROUNDS rounds of FILES requests over CONNECTIONS connections, rotating which goes first. */
const compare = (targets: [Target, Target], expect: number, json: boolean, warmup?: { requests: number }) =>
  compareRounds(targets, {
    rounds: ROUNDS,
    connections: CONNECTIONS,
    requests: FILES,
    read: answer(expect, json),
    warn: true,
    warmup,
  }) as Promise<[Figures<Buffer>, Figures<Buffer>]>;

const mbPerSec = (f: Figures<Buffer>) => f.rps * MB;
/** The ids the answers of a run of uploads gave. */
const ids = (f: Figures<Buffer>) => f.values.map((b) => (JSON.parse(b.toString('utf8')) as { id: string }).id);

const desc = (f: Figures<Buffer>) =>
  `${f.rps.toFixed(1)} files/s, ${mbPerSec(f).toFixed(1)} MB/s, p50 ${f.p50.toFixed(0)} ms (n = ${f.n}${f.errors ? `, ${f.errors} failed` : ''})`;

export const bench: Bench = {
  name: 'drive uploads and downloads',
  async run(): Promise<BenchRow[]> {
    const api = await startSupervisedApi(1, {
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '1000000000',
      DRIVE_QUOTA_BYTES: JSON.stringify({ free: 1e12, pro: 1e12, teams: 1e12 }),
    });
    try {
      const auth = { ...(await benchAccount(api.config.MONGODB_URL)).auth, 'content-type': 'application/json' };
      // Random bytes (nothing to sniff, nothing to compress): one 1 MB file, sent under new names.
      const body = (i: number) =>
        JSON.stringify({
          name: `bench-${i}-${randomBytes(4).toString('hex')}.bin`,
          contentBase64: randomBytes(SIZE).toString('base64'),
        });
      const payloads = Array.from({ length: 8 }, (_, i) => body(i));
      const base = await forkBaseline(import.meta.url, BASELINE, '1', { MONGODB_URL: api.config.MONGODB_URL });
      try {
        // After a warm-up of one of each (payloads[0]).
        const [up, upBase] = await compare(
          [
            (i) => ({
              url: `${api.url}/drive/files`,
              method: 'POST',
              headers: auth,
              body: payloads[i % payloads.length],
            }),
            (i) => ({ url: base.url, method: 'POST', body: payloads[i % payloads.length] }),
          ],
          201,
          true,
          { requests: 1 },
        );

        // Downloads: the signed link of each uploaded file (GET /drive/files/{id} → downloadUrl).
        const fileIds = ids(up);
        const links: string[] = [];
        for (const id of fileIds) {
          const h = (await (await fetch(`${api.url}/drive/files/${id}`, { headers: auth })).json()) as {
            downloadUrl: string;
          };
          links.push(h.downloadUrl);
        }
        const blobIds = ids(upBase);
        const [down, downBase] = await compare(
          [(i) => ({ url: links[i % links.length]! }), (i) => ({ url: `${base.url}/${blobIds[i % blobIds.length]}` })],
          200,
          false,
        );

        const note = `1 MB (1,048,576 random bytes) per file, ${FILES} files per round, ${ROUNDS} rounds, ${CONNECTIONS} connections, one API process`;
        return [
          row(
            '(u) Drive upload of 1 MB files (POST /drive/files, base64), files/s',
            up.rps,
            'files/s',
            upBase.rps,
            `${desc(up)}; baseline: bare node:http reading the same JSON, decoding the base64, GridFS upload on the same server: ${desc(upBase)}; ${note}`,
          ),
          row('(u) Drive upload of 1 MB files, MB/s', mbPerSec(up), 'MB/s', mbPerSec(upBase)),
          row(
            '(d) Drive download of 1 MB files (signed link), files/s',
            down.rps,
            'files/s',
            downBase.rps,
            `${desc(down)}; every fetch re-checks the signature, the key (read fresh) and the file; baseline: bare node:http streaming the same GridFS file by id: ${desc(downBase)}`,
          ),
          row('(d) Drive download of 1 MB files, MB/s', mbPerSec(down), 'MB/s', mbPerSec(downBase)),
        ];
      } finally {
        await base.stop();
      }
    } finally {
      await api.stop();
    }
  },
};
