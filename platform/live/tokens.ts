import { hmacSign, signatureMatches } from '../infra/signing';

/**
 * Session tokens and resumption handles: `<kind>1.<base64url JSON claims>.<HMAC-SHA256>`. The
 * HMAC covers a per-kind prefix and the claims, so a handle never verifies as a token (nor a
 * token as a handle) and no other signed link of the service verifies as either.
 */
export type LiveTokenKind = 'lt' | 'lh';

export interface TokenClaims {
  /** Session id. */
  sid: string;
  /** Account id. */
  acc: string;
  /** Expiry, ms since the epoch. */
  exp: number;
  /** Token: the session's current token id (single use). Handle: the session's resumption generation. */
  n: string | number;
}

export type Verified =
  | { ok: true; claims: TokenClaims }
  | { ok: false; reason: 'malformed' | 'bad_signature' | 'expired' };

const message = (kind: LiveTokenKind, body: string) => `live-${kind}\n${body}`;

export function signLiveToken(secret: string, kind: LiveTokenKind, claims: TokenClaims): string {
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${kind}1.${body}.${hmacSign(secret, message(kind, body))}`;
}

/** Signature first (constant time), then the claims' shape and expiry. */
export function verifyLiveToken(secret: string, kind: LiveTokenKind, presented: string, now = Date.now()): Verified {
  const parts = presented.split('.');
  if (parts.length !== 3 || parts[0] !== `${kind}1` || !parts[1] || !parts[2])
    return { ok: false, reason: 'malformed' };
  if (!signatureMatches(hmacSign(secret, message(kind, parts[1])), parts[2]))
    return { ok: false, reason: 'bad_signature' };
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (typeof claims?.sid !== 'string' || typeof claims.acc !== 'string' || typeof claims.exp !== 'number')
    return { ok: false, reason: 'malformed' };
  if (claims.exp <= now) return { ok: false, reason: 'expired' };
  return { ok: true, claims };
}
