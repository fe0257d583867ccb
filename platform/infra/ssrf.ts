import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from './errors';

/**
 * The one SSRF guard for every URL the server fetches (webhook targets, imageUrl,
 * referenceImageUrls, brandUrl, videoUrl): http(s) only, no credentials in the URL, and every
 * resolved address checked against private, loopback, link-local, CGNAT, multicast and cloud
 * metadata ranges and IPv6 transition forms (refused whole), at every fetch (DNS may change between checks). `allowLoopback` exists for
 * tests and local development only; production never sets it.
 */
export interface SsrfOptions {
  allowLoopback?: boolean;
  /**
   * Plain http: accepted by default (user media URLs are "http(s)" in SPEC); false refuses it;
   * 'loopback' accepts it only to loopback addresses (webhook targets in development).
   */
  allowHttp?: boolean | 'loopback';
}

const blockList = new net.BlockList();
for (const [addr, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16], // link-local, incl. 169.254.169.254 metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blockList.addSubnet(addr, prefix, 'ipv4');
for (const [addr, prefix] of [
  ['::', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
  ['fd00:ec2::', 32], // AWS metadata over IPv6
  ['2001:db8::', 32],
  ['::', 96], // IPv4-compatible (deprecated) addresses
] as const)
  blockList.addSubnet(addr, prefix, 'ipv6');
/**
 * IPv6 transition forms carry (or reach) an IPv4 address the IPv4 rules above would judge, so they
 * are refused whole, whatever the address inside: a public IPv4 host is reachable by its IPv4
 * address instead.
 */
const transition = new net.BlockList();
for (const [addr, prefix] of [
  ['::ffff:0:0', 96], // IPv4-mapped (::ffff:127.0.0.1)
  ['::ffff:0:0:0', 96], // IPv4-translated (::ffff:0:7f00:1)
  ['64:ff9b::', 96], // NAT64, well-known prefix
  ['64:ff9b:1::', 48], // NAT64, local-use prefix
  ['2002::', 16], // 6to4
  ['2001::', 32], // Teredo
  ['100::', 64], // discard-only
] as const)
  transition.addSubnet(addr, prefix, 'ipv6');
const loopback = new net.BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Why an address may not be fetched, or null when it may. */
export function addressProblem(address: string, opts: SsrfOptions = {}): string | null {
  const family: 'ipv4' | 'ipv6' = net.isIPv4(address) ? 'ipv4' : 'ipv6';
  if (family === 'ipv6' && transition.check(address, 'ipv6'))
    return 'reserved IPv6 transition address (IPv4-mapped, IPv4-translated, NAT64, 6to4, Teredo or discard-only)';
  if (loopback.check(address, family)) return opts.allowLoopback ? null : 'loopback address';
  if (blockList.check(address, family)) return 'private, link-local or reserved address';
  return null;
}

/**
 * Why the server may not fetch `raw`, or null when it may: scheme, credentials, and every address
 * the host resolves to. `allowHttp: 'loopback'` accepts plain http only to loopback addresses (the
 * webhook development rule); the default accepts http(s) anywhere public (user media URLs).
 */
export async function urlProblem(raw: string, opts: SsrfOptions = {}): Promise<{ url?: URL; problem: string | null }> {
  const httpRule = opts.allowHttp ?? true;
  const schemes = httpRule === true ? 'http(s)' : 'https';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { problem: `must be an absolute ${schemes} URL` };
  }
  const isHttp = url.protocol === 'http:';
  if (url.protocol !== 'https:' && !(isHttp && httpRule !== false)) return { problem: `must be an ${schemes} URL` };
  if (url.username || url.password) return { problem: 'must not carry credentials' };
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (net.isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      return { problem: `host ${host} does not resolve` };
    }
  }
  const problem = addressesProblem(host, addresses, opts, isHttp);
  return { url, problem };
}

