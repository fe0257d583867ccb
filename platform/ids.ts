import { randomBytes } from 'node:crypto';

/** `prefix_` + 20 random base32-ish characters (about 100 bits). */
export function newId(prefix: string): string {
  const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
  const bytes = randomBytes(20);
  let out = '';
  for (const b of bytes) out += alphabet[b & 31];
  return `${prefix}_${out}`;
}
