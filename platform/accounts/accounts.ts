import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { z } from 'zod';
import type { AccountFeatures } from '../../contracts/account';
import type { AmqpClient } from '../infra/amqp';
import type { Logger } from '../infra/log';
import type { AccountDoc, ApiKeyDoc, Store } from '../infra/mongo';
import { createAuthOutbox } from './auth-outbox.repository';

export const KEY_PREFIX = 'svc_';

export const DEFAULT_FEATURES: AccountFeatures = {
  premiumVideo: false,
  partnerImages: false,
  backgroundDecks: true,
  proactiveAudio: false,
  whiteLabel: false,
};

export const hashKey = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');

/** What authentication caches of an account: no balance (it moves on every charge) and no ref lists. */
export type AuthAccount = Omit<AccountDoc, 'millicredits' | 'chargedRefs' | 'refundedJobs'>;
export interface Authenticated {
  key: ApiKeyDoc;
  account: AuthAccount;
}

/**
 * A change that API processes must see at once: a key revoked or changed, an account's plan or
 * features changed. WARNING: the message format crosses processes of different versions.
 */
export const AuthInvalidationSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('key'), keyId: z.string() }),
  z.object({ kind: z.literal('account'), accountId: z.string() }),
]);
export type AuthInvalidation = z.infer<typeof AuthInvalidationSchema>;

/**
 * How key and account changes reach every API process: this process hears them at once
 * (`local`); the others over the RabbitMQ fanout. Each invalidation is stored before it is
 * broadcast and deleted once the broker confirmed it; `sweep` (run by the scheduler) broadcasts
 * what is left (a crash, or this process without its broker while the others have theirs), so no
 * API process keeps serving a revoked key past the next sweep.
 */
export function createAuthInvalidations(deps: { store: Store; amqp: AmqpClient; exchange: string; log: Logger }) {
  const { store, amqp, log } = deps;
  const local = new EventEmitter<{ change: [AuthInvalidation] }>();
  const outbox = createAuthOutbox<AuthInvalidation>(store);
  const broadcast = async (id: string, msg: AuthInvalidation): Promise<boolean> => {
    try {
      await amqp.broadcast(deps.exchange, msg);
    } catch (err) {
      log.warn('auth invalidation not broadcast; the scheduler sends it', { kind: msg.kind, err: err as Error });
      return false;
    }
    await outbox.remove(id);
    return true;
  };
  return {
    local,
    async publish(msg: AuthInvalidation): Promise<void> {
      local.emit('change', msg);
      await broadcast(await outbox.add(msg), msg);
    },
    /** Broadcast invalidations stored but never confirmed (older than `graceMs`). */
    async sweep(graceMs: number): Promise<number> {
      const left = await outbox.olderThan(new Date(Date.now() - graceMs), 500);
      let sent = 0;
      for (const doc of left) if (await broadcast(doc._id, doc.msg)) sent++;
      return sent;
    },
  };
}

export interface AuthCacheOptions {
  /** Backstop: an entry is read again from the database after this long (AUTH_CACHE_TTL_MS). */
  ttlMs: number;
  /** Most keys kept (oldest dropped first). */
  maxEntries?: number;
}

/**
 * Keys and their accounts cached in the API process, so a request needs no database read to
 * authenticate. Changes come over a RabbitMQ fanout (`subscribe` below): revocations, scope, plan
 * and feature changes drop the entries they touch in every API process within milliseconds.
 * While the fanout is down (broker away, channel lost) the cache is emptied and not used, since
 * an invalidation may have been missed; it comes back once the subscription is re-established.
 * A read that started before an invalidation is not cached (generation check), so a slow lookup
 * cannot put a just-revoked key back. Unknown keys are never cached (a flood of random keys
 * cannot grow memory). `ttlMs` bounds staleness if everything else failed.
 */
export function createAuthCache(lookup: (presented: string) => Promise<Authenticated | null>, opts: AuthCacheOptions) {
  const maxEntries = opts.maxEntries ?? 50_000;
  const byHash = new Map<string, { value: Authenticated; until: number }>();
  let generation = 0;
  let live = false;

  const drop = (pred: (v: Authenticated) => boolean) => {
    for (const [h, e] of byHash) if (pred(e.value)) byHash.delete(h);
  };

  return {
    async authenticate(presented: string): Promise<Authenticated | null> {
      const hash = hashKey(presented);
      const hit = live ? byHash.get(hash) : undefined;
      if (hit && hit.until > Date.now()) return hit.value;
      const started = generation;
      const value = await lookup(presented);
      if (value && live && started === generation) {
        byHash.delete(hash);
        byHash.set(hash, { value, until: Date.now() + opts.ttlMs });
        if (byHash.size > maxEntries) byHash.delete(byHash.keys().next().value!);
      }
      return value;
    },

    /** Apply a change announced on the fanout. */
    invalidate(msg: AuthInvalidation) {
      generation++;
      if (msg.kind === 'key') drop((v) => v.key._id === msg.keyId);
      else drop((v) => v.account._id === msg.accountId);
    },

    /** The fanout is (again) delivering: caching is safe. */
    ready() {
      generation++;
      byHash.clear();
      live = true;
    },

    /** The fanout was interrupted: forget everything and stop caching until `ready`. */
    lost() {
      generation++;
      live = false;
      byHash.clear();
    },

    get size() {
      return byHash.size;
    },
  };
}
export type AuthCache = ReturnType<typeof createAuthCache>;
