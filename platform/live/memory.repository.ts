import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';

export interface LiveMemoryDoc {
  _id: string;
  accountId: string;
  text: string;
  createdAt: Date;
}

/** Most memories kept per account: the oldest goes when a new one would pass it. */
export const LIVE_MEMORIES_MAX = 200;

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Per-account memories of the live assistant: what later sessions recall. */
export function createLiveMemories(store: Store) {
  const db = openStore(store);
  const col = db.db.collection<LiveMemoryDoc>(COLLECTIONS.liveMemories);
  const view = (m: LiveMemoryDoc) => ({ id: m._id, text: m.text, createdAt: m.createdAt.toISOString() });
  return {
    /** One account's memories: another account's are neither recalled nor forgotten. */
    forAccount(accountId: string) {
      const mine = accountSlice(col, accountId);
      return {
        async remember(text: string, id: string) {
          const doc: LiveMemoryDoc = { _id: id, accountId, text, createdAt: new Date() };
          try {
            await mine.insertOne(doc);
          } catch (err) {
            if ((err as { code?: number }).code !== 11000) throw err; // the same call repeated
          }
          const extra = await mine
            .find()
            .sort({ createdAt: -1 })
            .skip(LIVE_MEMORIES_MAX)
            .project<{ _id: string }>({ _id: 1 })
            .toArray();
          if (extra.length) await mine.deleteMany({ _id: { $in: extra.map((e) => e._id) } });
          return view(doc);
        },
        /** Newest first; with a query, the memories holding any of its words (3+ letters). */
        async recall(query?: string, limit = 10) {
          const words = (query ?? '')
            .toLowerCase()
            .split(/[^\p{L}\p{N}]+/u)
            .filter((w) => w.length >= 3 && !['what', 'the', 'about', 'you', 'remember', 'did', 'tell'].includes(w));
          const filter = words.length
            ? { $or: words.map((w) => ({ text: { $regex: escapeRegex(w), $options: 'i' } })) }
            : {};
          return (await mine.find(filter).sort({ createdAt: -1 }).limit(limit).toArray()).map(view);
        },
        async forget(id: string): Promise<boolean> {
          return (await mine.deleteOne({ _id: id })).deletedCount === 1;
        },
      };
    },
  };
}
