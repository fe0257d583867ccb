import { openStore, type Store } from '../../platform/infra/mongo';
import { accountSlice } from '../../platform/infra/tenant';

/**
 * The research corpus's optional sources: collections that other features may keep in a
 * deployment (notes), read by name and only when present. An account's documents are read
 * through `forAccount(accountId)`.
 */
export function createWorkspaceRepository(store: Store) {
  const db = openStore(store);
  return {
    /** The collections this database holds, by name. */
    async present(): Promise<Set<string>> {
      return new Set((await db.db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name));
    },

    forAccount: (accountId: string) => ({
      /** Up to `limit` documents of the account in `collection`, whatever their shape. */
      textDocs: (collection: string, limit: number) =>
        accountSlice(db.db.collection<{ accountId: string }>(collection), accountId).find().limit(limit).toArray(),
    }),
  };
}
