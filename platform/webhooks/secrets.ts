import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

/**
 * A webhook signing secret at rest: AES-256-GCM under a key derived from config
 * WEBHOOK_SECRET_KEY, with the webhook id as associated data, so a ciphertext copied onto another
 * webhook does not decrypt. WARNING: persisted in webhook documents.
 */
export interface EncryptedSecret {
  alg: 'aes-256-gcm';
  /** First 8 hex characters of SHA-256 of the key: tells which key encrypted it (rotation). */
  keyId: string;
  iv: string;
  tag: string;
  data: string;
}

/** A new signing secret: `whsec_` + 32 random bytes, base64url. */
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

/** `sha256=` + lowercase hex HMAC-SHA256 of the exact raw body (SPEC 6.3). */
export const signPayload = (secret: string, rawBody: string | Buffer) =>
  `sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`;

export function createSecretBox(configKey: string) {
  const key = createHash('sha256').update(configKey, 'utf8').digest();
  const keyId = createHash('sha256').update(key).digest('hex').slice(0, 8);
  return {
    keyId,
    seal(secret: string, webhookId: string): EncryptedSecret {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(webhookId, 'utf8'));
      const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return {
        alg: 'aes-256-gcm',
        keyId,
        iv: iv.toString('base64'),
        tag: cipher.getAuthTag().toString('base64'),
        data: data.toString('base64'),
      };
    },
    /** Throws when the key is not the one that sealed it or the record was tampered with. */
    open(box: EncryptedSecret, webhookId: string): string {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(box.iv, 'base64'));
      decipher.setAAD(Buffer.from(webhookId, 'utf8'));
      decipher.setAuthTag(Buffer.from(box.tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(box.data, 'base64')), decipher.final()]).toString('utf8');
    },
  };
}
export type SecretBox = ReturnType<typeof createSecretBox>;