/** The address rule shared by the URL check and the connect-time lookup. */
function addressesProblem(host: string, addresses: string[], opts: SsrfOptions, isHttp: boolean): string | null {
  if (addresses.length === 0) return `host ${host} does not resolve`;
  for (const a of addresses) {
    const problem = addressProblem(a, opts);
    if (problem) return `${host} resolves to a ${problem}, which the server will not fetch`;
    if (isHttp && opts.allowHttp === 'loopback' && addressProblem(a) !== 'loopback address') {
      return 'must be an https URL (plain http is accepted only for loopback targets in development)';
    }
  }
  return null;
}

/** Check a URL and every address its host resolves to. Throws validation_error naming `field`. */
export async function assertFetchable(raw: string, field: string, opts: SsrfOptions = {}): Promise<URL> {
  const { url, problem } = await urlProblem(raw, opts);
  if (problem || !url) throw new AppError('validation_error', `${field}: ${problem}`);
  return url;
}

/**
 * A `lookup` for http(s).request that resolves the host and checks every address again when the
 * socket connects, so a DNS answer that changed after assertFetchable (rebinding) is refused.
 */
export function guardedLookup(opts: SsrfOptions & { http?: boolean } = {}): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    dns.promises.lookup(hostname, { all: true, verbatim: true }).then(
      (found) => {
        const problem = addressesProblem(
          hostname,
          found.map((a) => a.address),
          opts,
          opts.http ?? false,
        );
        if (problem) return callback(Object.assign(new Error(problem), { code: 'ETARGETBLOCKED' }));
        if (options?.all) return callback(null, found);
        return callback(null, found[0]!.address, found[0]!.family);
      },
      (err: Error) => callback(err),
    );
  }) as unknown as LookupFunction;
}

/** One request whose socket connects only to addresses the guard accepts. */
function guardedRequest(
  url: URL,
  field: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; signal?: AbortSignal },
  opts: SsrfOptions,
): Promise<Response> {
  const mod = url.protocol === 'https:' ? https : http;
  const method = init.method ?? 'GET';
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        method,
        headers: init.headers,
        signal: init.signal,
        lookup: guardedLookup({ ...opts, http: url.protocol === 'http:' }),
      },
      (res) => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers))
          for (const x of Array.isArray(v) ? v : v === undefined ? [] : [v]) headers.append(k, x);
        const status = res.statusCode ?? 502;
        const noBody = method === 'HEAD' || [204, 205, 304].includes(status);
        if (noBody) res.resume();
        resolve(
          new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status: status < 200 ? 502 : status,
            headers,
          }),
        );
      },
    );
    req.on('error', (err: Error & { code?: string }) =>
      reject(err.code === 'ETARGETBLOCKED' ? new AppError('validation_error', `${field}: ${err.message}`) : err),
    );
    req.end(init.body);
  });
}

/**
 * Fetch a user-supplied URL through the guard: the URL is checked, the connection re-checks the
 * address it dials (DNS rebinding), and redirects are followed by hand (at most 5), each hop
 * checked again. Answers a WHATWG Response.
 */
export async function guardedFetch(
  raw: string,
  field: string,
  init: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    signal?: AbortSignal;
    timeoutMs?: number;
  } = {},
  opts: SsrfOptions = {},
): Promise<Response> {
  const signal = init.signal ?? AbortSignal.timeout(init.timeoutMs ?? 10_000);
  let current = raw;
  for (let hop = 0; hop <= 5; hop++) {
    const url = await assertFetchable(current, field, opts);
    const res = await guardedRequest(url, field, { ...init, signal }, opts);
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      current = new URL(location, current).toString();
      continue;
    }
    return res;
  }
  throw new AppError('validation_error', `${field}: too many redirects`);
}

/** Stream a response body into `file`, failing beyond `maxBytes` (no whole-body buffer). */
export async function saveLimited(res: Response, file: string, maxBytes: number, field: string): Promise<number> {
  const len = Number(res.headers.get('content-length') ?? '0');
  if (len > maxBytes) throw new AppError('validation_error', `${field}: larger than ${maxBytes} bytes`);
  if (!res.body) return 0;
  let total = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, done) {
      total += chunk.length;
      done(
        total > maxBytes ? new AppError('validation_error', `${field}: larger than ${maxBytes} bytes`) : null,
        chunk,
      );
    },
  });
  await pipeline(Readable.fromWeb(res.body as never), limit, createWriteStream(file));
  return total;
}

