import { createHash } from 'node:crypto';
import { AppError } from '../../platform/errors';
import type { Database, IdempotencyDoc } from '../../platform/mongo';

const stable = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
};

export type IdempotencyStart = { kind: 'proceed'; id: string } | { kind: 'replay'; status: number; body: unknown };

/**
 * Idempotency-Key (IETF draft, Stripe's behaviour): scoped to the account; the first request
 * holds a lock; a retry with the same key and body replays the stored 2xx response; the same
 * key with another body or route answers 422; a duplicate while the first is in flight waits
 * up to `waitMs` for it, then answers 409. Only 2xx answers are stored: after an error the
 * client may retry with the same key.
 */
export function createIdempotency(db: Database, opts: { ttlHours: number; lockMs: number; waitMs?: number }) {
  const waitMs = opts.waitMs ?? 5000;
  return {
    async start(accountId: string, key: string, route: string, body: unknown): Promise<IdempotencyStart> {
      if (key.length === 0 || key.length > 255) throw new AppError('validation_error', 'Idempotency-Key: must be 1 to 255 characters');
      const id = createHash('sha256').update(`${accountId}\n${key}`).digest('hex');
      const bodyHash = createHash('sha256').update(stable(body ?? null)).digest('hex');
      const now = new Date();
      const doc: IdempotencyDoc = {
        _id: id,
        accountId,
        key,
        route,
        bodyHash,
        state: 'in_flight',
        lockedUntil: new Date(now.getTime() + opts.lockMs),
        response: null,
        createdAt: now,
        expiresAt: new Date(now.getTime() + opts.ttlHours * 3600_000),
      };
      try {
        await db.idempotency.insertOne(doc);
        return { kind: 'proceed', id };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
      }
      const deadline = Date.now() + waitMs;
      for (;;) {
        const existing = await db.idempotency.findOne({ _id: id, accountId });
        if (!existing) {
          // The first attempt failed and released the key between our insert and read.
          return this.start(accountId, key, route, body);
        }
        if (existing.route !== route || existing.bodyHash !== bodyHash) {
          throw new AppError('idempotency_key_reused', 'Idempotency-Key: already used with a different request body');
        }
        if (existing.state === 'done' && existing.response) return { kind: 'replay', ...existing.response };
        if (existing.lockedUntil.getTime() < Date.now()) {
          const taken = await db.idempotency.findOneAndUpdate(
            { _id: id, state: 'in_flight', lockedUntil: existing.lockedUntil },
            { $set: { lockedUntil: new Date(Date.now() + opts.lockMs) } },
          );
          if (taken) return { kind: 'proceed', id };
        }
        if (Date.now() > deadline) {
          throw new AppError('idempotency_in_flight', 'Idempotency-Key: a request with this key is still in progress; retry later');
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    },

    async finish(id: string, status: number, body: unknown): Promise<void> {
      if (status >= 200 && status < 300) {
        await db.idempotency.updateOne({ _id: id }, { $set: { state: 'done', response: { status, body } } });
      } else {
        await db.idempotency.deleteOne({ _id: id, state: 'in_flight' });
      }
    },

    async abort(id: string): Promise<void> {
      await db.idempotency.deleteOne({ _id: id, state: 'in_flight' });
    },
  };
}
export type Idempotency = ReturnType<typeof createIdempotency>;
