import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AccountFeatures } from '../contracts/account';
import type { Plan, Scope } from '../contracts/registry';
import { SCOPES } from '../contracts/registry';
import { newId } from './ids';
import type { AccountDoc, ApiKeyDoc, Database } from './mongo';

export const KEY_PREFIX = 'svc_';

export const DEFAULT_FEATURES: AccountFeatures = {
  premiumVideo: false,
  partnerImages: false,
  backgroundDecks: true,
  proactiveAudio: false,
  whiteLabel: false,
};

export const hashKey = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');

/**
 * The console side of accounts: create accounts and keys, revoke keys. There is no public
 * endpoint for these (SPEC 5.2: keys are managed in the developer console).
 */
export function createAccountsRepository(db: Database) {
  return {
    async createAccount(input: { name: string; plan: Plan; credits: number; features?: Partial<AccountFeatures>; id?: string }): Promise<AccountDoc> {
      const doc: AccountDoc = {
        _id: input.id ?? newId('acct'),
        name: input.name,
        plan: input.plan,
        credits: input.credits,
        features: { ...DEFAULT_FEATURES, ...input.features },
        createdAt: new Date(),
      };
      await db.accounts.insertOne(doc);
      return doc;
    },

    /** Creates a key and returns it in full, the only time it exists outside the caller. */
    async createKey(accountId: string, opts: { name?: string; scopes?: Scope[] } = {}): Promise<{ key: string; doc: ApiKeyDoc }> {
      const key = KEY_PREFIX + randomBytes(32).toString('base64url');
      const doc: ApiKeyDoc = {
        _id: newId('key'),
        accountId,
        name: opts.name ?? 'default',
        hash: hashKey(key),
        prefix: key.slice(0, 10),
        scopes: opts.scopes ?? [...SCOPES],
        createdAt: new Date(),
        revokedAt: null,
      };
      await db.apiKeys.insertOne(doc);
      return { key, doc };
    },

    async revokeKey(accountId: string, keyId: string): Promise<boolean> {
      const r = await db.apiKeys.updateOne({ _id: keyId, accountId, revokedAt: null }, { $set: { revokedAt: new Date() } });
      return r.modifiedCount === 1;
    },

    getAccount: (accountId: string) => db.accounts.findOne({ _id: accountId }),

    setPlan: (accountId: string, plan: Plan) => db.accounts.updateOne({ _id: accountId }, { $set: { plan } }),

    /** The live key and account for a presented key, or null. Looked up by hash on every request. */
    async authenticate(presented: string): Promise<{ key: ApiKeyDoc; account: AccountDoc } | null> {
      if (!presented.startsWith(KEY_PREFIX) || presented.length > 200) return null;
      const hash = hashKey(presented);
      const key = await db.apiKeys.findOne({ hash });
      if (!key || key.revokedAt) return null;
      // The index lookup already matched; compare again in constant time as defence in depth.
      if (!timingSafeEqual(Buffer.from(key.hash, 'hex'), Buffer.from(hash, 'hex'))) return null;
      const account = await db.accounts.findOne({ _id: key.accountId });
      return account ? { key, account } : null;
    },
  };
}
export type AccountsRepository = ReturnType<typeof createAccountsRepository>;
