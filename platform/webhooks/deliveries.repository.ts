import { AppError } from '../errors';
import { newId } from '../ids';
import { COLLECTIONS, type Database } from '../mongo';

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

interface Cursor {
  at: number;
  id: string;
}
const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');
function decodeCursor(raw: string): Cursor {
  try {
    const [at, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof at === 'number' && Number.isFinite(at) && typeof id === 'string' && id.startsWith(`${DELIVERY_ID_PREFIX}_`)) return { at, id };
  } catch {
    // falls through
  }
  throw new AppError('validation_error', 'cursor: is not a cursor returned by this list; pass it back verbatim');
}

/** The delivery log, newest first, paginated by an opaque (at, id) cursor. */
export function createDeliveriesRepository(db: Database) {
  const col = db.db.collection<DeliveryDoc>(COLLECTIONS.webhookDeliveries);
  return {
    collection: col,
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
      async page(webhookId: string, opts: { limit: number; cursor?: string }): Promise<{ data: DeliveryDoc[]; total: number; cursor: string | null }> {
        const base = { accountId, webhookId };
        const after = opts.cursor ? decodeCursor(opts.cursor) : null;
        const filter = after
          ? { ...base, $or: [{ at: { $lt: new Date(after.at) } }, { at: new Date(after.at), _id: { $lt: after.id } }] }
          : base;
        const [rows, total] = await Promise.all([
          col.find(filter).sort({ at: -1, _id: -1 }).limit(opts.limit + 1).toArray(),
          col.countDocuments(base),
        ]);
        const more = rows.length > opts.limit;
        const data = rows.slice(0, opts.limit);
        const last = data[data.length - 1];
        return { data, total, cursor: more && last ? encodeCursor({ at: last.at.getTime(), id: last._id }) : null };
      },
      async removeForWebhook(webhookId: string): Promise<void> {
        await col.deleteMany({ accountId, webhookId });
      },
    }),
  };
}
export type DeliveriesRepository = ReturnType<typeof createDeliveriesRepository>;
