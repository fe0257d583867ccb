import { createHash, randomBytes } from 'node:crypto';

/** `prefix_` + 20 random base32-ish characters (about 100 bits). */
export function newId(prefix: string): string {
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  const bytes = randomBytes(20);
  let out = '';
  for (const b of bytes) out += alphabet[b & 31];
  return `${prefix}_${out}`;
}

/**
 * The same shape as newId, derived from `seed` (for example account + Idempotency-Key): a retry
 * of a request that died half-way names the same job and charge, so it finds them instead of
 * making new ones (SPEC 4 rule 3: a retry is not billed again).
 */
export function stableId(prefix: string, seed: string): string {
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  const bytes = createHash('sha256').update(`${prefix}\n${seed}`).digest();
  let out = '';
  for (let i = 0; i < 20; i++) out += alphabet[bytes[i]! & 31];
  return `${prefix}_${out}`;
}
