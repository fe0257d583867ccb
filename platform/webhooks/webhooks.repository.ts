import { WEBHOOK_LIMITS } from '../../contracts/webhooks';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { COLLECTIONS, isDuplicateKey, type Store, openStore } from '../infra/mongo';
import type { EncryptedSecret } from './secrets';

/**
 * A stored webhook. WARNING: persisted; add fields, never rename them.
 * `secret` is encrypted (secrets.ts); it never leaves this module's callers except for signing.
 */
export interface WebhookDoc {
  _id: string;
  accountId: string;
  /** 0 to 9: a unique (accountId, slot) index enforces the per-account limit without a race. */
  slot: number;
  name: string;
  url: string;
  events: string[];
  isActive: boolean;
  secret: EncryptedSecret;
  /** Failed deliveries in a row (each after its retries); reset by a delivery and by re-enabling. */
  consecutiveFailures: number;
  disabledAt: Date | null;
  disabledReason: 'consecutive_failures' | 'manual' | null;
  lastDeliveryAt: Date | null;
  lastDeliveryStatus: 'delivered' | 'failed' | null;
  createdAt: Date;
  updatedAt: Date;
}

export const WEBHOOK_ID_PREFIX = 'wh';

/**
 * Webhook documents. Every operation is scoped by `forAccount(accountId)`: another account's
 * webhook is simply not found.
 */
export function createWebhooksRepository(store: Store) {
  const db = openStore(store);
  const col = db.db.collection<WebhookDoc>(COLLECTIONS.webhooks);

  const forAccount = (accountId: string) => ({
    list: () => col.find({ accountId }).sort({ createdAt: 1, _id: 1 }).toArray(),

    get: (id: string) => col.findOne({ _id: id, accountId }),

    /**
     * Insert in the lowest free slot; the 11th answers limit_exceeded. Two creates racing for
     * one slot: the unique index refuses one, which takes the next free slot.
     */
    async create(input: {
      id?: string;
      name: string;
      url: string;
      events: string[];
      seal: (id: string) => EncryptedSecret;
    }): Promise<WebhookDoc> {
      const id = input.id ?? newId(WEBHOOK_ID_PREFIX);
      const secret = input.seal(id);
      for (let tries = 0; tries < WEBHOOK_LIMITS.perAccount + 1; tries++) {
        const used = new Set((await col.find({ accountId }, { projection: { slot: 1 } }).toArray()).map((d) => d.slot));
        const slot = [...Array(WEBHOOK_LIMITS.perAccount).keys()].find((s) => !used.has(s));
        if (slot === undefined) {
          throw new AppError(
            'limit_exceeded',
            `an account may have at most ${WEBHOOK_LIMITS.perAccount} webhooks; delete one before creating another`,
          );
        }
        const now = new Date();
        const doc: WebhookDoc = {
          _id: id,
          accountId,
          slot,
          name: input.name,
          url: input.url,
          events: input.events,
          isActive: true,
          secret,
          consecutiveFailures: 0,
          disabledAt: null,
          disabledReason: null,
          lastDeliveryAt: null,
          lastDeliveryStatus: null,
          createdAt: now,
          updatedAt: now,
        };
        try {
          await col.insertOne(doc);
          return doc;
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
      }
      throw new AppError('conflict', 'too many concurrent webhook creations; try again');
    },

    /** Apply a PATCH. `isActive: true` re-enables and resets the failure count (SPEC 3.6). */
    async update(
      id: string,
      patch: { name?: string; url?: string; events?: string[]; isActive?: boolean },
    ): Promise<WebhookDoc | null> {
      const now = new Date();
      const set: Partial<WebhookDoc> = { updatedAt: now };
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.url !== undefined) set.url = patch.url;
      if (patch.events !== undefined) set.events = patch.events;
      if (patch.isActive === true)
        Object.assign(set, { isActive: true, consecutiveFailures: 0, disabledAt: null, disabledReason: null });
      if (patch.isActive === false) {
        // Keep the time and reason of an earlier automatic disable.
        const current = await col.findOne({ _id: id, accountId }, { projection: { isActive: 1 } });
        if (current?.isActive) Object.assign(set, { isActive: false, disabledAt: now, disabledReason: 'manual' });
      }
      return col.findOneAndUpdate({ _id: id, accountId }, { $set: set }, { returnDocument: 'after' });
    },

    async remove(id: string): Promise<boolean> {
      const r = await col.deleteOne({ _id: id, accountId });
      return r.deletedCount === 1;
    },

    /** Active webhooks subscribed to `event`. */
    subscribedTo: (event: string) => col.find({ accountId, isActive: true, events: event }).toArray(),

    /** A delivery succeeded: the failure streak ends. */
    async markDelivered(id: string): Promise<void> {
      await col.updateOne(
        { _id: id, accountId },
        { $set: { consecutiveFailures: 0, lastDeliveryAt: new Date(), lastDeliveryStatus: 'delivered' } },
      );
    },

    /**
     * A delivery failed after its retries: count it, and disable the webhook when the streak
     * reaches `disableAfter`. Returns true when this call disabled it.
     */
    async markFailed(id: string, disableAfter: number): Promise<{ disabled: boolean; consecutiveFailures: number }> {
      const now = new Date();
      const after = await col.findOneAndUpdate(
        { _id: id, accountId },
        { $inc: { consecutiveFailures: 1 }, $set: { lastDeliveryAt: now, lastDeliveryStatus: 'failed' } },
        { returnDocument: 'after' },
      );
      if (!after || after.consecutiveFailures < disableAfter)
        return { disabled: false, consecutiveFailures: after?.consecutiveFailures ?? 0 };
      const r = await col.updateOne(
        { _id: id, accountId, isActive: true },
        { $set: { isActive: false, disabledAt: now, disabledReason: 'consecutive_failures', updatedAt: now } },
      );
      return { disabled: r.modifiedCount === 1, consecutiveFailures: after.consecutiveFailures };
    },
  });

  return { forAccount };
}
export type WebhooksRepository = ReturnType<typeof createWebhooksRepository>;
