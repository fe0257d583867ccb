import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { z } from 'zod';
import type { AccountFeatures } from '../../contracts/account';
import type { Plan, Scope } from '../../contracts/registry';
import { SCOPES } from '../../contracts/registry';
import { toUnits } from '../credits/credits';
import { newId } from '../infra/ids';
import type { AmqpClient } from '../infra/amqp';
import type { Logger } from '../infra/log';
import type { AccountDoc, ApiKeyDoc, Database } from '../infra/mongo';
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
 * The console side of accounts: create accounts and keys, revoke keys. There is no public
 * endpoint for these (SPEC 5.2: keys are managed in the developer console). Every change that
 * authentication caches is announced through `invalidate` after it is stored.
 */
export function createAccountsRepository(
  db: Database,
  opts: { invalidate?: (msg: AuthInvalidation) => Promise<void> } = {},
) {
  const invalidate = opts.invalidate ?? (async () => {});
  return {
    async createAccount(input: {
      name: string;
      plan: Plan;
      credits: number;
      features?: Partial<AccountFeatures>;
      id?: string;
    }): Promise<AccountDoc> {
      const doc: AccountDoc = {
        _id: input.id ?? newId('acct'),
        name: input.name,
        plan: input.plan,
        millicredits: toUnits(input.credits),
        features: { ...DEFAULT_FEATURES, ...input.features },
        createdAt: new Date(),
      };
      await db.accounts.insertOne(doc);
      return doc;
    },

    /**
     * Creates a key and returns it in full, the only time it exists outside the caller.
     * `folderPins`: Drive folder ids the key is confined to (it sees and changes only those
     * folders and their descendants; omitted or empty: the whole Drive).
     */
    async createKey(
      accountId: string,
      opts: { name?: string; scopes?: Scope[]; folderPins?: string[] } = {},
    ): Promise<{ key: string; doc: ApiKeyDoc }> {
      const key = KEY_PREFIX + randomBytes(32).toString('base64url');
      const doc: ApiKeyDoc = {
        _id: newId('key'),
        accountId,
        name: opts.name ?? 'default',
        hash: hashKey(key),
        prefix: key.slice(0, 10),
        scopes: opts.scopes ?? [...SCOPES],
        ...(opts.folderPins?.length ? { folderPins: [...new Set(opts.folderPins)] } : {}),
        createdAt: new Date(),
        revokedAt: null,
      };
      await db.apiKeys.insertOne(doc);
      return { key, doc };
    },

    /** Revoke a key; every API process refuses it once the invalidation arrives (milliseconds). */
    async revokeKey(accountId: string, keyId: string): Promise<boolean> {
      const r = await db.apiKeys.updateOne(
        { _id: keyId, accountId, revokedAt: null },
        { $set: { revokedAt: new Date() } },
      );
      await invalidate({ kind: 'key', keyId });
      return r.modifiedCount === 1;
    },

    async setScopes(accountId: string, keyId: string, scopes: Scope[]): Promise<boolean> {
      const r = await db.apiKeys.updateOne({ _id: keyId, accountId }, { $set: { scopes } });
      await invalidate({ kind: 'key', keyId });
      return r.matchedCount === 1;
    },

    getAccount: (accountId: string) => db.accounts.findOne({ _id: accountId }),

    async setPlan(accountId: string, plan: Plan): Promise<void> {
      await db.accounts.updateOne({ _id: accountId }, { $set: { plan } });
      await invalidate({ kind: 'account', accountId });
    },

    async setFeatures(accountId: string, features: Partial<AccountFeatures>): Promise<void> {
      const set = Object.fromEntries(Object.entries(features).map(([k, v]) => [`features.${k}`, v]));
      await db.accounts.updateOne({ _id: accountId }, { $set: set });
      await invalidate({ kind: 'account', accountId });
    },

    /**
     * The key `keyId` of `accountId` and its account, as authentication sees them (a long-lived
     * session checks the key that opened it this way); null when either is gone or the key was
     * revoked.
     */
    async byIds(accountId: string, keyId: string): Promise<Authenticated | null> {
      const [account, key] = await Promise.all([
        db.accounts.findOne({ _id: accountId }, { projection: { millicredits: 0, chargedRefs: 0, refundedJobs: 0 } }),
        db.apiKeys.findOne({ _id: keyId, accountId }),
      ]);
      return account && key && !key.revokedAt ? { key, account } : null;
    },

    /**
     * The scopes and the account's plan of each key in `keyIds` that is still live (not revoked,
     * its account there), in two reads whatever their number; a key absent from the map is not.
     */
    async liveKeys(keyIds: readonly string[]): Promise<Map<string, { scopes: Scope[]; plan: Plan }>> {
      const keys = await db.apiKeys
        .find({ _id: { $in: [...keyIds] }, revokedAt: null }, { projection: { _id: 1, accountId: 1, scopes: 1 } })
        .toArray();
      const accountIds = [...new Set(keys.map((k) => k.accountId))];
      const plans = new Map(
        (await db.accounts.find({ _id: { $in: accountIds } }, { projection: { _id: 1, plan: 1 } }).toArray()).map(
          (a) => [a._id, a.plan],
        ),
      );
      const live = new Map<string, { scopes: Scope[]; plan: Plan }>();
      for (const k of keys) {
        const plan = plans.get(k.accountId);
        if (plan) live.set(k._id, { scopes: k.scopes, plan });
      }
      return live;
    },

    /** The live key and account for a presented key, or null. Two reads; see createAuthCache. */
    async authenticate(presented: string): Promise<Authenticated | null> {
      if (!presented.startsWith(KEY_PREFIX) || presented.length > 200) return null;
      const hash = hashKey(presented);
      const key = await db.apiKeys.findOne({ hash });
      if (!key || key.revokedAt) return null;
      // The index lookup already matched; compare again in constant time as defence in depth.
      if (!timingSafeEqual(Buffer.from(key.hash, 'hex'), Buffer.from(hash, 'hex'))) return null;
      const account = await db.accounts.findOne(
        { _id: key.accountId },
        { projection: { millicredits: 0, chargedRefs: 0, refundedJobs: 0 } },
      );
      return account ? { key, account } : null;
    },
  };
}

/**
 * How key and account changes reach every API process: this process hears them at once
 * (`local`); the others over the RabbitMQ fanout. Each invalidation is stored before it is
 * broadcast and deleted once the broker confirmed it; `sweep` (run by the scheduler) broadcasts
 * what is left (a crash, or this process without its broker while the others have theirs), so no
 * API process keeps serving a revoked key past the next sweep.
 */
export function createAuthInvalidations(deps: { db: Database; amqp: AmqpClient; exchange: string; log: Logger }) {
  const { db, amqp, log } = deps;
  const local = new EventEmitter<{ change: [AuthInvalidation] }>();
  const outbox = createAuthOutbox<AuthInvalidation>(db);
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
