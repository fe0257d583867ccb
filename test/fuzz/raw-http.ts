import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';

export interface RawRequest {
  method: string;
  /** Sent verbatim after the base path (percent-escapes, `../` and all). */
  path: string;
  headers?: Record<string, string | undefined>;
  body?: string | Buffer;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  body: any;
  ms: number;
}

/**
 * HTTP without fetch's helpfulness: the path goes out as given (fetch would resolve `../` and
 * re-encode), headers too (latin-1 bytes included), and the body as raw bytes with whatever
 * Content-Type and Content-Encoding the case says.
 */
export function rawClient(baseUrl: string) {
  const base = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const send = (req: RawRequest): Promise<RawResponse> =>
    new Promise((resolve, reject) => {
      const started = Date.now();
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers ?? {})) if (v !== undefined) headers[k] = v;
      const payload =
        req.body === undefined ? undefined : Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, 'utf8');
      if (payload) headers['content-length'] = String(payload.length);
      const r = http.request(
        { host: base.hostname, port: base.port, method: req.method, path: base.pathname + req.path, headers, agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown;
            try {
              body = text ? JSON.parse(text) : undefined;
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body, ms: Date.now() - started });
          });
          res.on('error', reject);
        },
      );
      r.on('error', reject);
      r.end(payload);
    });
  return { send, close: () => agent.destroy() };
}
export type RawClient = ReturnType<typeof rawClient>;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Longest message any error may carry (platform/infra/errors.ts: 1024 + "…"). */
export const MESSAGE_LIMIT = 1025;

/**
 * The checks every fuzzed answer passes: never a 5xx, X-Request-Id on it, and for every 4xx the
 * Error shape `{ error: { code, message, requestId } }` (plus `details` on a validation_error)
 * with requestId = X-Request-Id and a bounded message; answered within a few seconds.
 */
export function expectSaneAnswer(res: RawResponse, what: string, maxMs = 3000) {
  const ctx = `${what} → ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, ctx).to.be.within(200, 499);
  const rid = res.headers['x-request-id'];
  expect(rid, `X-Request-Id on ${ctx}`).to.be.a('string').and.match(REQUEST_ID);
  expect(res.ms, `answered within ${maxMs} ms: ${ctx}`).to.be.below(maxMs);
  if (res.status >= 400) {
    expect(res.body, `Error shape: ${ctx}`).to.be.an('object');
    expect(Object.keys(res.body), ctx).to.deep.equal(['error']);
    const e = res.body.error;
    // validation_error alone adds details: one { path, code, message } per failed rule, bounded too.
    const keys =
      e.code === 'validation_error' && 'details' in e
        ? ['code', 'details', 'message', 'requestId']
        : ['code', 'message', 'requestId'];
    expect(Object.keys(e).sort(), ctx).to.deep.equal(keys);
    for (const d of e.details ?? []) {
      expect(Object.keys(d).sort(), ctx).to.deep.equal(['code', 'message', 'path']);
      expect(d.path.length + d.message.length, `bounded details: ${ctx}`).to.be.at.most(2 * MESSAGE_LIMIT);
    }
    expect(e.code, ctx)
      .to.be.a('string')
      .and.match(/^[a-z_]+$/);
    expect(e.message, ctx).to.be.a('string').and.not.equal('');
    expect(e.message.length, `bounded message: ${ctx}`).to.be.at.most(MESSAGE_LIMIT);
    expect(e.requestId, ctx).to.equal(rid);
  }
}

/** One raw exchange over a fresh TCP connection: bytes out, the whole answer until the server closes. */
export function rawExchange(port: number, bytes: Buffer, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(
        new Error(`no close within ${timeoutMs} ms; got ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`),
      );
    }, timeoutMs);
    s.on('connect', () => s.write(bytes));
    s.on('data', (c) => chunks.push(c));
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/** A raw HTTP/1.1 answer split into status, headers (lower-case names) and body. */
export function parseRawAnswer(raw: string) {
  const [head = '', ...rest] = raw.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const text = rest.join('\r\n\r\n');
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: Number(statusLine.split(' ')[1]), headers, text, body };
}
