import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import net from 'node:net';
import { AppError } from '../errors';
import { addressProblem } from '../ssrf';

/**
 * Webhook targets through the SSRF guard of platform/ssrf.ts: https only (plain http only to a
 * loopback address, and only when ALLOW_LOOPBACK_URLS is set, for development and tests), no
 * credentials in the URL, and every address the host resolves to outside private, loopback,
 * link-local, CGNAT and metadata ranges. Checked at creation, on every URL change, and again
 * at every delivery attempt, where the connection itself also goes through `guardedLookup`, so
 * a DNS answer that changed after the check is caught when the socket opens.
 */
export interface TargetOptions {
  allowLoopback: boolean;
}

interface Resolved {
  address: string;
  family: 4 | 6;
}

/** Resolve a host; IP literals pass through. Read through `dns.promises` at call time (tests stub it). */
async function resolveHost(host: string): Promise<Resolved[]> {
  const family = net.isIP(host);
  if (family) return [{ address: host, family: family as 4 | 6 }];
  const all = await dns.promises.lookup(host, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

/** Why `host`'s addresses may not be connected to, or null. */
function addressesProblem(host: string, addresses: Resolved[], opts: TargetOptions & { httpOnlyLoopback: boolean }): string | null {
  if (addresses.length === 0) return `host ${host} does not resolve`;
  for (const a of addresses) {
    const problem = addressProblem(a.address, { allowLoopback: opts.allowLoopback });
    if (problem) return `${host} resolves to a ${problem}, which the service does not deliver to`;
    if (opts.httpOnlyLoopback && addressProblem(a.address) !== 'loopback address') {
      return 'must be an https URL (plain http is accepted only for loopback targets in development)';
    }
  }
  return null;
}

/** Why `raw` cannot be a webhook target right now, or null when it can. */
export async function targetProblem(raw: string, opts: TargetOptions): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute https URL';
  }
  const http = url.protocol === 'http:';
  if (url.protocol !== 'https:' && !(http && opts.allowLoopback)) return 'must be an https URL';
  if (url.username || url.password) return 'must not carry credentials';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: Resolved[];
  try {
    addresses = await resolveHost(host);
  } catch {
    return `host ${host} does not resolve`;
  }
  return addressesProblem(host, addresses, { ...opts, httpOnlyLoopback: http });
}

/** Throw validation_error `url: …` unless `raw` is an acceptable target. */
export async function assertWebhookTarget(raw: string, opts: TargetOptions): Promise<void> {
  const problem = await targetProblem(raw, opts);
  if (problem) throw new AppError('validation_error', `url: ${problem}`);
}

/** A `lookup` for http(s).request that resolves and checks again when the socket connects. */
export function guardedLookup(opts: TargetOptions & { http: boolean }): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    resolveHost(hostname).then(
      (addresses) => {
        const problem = addressesProblem(hostname, addresses, { ...opts, httpOnlyLoopback: opts.http });
        if (problem) return callback(Object.assign(new Error(problem), { code: 'ETARGETBLOCKED' }));
        if (options?.all) return callback(null, addresses);
        return callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: Error) => callback(err),
    );
  }) as unknown as LookupFunction;
}
