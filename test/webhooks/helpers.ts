import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MongoClient } from 'mongodb';
import type { Config } from '../../platform/infra/config';
import { COLLECTIONS } from '../../platform/infra/mongo';
import type { Client } from '../../scripts/harness/http';
import { eventually } from '../../scripts/harness/http';

export interface Received {
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: any;
  /** Date.now() when the request arrived. */
  at: number;
  /** How the receiver answered ('hang' when it never did). */
  answered: number | 'hang';
  /** Resolves when the request's connection closed (the sender gave up or finished). */
  closed: Promise<void>;
  /** True until the exchange ends (answer sent, or the sender gave up). */
  open: boolean;
}

/** What the receiver does with the nth request (0-based). */
export type Behaviour = (req: {
  n: number;
  body: any;
  headers: http.IncomingHttpHeaders;
}) => number | 'hang' | { status: number; body: string };

/** A real HTTP receiver on loopback that records every request. */
export async function startReceiver(behaviour: Behaviour = () => 200) {
  const received: Received[] = [];
  let current = behaviour;
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const n = received.length;
      const answer = current({ n, body, headers: req.headers });
      const entry: Received = {
        headers: req.headers,
        raw,
        body,
        at: Date.now(),
        answered: typeof answer === 'object' ? answer.status : answer,
        closed: Promise.resolve(),
        open: true,
      };
      entry.closed = new Promise<void>((resolve) =>
        res.on('close', () => {
          entry.open = false;
          resolve();
        }),
      );
      received.push(entry);
      if (answer === 'hang') {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      if (typeof answer === 'number') res.writeHead(answer, { 'content-type': 'text/plain' }).end(`answer ${answer}`);
      else res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}/hook`,
    received,
    set(b: Behaviour) {
      current = b;
    },
    /** Wait until `n` requests (optionally matching `pred`) arrived. */
    async waitFor(n: number, pred: (r: Received) => boolean = () => true, timeoutMs = 15_000) {
      return eventually(
        async () => {
          const hits = received.filter(pred);
          return hits.length >= n ? hits : undefined;
        },
        timeoutMs,
        `${n} webhook request(s)`,
      );
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Create a webhook through the API; fails the test unless 201. */
export async function createWebhook(api: Client, body: { name?: string; url: string; events?: string[] }) {
  const r = await api.post('/webhooks', { name: body.name ?? 'test hook', events: ['code_build.completed'], ...body });
  if (r.status !== 201) throw new Error(`webhook create answered ${r.status}: ${r.text}`);
  return r.body as { id: string; secret: string; [k: string]: unknown };
}

/** The raw stored documents, read straight from the database. */
export async function readDb<T>(
  config: Config,
  collection: keyof typeof COLLECTIONS | (string & {}),
  filter: Record<string, unknown>,
): Promise<T[]> {
  const m = new MongoClient(config.MONGODB_URL);
  try {
    await m.connect();
    const name = (COLLECTIONS as Record<string, string>)[collection] ?? collection;
    return (await m.db().collection(name).find(filter).toArray()) as T[];
  } finally {
    await m.close();
  }
}

/** Every delivery attempt of a webhook through the API, newest first, all pages. */
export async function allDeliveries(api: Client, webhookId: string) {
  const out: any[] = [];
  let cursor: string | undefined;
  do {
    const r = await api.get(
      `/webhooks/${webhookId}/deliveries?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    if (r.status !== 200) throw new Error(`deliveries answered ${r.status}: ${r.text}`);
    out.push(...r.body.data);
    cursor = r.body.cursor ?? undefined;
  } while (cursor);
  return out;
}

/**
 * The third-party verifier of `sha256=<hex>` HMAC signatures (@octokit/webhooks-methods).
 * Imported dynamically: the package is ESM-only, and mocha may load test files through require().
 */
export async function verifySignature(secret: string, payload: string, signature: string): Promise<boolean> {
  const { verify } = await import('@octokit/webhooks-methods');
  return verify(secret, payload, signature);
}
