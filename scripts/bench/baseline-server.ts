/**
 * The baselines of the gateway bench, each in its own process like the API it is compared with
 * (the load generator runs in the bench process):
 *  - `hello-http`: bare node:http answering a small JSON (harness check);
 *  - `hello-express`: bare Express answering the same;
 *  - `find`: bare node:http, `GET /jobs/<id>` → one `findOne({ _id })` on the jobs collection;
 *  - `insert`: bare node:http, `POST /code-builds` with a JSON body → one `insertOne` of a
 *    job-shaped document into the jobs collection (same indexes as the API's inserts).
 * Plain mongodb driver, MONGODB_MAX_POOL_SIZE connections like an API process. Started with
 * `fork()`; reports `{ port }` over IPC once listening, stops on SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { MongoClient } from 'mongodb';

const mode = process.argv[2];
const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};
const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (s += d));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });

let mongo: MongoClient | undefined;
let handler: http.RequestListener;
if (mode === 'hello-http') {
  handler = (_req, res) => json(res, 200, { hello: 'world' });
} else if (mode === 'hello-express') {
  const app = express();
  app.get('/hello', (_req, res) => void res.json({ hello: 'world' }));
  handler = app;
} else if (mode === 'find' || mode === 'insert') {
  mongo = await new MongoClient(process.env.MONGODB_URL!, {
    maxPoolSize: Number(process.env.MONGODB_MAX_POOL_SIZE ?? 20),
  }).connect();
  const jobs = mongo.db().collection<Record<string, unknown> & { _id: string }>('jobs');
  const accountId = process.env.BASELINE_ACCOUNT_ID ?? 'acct_bench';
  handler =
    mode === 'find'
      ? (req, res) => {
          jobs.findOne({ _id: decodeURIComponent(req.url!.slice('/jobs/'.length)) }).then(
            (doc) => (doc ? json(res, 200, doc) : json(res, 404, { error: 'not found' })),
            (err) => json(res, 500, { error: String(err) }),
          );
        }
      : (req, res) => {
          readBody(req)
            .then(async (text) => {
              const now = new Date();
              const _id = `code_${randomBytes(12).toString('base64url')}`;
              await jobs.insertOne({
                _id,
                accountId,
                type: 'code',
                status: 'queued',
                input: JSON.parse(text),
                dispatchedAt: null,
                attempts: 0,
                createdAt: now,
                updatedAt: now,
              });
              json(res, 202, { jobId: _id, status: 'queued' });
            })
            .catch((err) => json(res, 500, { error: String(err) }));
        };
} else {
  throw new Error(`unknown baseline mode ${mode}`);
}

const server = http.createServer(handler);
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void (mongo?.close() ?? Promise.resolve()).finally(() => process.exit(0)));
});
