import type { ImageResult } from '../../contracts/images';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';

/** An image as the assistant keeps it: the link and its facts, never the inline bytes. */
export type DeliveredImage = Omit<ImageResult, 'charged' | 'base64'>;

/**
 * What generate_image delivered, by the call's id (`deliveredBy` of its credit hold).
 * WARNING: persisted; add fields, never rename.
 */
export interface ImageDeliveryDoc {
  _id: string;
  accountId: string;
  prompt: string;
  result: DeliveredImage;
  createdAt: Date;
}

/** The assistant's image deliveries; an account's are read and stored through `forAccount(accountId)`. */
export function createImageDeliveries(store: Store) {
  const db = openStore(store);
  const deliveries = db.db.collection<ImageDeliveryDoc>(COLLECTIONS.assistantResults);
  return {
    /** The collection a credit hold names as its delivery (`deliveredBy.collection`). */
    collection: COLLECTIONS.assistantResults,
    forAccount(accountId: string) {
      const mine = accountSlice(deliveries, accountId);
      return {
        find: (id: string) => mine.findOne({ _id: id }),
        /** Store a delivery; a second one under the same id throws the duplicate-key error. */
        async insert(doc: Omit<ImageDeliveryDoc, 'accountId'>): Promise<void> {
          await mine.insertOne(doc as ImageDeliveryDoc);
        },
      };
    },
  };
}
