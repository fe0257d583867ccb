import { MongoBackend } from '@agendajs/mongo-backend';
import { COLLECTIONS, type Store, openStore } from '../platform/infra/mongo';

/**
 * Agenda's own collection. Agenda reads and writes it; the scheduler touches it only to release
 * locks that a database outage left behind (scheduler.ts releaseLocksAfterOutage).
 */
export function createAgendaTasks(store: Store) {
  const db = openStore(store);
  return {
    /**
     * Release the locks `owner` took before `takenBefore` of tasks not named in `running`; how
     * many were released.
     */
    async releaseLocks(owner: string, takenBefore: Date, running: string[]): Promise<number> {
      const r = await db.db
        .collection(COLLECTIONS.agenda)
        .updateMany(
          { lastModifiedBy: owner, lockedAt: { $ne: null, $lt: takenBefore }, name: { $nin: running } },
          { $unset: { lockedAt: true } },
        );
      return r.modifiedCount;
    },
  };
}

/** Agenda's storage: its own collection of the service's database. */
export const agendaBackend = (store: Store) =>
  new MongoBackend({ mongo: openStore(store).db, collection: COLLECTIONS.agenda });
