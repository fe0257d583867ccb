import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * HMAC-SHA256 signatures of public links (generated media, Drive downloads): base64url of
 * HMAC-SHA256(secret, message). Each kind of link signs its own message layout, so a signature
 * made for one kind never verifies as another.
 */
export const hmacSign = (secret: string, message: string): string =>
  createHmac('sha256', secret).update(message).digest('base64url');

/** Whether `presented` is the expected signature, compared in constant time. */
export function signatureMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const want = Buffer.from(expected);
  const got = Buffer.from(presented);
  return want.length === got.length && timingSafeEqual(want, got);
}
