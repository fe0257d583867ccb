import { type Store, openStore } from '../../platform/infra/mongo';

/**
 * The research corpus's optional sources: collections that other features may keep in a
 * deployment (notes), read by name and only when present. Every read carries the account id.
 */
export function createWorkspaceRepository(store: Store) {
  const db = openStore(store);
  return {
    /** The collections this database holds, by name. */
    async present(): Promise<Set<string>> {
      return new Set((await db.db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name));
    },

    /** Up to `limit` documents of the account in `collection`, whatever their shape. */
    textDocs: (collection: string, accountId: string, limit: number) =>
      db.db
        .collection(collection)
        .find({ accountId } as never)
        .limit(limit)
        .toArray(),
  };
}
