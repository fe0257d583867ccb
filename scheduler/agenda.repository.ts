import { MongoBackend } from '@agendajs/mongo-backend';
import { COLLECTIONS, type Database } from '../platform/infra/mongo';

/**
 * Agenda's own collection. Agenda reads and writes it; the scheduler touches it only to release
 * locks that a database outage left behind (scheduler.ts releaseLocksAfterOutage).
 */
export function createAgendaTasks(db: Database) {
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
export const agendaBackend = (db: Database) => new MongoBackend({ mongo: db.db, collection: COLLECTIONS.agenda });
