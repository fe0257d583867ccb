import type { BusEvent } from '../../contracts/events';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';

/**
 * Non-job events on their way to the broker: stored before the publish, marked once the broker
 * confirmed it. WARNING: persisted; add fields, never rename.
 */
export interface EventOutboxDoc {
  /** The event's id. */
  _id: string;
  event: BusEvent;
  createdAt: Date;
  publishedAt: Date | null;
}

export function createEventOutbox(store: Store) {
  const db = openStore(store);
  const outbox = db.db.collection<EventOutboxDoc>(COLLECTIONS.eventOutbox);
  return {
    async add(event: BusEvent): Promise<void> {
      await outbox.insertOne({ _id: event.eventId, event, createdAt: new Date(), publishedAt: null });
    },
    async markPublished(eventId: string): Promise<void> {
      await outbox.updateOne({ _id: eventId }, { $set: { publishedAt: new Date() } });
    },
    /** At most `limit` events stored before `before` and never confirmed. */
    unpublished: (before: Date, limit: number) =>
      outbox
        .find({ publishedAt: null, createdAt: { $lt: before } })
        .limit(limit)
        .toArray(),
    /** Delete published entries older than `before`; how many went. */
    async expirePublished(before: Date): Promise<number> {
      return (await outbox.deleteMany({ publishedAt: { $lt: before } })).deletedCount;
    },
  };
}
