import { COLLECTIONS, type Store, openStore } from '../infra/mongo';

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
    async remember(accountId: string, text: string, id: string) {
      const doc: LiveMemoryDoc = { _id: id, accountId, text, createdAt: new Date() };
      try {
        await col.insertOne(doc);
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err; // the same call repeated
      }
      const extra = await col
        .find({ accountId })
        .sort({ createdAt: -1 })
        .skip(LIVE_MEMORIES_MAX)
        .project<{ _id: string }>({ _id: 1 })
        .toArray();
      if (extra.length) await col.deleteMany({ accountId, _id: { $in: extra.map((e) => e._id) } });
      return view(doc);
    },
    /** Newest first; with a query, the memories holding any of its words (3+ letters). */
    async recall(accountId: string, query?: string, limit = 10) {
      const words = (query ?? '')
        .toLowerCase()
        .split(/[^\p{L}\p{N}]+/u)
        .filter((w) => w.length >= 3 && !['what', 'the', 'about', 'you', 'remember', 'did', 'tell'].includes(w));
      const filter = words.length
        ? { accountId, $or: words.map((w) => ({ text: { $regex: escapeRegex(w), $options: 'i' } })) }
        : { accountId };
      return (await col.find(filter).sort({ createdAt: -1 }).limit(limit).toArray()).map(view);
    },
    async forget(accountId: string, id: string): Promise<boolean> {
      return (await col.deleteOne({ _id: id, accountId })).deletedCount === 1;
    },
  };
}
