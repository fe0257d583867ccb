import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { AppError } from './errors';

/**
 * The one SSRF guard for every URL the server fetches (webhook targets, imageUrl,
 * referenceImageUrls, brandUrl, videoUrl): http(s) only, no credentials in the URL, and every
 * resolved address checked against private, loopback, link-local, CGNAT, multicast and cloud
 * metadata ranges, at every fetch (DNS may change between checks). `allowLoopback` exists for
 * tests and local development only; production never sets it.
 */
export interface SsrfOptions {
  allowLoopback?: boolean;
  /** Plain http is accepted unless false (user media URLs are "http(s)" in SPEC). */
  allowHttp?: boolean;
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
] as const) blockList.addSubnet(addr, prefix, 'ipv4');
for (const [addr, prefix] of [
  ['::', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
  ['fd00:ec2::', 32], // AWS metadata over IPv6
  ['2001:db8::', 32],
  ['64:ff9b::', 96], // NAT64: would reach any IPv4 address, metadata included
  ['::', 96], // IPv4-compatible (deprecated) addresses
] as const) blockList.addSubnet(addr, prefix, 'ipv6');
const loopback = new net.BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Why an address may not be fetched, or null when it may. */
export function addressProblem(address: string, opts: SsrfOptions = {}): string | null {
  let ip = address;
  let family: 'ipv4' | 'ipv6' = net.isIPv4(ip) ? 'ipv4' : 'ipv6';
  // IPv4-mapped IPv6 (::ffff:10.0.0.1) is judged as IPv4.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped?.[1]) {
    ip = mapped[1];
    family = 'ipv4';
  }
  if (loopback.check(ip, family)) return opts.allowLoopback ? null : 'loopback address';
  if (blockList.check(ip, family)) return 'private, link-local or reserved address';
  return null;
}

/** Check a URL and every address its host resolves to. Throws validation_error naming `field`. */
export async function assertFetchable(raw: string, field: string, opts: SsrfOptions = {}): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('validation_error', `${field}: must be an absolute URL`);
  }
  const httpAllowed = opts.allowHttp ?? true;
  if (url.protocol !== 'https:' && !(httpAllowed && url.protocol === 'http:')) {
    throw new AppError('validation_error', `${field}: must be an ${httpAllowed ? 'http(s)' : 'https'} URL`);
  }
  if (url.username || url.password) throw new AppError('validation_error', `${field}: must not carry credentials`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (net.isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      throw new AppError('validation_error', `${field}: host ${host} does not resolve`);
    }
  }
  for (const a of addresses) {
    const problem = addressProblem(a, opts);
    if (problem) throw new AppError('validation_error', `${field}: ${host} resolves to a ${problem}, which the server will not fetch`);
  }
  return url;
}

/**
 * A `lookup` for http(s).request that resolves the host and checks every address again when the
 * socket connects, so a DNS answer that changed after assertFetchable (rebinding) is refused.
 */
export function guardedLookup(opts: SsrfOptions = {}): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    dns.promises.lookup(hostname, { all: true, verbatim: true }).then(
      (found) => {
        for (const a of found) {
          const problem = addressProblem(a.address, opts);
          if (problem) return callback(Object.assign(new Error(`${hostname} resolves to a ${problem}`), { code: 'ETARGETBLOCKED' }));
        }
        if (found.length === 0) return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' }));
        if (options?.all) return callback(null, found);
        return callback(null, found[0]!.address, found[0]!.family);
      },
      (err: Error) => callback(err),
    );
  }) as unknown as LookupFunction;
}

/** One request whose socket connects only to addresses the guard accepts. */
function guardedRequest(url: URL, field: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; signal?: AbortSignal }, opts: SsrfOptions): Promise<Response> {
  const mod = url.protocol === 'https:' ? https : http;
  const method = init.method ?? 'GET';
  return new Promise((resolve, reject) => {
    const req = mod.request(url, { method, headers: init.headers, signal: init.signal, lookup: guardedLookup(opts) }, (res) => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(res.headers)) for (const x of Array.isArray(v) ? v : v === undefined ? [] : [v]) headers.append(k, x);
      const status = res.statusCode ?? 502;
      const noBody = method === 'HEAD' || [204, 205, 304].includes(status);
      if (noBody) res.resume();
      resolve(new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status: status < 200 ? 502 : status, headers }));
    });
    req.on('error', (err: Error & { code?: string }) =>
      reject(err.code === 'ETARGETBLOCKED' ? new AppError('validation_error', `${field}: ${err.message}, which the server will not fetch`) : err),
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
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; signal?: AbortSignal; timeoutMs?: number } = {},
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
