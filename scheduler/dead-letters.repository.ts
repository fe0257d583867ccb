import { newId } from '../platform/infra/ids';
import { COLLECTIONS, type Store, openStore } from '../platform/infra/mongo';

/** A dead message parked for inspection (scheduler/dead-letters.ts). WARNING: persisted. */
interface DeadLetterDoc {
  _id: string;
  at: Date;
  queue: string;
  reason: string;
  jobId: string | null;
  deliveryCount: unknown;
  bytes: number;
  contentBase64: string;
}

/** Parked dead letters: operations data of no account, read by people and by tests. */
export function createDeadLetters(store: Store) {
  const db = openStore(store);
  const parked = db.db.collection<DeadLetterDoc>(COLLECTIONS.deadLetters);
  return {
    async park(letter: Omit<DeadLetterDoc, '_id' | 'at'>): Promise<void> {
      await parked.insertOne({ _id: newId('dlq'), at: new Date(), ...letter });
    },

    /** Delete those parked before `before`; how many went. */
    async expire(before: Date): Promise<number> {
      return (await parked.deleteMany({ at: { $lt: before } })).deletedCount;
    },
  };
}
