import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AccountFeatures } from '../../contracts/account';
import type { Plan, Scope } from '../../contracts/registry';
import { SCOPES } from '../../contracts/registry';
import { toUnits } from '../credits/credits';
import { newId } from '../infra/ids';
import { type AccountDoc, type ApiKeyDoc, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { type AuthInvalidation, type Authenticated, DEFAULT_FEATURES, KEY_PREFIX, hashKey } from './accounts';

/**
 * The console side of accounts: create accounts and keys, revoke keys. There is no public
 * endpoint for these (SPEC 5.2: keys are managed in the developer console). Every change that
 * authentication caches is announced through `invalidate` after it is stored.
 */
export function createAccountsRepository(
  store: Store,
  opts: { invalidate?: (msg: AuthInvalidation) => Promise<void> } = {},
) {
  const { accounts, apiKeys } = openStore(store);
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
      await accounts.insertOne(doc);
      return doc;
    },

    /**
     * One account: its document (the `_id` is the account id) and its keys (through a slice, so a
     * key of another account is not found).
     */
    forAccount(accountId: string) {
      const me = { _id: accountId };
      const keys = accountSlice(apiKeys, accountId);
      return {
        get: () => accounts.findOne(me),

        /** The account's plan only (a team drive's quota is its owner's). */
        plan: () => accounts.findOne(me, { projection: { plan: 1 } }),

        async setPlan(plan: Plan): Promise<void> {
          await accounts.updateOne(me, { $set: { plan } });
          await invalidate({ kind: 'account', accountId });
        },

        async setFeatures(features: Partial<AccountFeatures>): Promise<void> {
          const set = Object.fromEntries(Object.entries(features).map(([k, v]) => [`features.${k}`, v]));
          await accounts.updateOne(me, { $set: set });
          await invalidate({ kind: 'account', accountId });
        },

        /**
         * Creates a key and returns it in full, the only time it exists outside the caller.
         * `folderPins`: Drive folder ids the key is confined to (it sees and changes only those
         * folders and their descendants; omitted or empty: the whole Drive).
         */
        async createKey(
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
          await keys.insertOne(doc);
          return { key, doc };
        },

        /** Revoke a key; every API process refuses it once the invalidation arrives (milliseconds). */
        async revokeKey(keyId: string): Promise<boolean> {
          const r = await keys.updateOne({ _id: keyId, revokedAt: null }, { $set: { revokedAt: new Date() } });
          await invalidate({ kind: 'key', keyId });
          return r.modifiedCount === 1;
        },

        async setScopes(keyId: string, scopes: Scope[]): Promise<boolean> {
          const r = await keys.updateOne({ _id: keyId }, { $set: { scopes } });
          await invalidate({ kind: 'key', keyId });
          return r.matchedCount === 1;
        },

        /**
         * The account's key `keyId` and the account, as authentication sees them (a long-lived
         * session checks the key that opened it this way); null when either is gone or the key
         * was revoked.
         */
        async withKey(keyId: string): Promise<Authenticated | null> {
          const [account, key] = await Promise.all([
            accounts.findOne(me, { projection: { millicredits: 0, chargedRefs: 0, refundedJobs: 0 } }),
            keys.findOne({ _id: keyId }),
          ]);
          return account && key && !key.revokedAt ? { key, account } : null;
        },
      };
    },

    /** The key that signed a Drive download link, read fresh (never a cache): what the link re-checks. */
    signingKey: (keyId: string) =>
      apiKeys.findOne({ _id: keyId }, { projection: { _id: 1, accountId: 1, scopes: 1, folderPins: 1, revokedAt: 1 } }),

    /**
     * The scopes and the account's plan of each key in `keyIds` that is still live (not revoked,
     * its account there), in two reads whatever their number; a key absent from the map is not.
     */
    async liveKeys(keyIds: readonly string[]): Promise<Map<string, { scopes: Scope[]; plan: Plan }>> {
      const keys = await apiKeys
        .find({ _id: { $in: [...keyIds] }, revokedAt: null }, { projection: { _id: 1, accountId: 1, scopes: 1 } })
        .toArray();
      const accountIds = [...new Set(keys.map((k) => k.accountId))];
      const plans = new Map(
        (await accounts.find({ _id: { $in: accountIds } }, { projection: { _id: 1, plan: 1 } }).toArray()).map((a) => [
          a._id,
          a.plan,
        ]),
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
      const key = await apiKeys.findOne({ hash });
      if (!key || key.revokedAt) return null;
      // The index lookup already matched; compare again in constant time as defence in depth.
      if (!timingSafeEqual(Buffer.from(key.hash, 'hex'), Buffer.from(hash, 'hex'))) return null;
      const account = await accounts.findOne(
        { _id: key.accountId },
        { projection: { millicredits: 0, chargedRefs: 0, refundedJobs: 0 } },
      );
      return account ? { key, account } : null;
    },
  };
}