/** Read a response body up to `maxBytes`, failing beyond it. */
export async function readLimited(res: Response, maxBytes: number, field: string): Promise<Buffer> {
  const len = Number(res.headers.get('content-length') ?? '0');
  if (len > maxBytes) throw new AppError('validation_error', `${field}: larger than ${maxBytes} bytes`);
  const chunks: Buffer[] = [];
  let total = 0;
  if (!res.body) return Buffer.alloc(0);
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.length;
    if (total > maxBytes) throw new AppError('validation_error', `${field}: larger than ${maxBytes} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

/**
 * Why fetching an input URL failed, in words a user can act on: the error a job fails with
 * names the input and the cause (`imageUrl: no answer within 20 s`). A transient failure (no
 * answer, connection refused or reset): the job is tried again; its last error is this one.
 */
export class InputFetchError extends Error {
  override name = 'InputFetchError';
}

export interface InputFetchOptions extends SsrfOptions {
  /** The job's signal: when it aborts (cancel, shutdown) its own reason is thrown, unchanged. */
  signal: AbortSignal;
  /** How long the input's server may take to start answering (INPUT_FETCH_TIMEOUT_MS). */
  answerMs: number;
  /** How long the whole download may take, answer included. */
  totalMs: number;
  maxBytes: number;
  headers?: Record<string, string>;
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/** What a network error says, without Node's internals. */
function networkCause(err: Error & { code?: string }): string {
  const code = err.code ?? (err.cause as { code?: string } | undefined)?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host not found (DNS did not answer)',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    ETIMEDOUT: 'connection timed out',
    UND_ERR_SOCKET: 'connection closed before the answer ended',
  };
  return (code && known[code]) ?? err.message;
}

/**
 * The one way the workers fetch an engine input from a user-supplied URL (imageUrl, imageUrls[i],
 * videoUrl, openingFrameUrl, referenceImageUrls.i, brandUrl): through the SSRF guard, with a
 * time to answer and a time for the whole download, the body read up to `maxBytes` into memory
 * (or streamed into `opts.file`). Failures are AppError for what the user must fix (blocked
 * address, HTTP error status, too large) and InputFetchError naming the input and the cause for
 * the rest: never a bare "The operation was aborted".
 */
export async function fetchInput(raw: string, field: string, opts: InputFetchOptions): Promise<Buffer>;
export async function fetchInput(
  raw: string,
  field: string,
  opts: InputFetchOptions & { file: string },
): Promise<number>;
export async function fetchInput(
  raw: string,
  field: string,
  opts: InputFetchOptions & { file?: string },
): Promise<Buffer | number> {
  const answered = new AbortController();
  const answerTimer = setTimeout(() => answered.abort(), opts.answerMs);
  const total = AbortSignal.timeout(opts.totalMs);
  const signal = AbortSignal.any([opts.signal, answered.signal, total]);
  const ssrf: SsrfOptions = { allowLoopback: opts.allowLoopback, allowHttp: opts.allowHttp };
  try {
    const res = await guardedFetch(raw, field, { signal, headers: opts.headers }, ssrf);
    clearTimeout(answerTimer);
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw new AppError('validation_error', `${field}: could not be fetched (HTTP ${res.status})`);
    }
    return opts.file === undefined
      ? await readLimited(res, opts.maxBytes, field)
      : await saveLimited(res, opts.file, opts.maxBytes, field);
  } catch (err) {
    if (opts.signal.aborted || err instanceof AppError) throw err;
    if (answered.signal.aborted) throw new InputFetchError(`${field}: no answer within ${seconds(opts.answerMs)}`);
    if (total.aborted) throw new InputFetchError(`${field}: not received completely within ${seconds(opts.totalMs)}`);
    throw new InputFetchError(`${field}: could not be fetched (${networkCause(err as Error)})`);
  } finally {
    clearTimeout(answerTimer);
  }
}
