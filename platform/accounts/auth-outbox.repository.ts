import { newId } from '../infra/ids';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';

/** A stored invalidation waiting for the broker's confirm. WARNING: persisted; add fields, never rename. */
export interface AuthOutboxDoc<M> {
  /** `inv_…`. */
  _id: string;
  msg: M;
  createdAt: Date;
}

/**
 * Key and account invalidations stored before they are broadcast (platform/accounts/accounts.ts
 * `createAuthInvalidations`). Generic over the message so the message's schema stays with the
 * code that sends and reads it.
 */
export function createAuthOutbox<M>(store: Store) {
  const db = openStore(store);
  const outbox = db.db.collection<AuthOutboxDoc<M>>(COLLECTIONS.authOutbox);
  return {
    /** Store `msg`; its outbox id. */
    async add(msg: M): Promise<string> {
      const id = newId('inv');
      await outbox.insertOne({ _id: id, msg, createdAt: new Date() });
      return id;
    },
    async remove(id: string): Promise<void> {
      await outbox.deleteOne({ _id: id });
    },
    /** At most `limit` entries stored before `before`, oldest first. */
    olderThan: (before: Date, limit: number) =>
      outbox
        .find({ createdAt: { $lt: before } })
        .sort({ createdAt: 1 })
        .limit(limit)
        .toArray(),
  };
}
