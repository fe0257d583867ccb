import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AppError } from '../infra/errors';
import { type IdempotencyDoc, type Store, openStore } from '../infra/mongo';

const stable = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
};

/**
 * `seed` names this use of the key (the record and when it was made): a retry that takes the
 * record over gets the same seed, a new request after the record expired gets another.
 */
export type IdempotencyStart =
  | { kind: 'proceed'; id: string; seed: string }
  | { kind: 'replay'; status: number; body: unknown };

/**
 * Idempotency-Key (IETF draft, Stripe's behaviour): scoped to the account; the first request
 * holds the record; a retry with the same key and body replays the stored 2xx response; the same
 * key with another body or route answers 422; a duplicate while the first is in flight waits up
 * to `waitMs` for it, then answers 409. Only 2xx answers are stored: after an error the client
 * may retry with the same key and body (the record is released, not deleted; see abort).
 *
 * Crash safety: the record names its owner (this process) and holds a short lease (`leaseMs`)
 * that the owner renews every third of it while the request runs (one update for all of its
 * records). When the owner dies the lease runs out within `leaseMs` and the next retry takes the
 * record over; since the handler derives its ids from the key (HandlerContext.idFor), the
 * takeover finds the job the dead request made and answers with it, billed once.
 * Length: a factory whose 7 functions share the collection, the owner id and the lease timers; the longest,
 * start, is 60 lines.
 */
