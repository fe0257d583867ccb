import { keysetPage, type Page } from '../infra/lists';
import { newId } from '../infra/ids';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';

/** One delivery attempt (SPEC 6.4.5). WARNING: persisted; add fields, never rename them. */
export interface DeliveryDoc {
  _id: string;
  accountId: string;
  webhookId: string;
  /** The delivery id sent as eventId / X-Service-Event-Id; the same on every attempt. */
  eventId: string;
  event: string;
  attempt: number;
  outcome: 'delivered' | 'failed';
  statusCode: number | null;
  durationMs: number;
  responseExcerpt: string | null;
  error: string | null;
  nextAttemptAt: Date | null;
  redelivered: boolean;
  at: Date;
}

export const DELIVERY_ID_PREFIX = 'whd';

/** The delivery log, newest first, paginated by an opaque (at, id) cursor. */
export function createDeliveriesRepository(store: Store) {
  const db = openStore(store);
  const col = db.db.collection<DeliveryDoc>(COLLECTIONS.webhookDeliveries);
  return {
    async record(doc: Omit<DeliveryDoc, '_id'>): Promise<DeliveryDoc> {
      const full = { _id: newId(DELIVERY_ID_PREFIX), ...doc };
      await col.insertOne(full);
      return full;
    },
    /** Delete attempts older than `before` (scheduler). */
    async expire(before: Date): Promise<number> {
      return (await col.deleteMany({ at: { $lt: before } })).deletedCount;
    },
    forAccount: (accountId: string) => ({
      page: (webhookId: string, opts: { limit: number; cursor?: string }): Promise<Page<DeliveryDoc>> =>
        keysetPage(col, { accountId, webhookId }, { tag: 'deliveries:at:desc', field: 'at', direction: -1, ...opts }),
      async removeForWebhook(webhookId: string): Promise<void> {
        await col.deleteMany({ accountId, webhookId });
      },
    }),
  };
}
export type DeliveriesRepository = ReturnType<typeof createDeliveriesRepository>;
