import type { LookupFunction } from 'node:net';
import { AppError } from '../infra/errors';
import { guardedLookup as ssrfLookup, urlProblem } from '../infra/ssrf';

/**
 * Webhook targets through the one SSRF guard of platform/infra/ssrf.ts: https only (plain http only to a
 * loopback address, and only when ALLOW_LOOPBACK_URLS is set, for development and tests), no
 * credentials in the URL, and every address the host resolves to outside private, loopback,
 * link-local, CGNAT and metadata ranges. Checked at creation, on every URL change, and again at
 * every delivery attempt, where the connection itself also goes through `guardedLookup`, so a
 * DNS answer that changed after the check is caught when the socket opens.
 */
export interface TargetOptions {
  allowLoopback: boolean;
}

const rules = (opts: TargetOptions) => ({
  allowLoopback: opts.allowLoopback,
  allowHttp: opts.allowLoopback ? ('loopback' as const) : false,
});

/** Why `raw` cannot be a webhook target right now, or null when it can. */
export async function targetProblem(raw: string, opts: TargetOptions): Promise<string | null> {
  return (
    (await urlProblem(raw, rules(opts))).problem?.replace(
      'which the server will not fetch',
      'which the service does not deliver to',
    ) ?? null
  );
}

/** Throw validation_error `url: …` unless `raw` is an acceptable target. */
export async function assertWebhookTarget(raw: string, opts: TargetOptions): Promise<void> {
  const problem = await targetProblem(raw, opts);
  if (problem) throw new AppError('validation_error', `url: ${problem}`);
}

/** A `lookup` for http(s).request that resolves and checks again when the socket connects. */
export function guardedLookup(opts: TargetOptions & { http: boolean }): LookupFunction {
  return ssrfLookup({ ...rules(opts), http: opts.http });
}