export function createIdempotency(store: Store, opts: { ttlHours: number; leaseMs: number; waitMs?: number }) {
  const db = openStore(store);
  const waitMs = opts.waitMs ?? 5000;
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const held = new Set<string>();
  const heartbeat = setInterval(
    () => {
      if (held.size === 0) return;
      const until = new Date(Date.now() + opts.leaseMs);
      // One command, one statement per record by _id (FerretDB 1.24 scans for `_id: { $in }`).
      db.idempotency
        .bulkWrite(
          [...held].map((id) => ({
            updateOne: {
              filter: { _id: id, state: 'in_flight' as const, owner },
              update: { $set: { lockedUntil: until } },
            },
          })),
          { ordered: false },
        )
        .catch(() => {}); // a missed beat only shortens the lease; the next one retries
    },
    Math.max(200, Math.floor(opts.leaseMs / 3)),
  );
  heartbeat.unref();

  /**
   * Records whose release (abort) could not be written (the database was away): released as soon
   * as it is back, so a retry that reaches another API process need not wait out the lease.
   */
  const unreleased = new Set<string>();
  // biome-ignore lint/correctness/noUnusedVariables: read by the ??= below, which keeps one release loop at a time
  let releasing: Promise<void> | undefined;
  const releaseLater = (id: string) => {
    unreleased.add(id);
    releasing ??= (async () => {
      await db.health.whenUp();
      const ids = [...unreleased].filter((x) => !held.has(x));
      unreleased.clear();
      try {
        if (ids.length)
          await db.idempotency.bulkWrite(
            ids.map((x) => ({
              updateOne: {
                filter: { _id: x, state: 'in_flight' as const, owner },
                update: { $set: { lockedUntil: new Date(0) } },
              },
            })),
            { ordered: false },
          );
      } catch {
        // their leases run out by themselves within leaseMs
      } finally {
        releasing = undefined;
      }
    })();
  };

  const proceed = (id: string, createdAt: Date): IdempotencyStart => {
    held.add(id);
    return { kind: 'proceed', id, seed: `${id}:${createdAt.getTime()}` };
  };

  async function start(accountId: string, key: string, route: string, body: unknown): Promise<IdempotencyStart> {
    if (key.length === 0 || key.length > 255)
      throw new AppError('validation_error', 'Idempotency-Key: must be 1 to 255 characters');
    const id = createHash('sha256').update(`${accountId}\n${key}`).digest('hex');
    const bodyHash = createHash('sha256')
      .update(stable(body ?? null))
      .digest('hex');
    const now = new Date();
    const doc: IdempotencyDoc = {
      _id: id,
      accountId,
      key,
      route,
      bodyHash,
      state: 'in_flight',
      owner,
      lockedUntil: new Date(now.getTime() + opts.leaseMs),
      response: null,
      createdAt: now,
      expiresAt: new Date(now.getTime() + opts.ttlHours * 3600_000),
    };
    try {
      await db.idempotency.insertOne(doc);
      return proceed(id, now);
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
    }
    const deadline = Date.now() + waitMs;
    for (;;) {
      const existing = await db.idempotency.findOne({ _id: id, accountId });
      if (!existing) {
        // The first attempt failed and released the key between our insert and read.
        return start(accountId, key, route, body);
      }
      if (existing.route !== route || existing.bodyHash !== bodyHash) {
        throw new AppError('idempotency_key_reused', 'Idempotency-Key: already used with a different request body');
      }
      if (existing.state === 'done' && existing.response) return { kind: 'replay', ...existing.response };
      // Its owner stopped renewing the lease (it died), or it is this process and none of its
      // requests runs it any more (an attempt that failed while the database was away): take
      // the record over.
      if (
        existing.lockedUntil.getTime() < Date.now() ||
        (existing.state === 'in_flight' && existing.owner === owner && !held.has(id))
      ) {
        const taken = await db.idempotency.findOneAndUpdate(
          { _id: id, state: 'in_flight', lockedUntil: existing.lockedUntil },
          { $set: { owner, lockedUntil: new Date(Date.now() + opts.leaseMs) } },
        );
        if (taken) return proceed(id, taken.createdAt);
      }
      if (Date.now() > deadline) {
        throw new AppError(
          'idempotency_in_flight',
          'Idempotency-Key: a request with this key is still in progress; retry later',
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    /** One account's keys: the record of a key is found only by the account that sent it. */
    forAccount: (accountId: string) => ({
      start: (key: string, route: string, requestBody: unknown) => start(accountId, key, route, requestBody),
    }),

    /**
     * The answer is stored before this process lets go of the record: a retry of the same key on
     * this process waits while the record is held, so one arriving during the write replays the
     * stored answer instead of taking the record over and running the request a second time.
     */
    async finish(id: string, status: number, body: unknown): Promise<void> {
      if (status >= 200 && status < 300) {
        try {
          await db.idempotency.updateOne({ _id: id, owner }, { $set: { state: 'done', response: { status, body } } });
        } finally {
          held.delete(id);
        }
      } else {
        await this.abort(id);
      }
    },

    /**
     * The request failed: the answer is not stored, and the record is released at once (its
     * lease set in the past) rather than deleted, so a retry takes it over with the same seed
     * and finds whatever the failed attempt had already made (a job stored before a timeout, say)
     * instead of making a second one.
     */
    async abort(id: string): Promise<void> {
      // Never throws: the failure being answered matters more, and an unreleased record only
      // makes a retry wait (at most leaseMs; this process takes its own over at once).
      // Held until the release is written, as in finish: a retry taking the record over before
      // the write would have its lease cleared by it.
      if (!db.health.up) {
        held.delete(id);
        return releaseLater(id);
      }
      try {
        await db.idempotency.updateOne(
          { _id: id, state: 'in_flight', owner },
          { $set: { lockedUntil: new Date(0) } },
          { timeoutMS: 2000 },
        );
        held.delete(id);
      } catch {
        held.delete(id);
        releaseLater(id);
      }
    },

    close(): void {
      clearInterval(heartbeat);
    },
  };
}
export type Idempotency = ReturnType<typeof createIdempotency>;

/** Deletes the records whose retention ended before `now` (the scheduler's `idempotency.expire`). */
export async function expireIdempotencyRecords(store: Store, now: Date): Promise<number> {
  const db = openStore(store);
  return (await db.idempotency.deleteMany({ expiresAt: { $lt: now } })).deletedCount;
}
