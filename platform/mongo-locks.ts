import { randomUUID } from 'node:crypto';
import type { Collection, Db, Document } from 'mongodb';

/**
 * Why this exists: FerretDB 1.24 (our development and CI database) does not apply updates
 * atomically. An update reads the matching documents, applies the operators in FerretDB, and
 * writes each whole document back by _id with no lock, so concurrent writers lose updates:
 * measured here, 50 concurrent `$inc: 1` on one document left it at 15, and 50 conditional
 * debits (`credits >= 3` then `$inc: -3`) all "succeeded" against a balance of 30. Only unique
 * inserts are race-free there.
 *
 * So on FerretDB every single-document write is serialised by a short write lock: a unique
 * insert of `<collection>:<_id>` into `write_locks`, the write itself, then the lock's removal.
 * Writes whose filter has no _id first find candidate ids, then lock and re-check each with the
 * original filter. The code above this layer keeps MongoDB semantics (conditional updates,
 * findOneAndUpdate, $inc) and stays correct on both; on a real MongoDB (auto-detected) nothing
 * is wrapped and the server's own single-document atomicity applies.
 *
 * Limits: locks are per document, not per query; `bulkWrite` and `deleteMany` pass through
 * unlocked; a lock left by a crashed process expires after LOCK_TTL_MS.
 */
export const WRITE_LOCKS_COLLECTION = 'write_locks';
const LOCK_TTL_MS = 10_000;
const ACQUIRE_TIMEOUT_MS = 15_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const singleId = (filter: unknown): unknown => {
  if (!filter || typeof filter !== 'object') return undefined;
  const id = (filter as Record<string, unknown>)._id;
  if (id === undefined || id === null) return undefined;
  if (typeof id === 'object' && !('_bsontype' in id)) return undefined; // an operator such as { $in: [...] }
  return id;
};

export function createWriteLocks(rawDb: Db) {
  const locks = rawDb.collection<{ _id: string; owner: string; until: Date }>(WRITE_LOCKS_COLLECTION);

  async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const owner = randomUUID();
    const deadline = Date.now() + ACQUIRE_TIMEOUT_MS;
    for (let spin = 1; ; spin++) {
      try {
        await locks.insertOne({ _id: name, owner, until: new Date(Date.now() + LOCK_TTL_MS) });
        break;
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
      }
      if (spin % 25 === 0) {
        const held = await locks.findOne({ _id: name });
        if (held && held.until.getTime() < Date.now()) await locks.deleteOne({ _id: name, owner: held.owner });
      }
      if (Date.now() > deadline) throw new Error(`write lock ${name} not acquired within ${ACQUIRE_TIMEOUT_MS} ms`);
      await sleep(1 + Math.random() * Math.min(15, spin));
    }
    try {
      return await fn();
    } finally {
      await locks.deleteOne({ _id: name, owner }).catch(() => {});
    }
  }

  function wrapCollection<T extends Document>(coll: Collection<T>): Collection<T> {
    const name = coll.collectionName;
    if (name === WRITE_LOCKS_COLLECTION) return coll;
    const key = (id: unknown) => `${name}:${String(id)}`;
    const c = coll as unknown as Record<string, (...a: any[]) => Promise<any>>;
    const orig = (m: string) => c[m]!.bind(coll);

    /** Lock one document by id, or find candidates for an id-less filter and lock each. */
    const oneDoc = (method: string, resultMatched: (r: any) => boolean) =>
      async (filter: Document, arg: unknown, options: Document = {}) => {
        const id = singleId(filter);
        if (id !== undefined) return withLock(key(id), () => orig(method)(filter, arg, options));
        for (let tries = 0; tries < 5; tries++) {
          const cand = await coll.find(filter as never, { sort: options.sort, projection: { _id: 1 } }).limit(1).next();
          if (!cand) break;
          const r = await withLock(key(cand._id), () => orig(method)({ $and: [filter, { _id: cand._id }] }, arg, options));
          if (resultMatched(r)) return r;
        }
        return options.upsert ? withLock(`${name}:upsert:${JSON.stringify(filter)}`, () => orig(method)(filter, arg, options)) : orig(method)(filter, arg, options);
      };

    const matchedUpdate = (r: any) => (r?.matchedCount ?? 0) > 0 || r?.upsertedCount > 0;
    const matchedDoc = (r: any) => r !== null && r !== undefined && (!('value' in (r as object)) || (r as { value: unknown }).value !== null);
    const deleteOne = async (filter: Document, options?: Document) => {
      const id = singleId(filter);
      return id === undefined ? orig('deleteOne')(filter, options) : withLock(key(id), () => orig('deleteOne')(filter, options));
    };
    const findOneAndDelete = async (filter: Document, options?: Document) => {
      const id = singleId(filter);
      return id === undefined ? orig('findOneAndDelete')(filter, options) : withLock(key(id), () => orig('findOneAndDelete')(filter, options));
    };
    const updateMany = async (filter: Document, update: Document, options: Document = {}) => {
      const ids = (await coll.find(filter as never, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
      if (ids.length === 0) return orig('updateMany')(filter, update, options);
      let matchedCount = 0;
      let modifiedCount = 0;
      for (const id of ids) {
        const r = await withLock(key(id), () => orig('updateOne')({ $and: [filter, { _id: id }] }, update));
        matchedCount += r.matchedCount;
        modifiedCount += r.modifiedCount;
      }
      return { acknowledged: true, matchedCount, modifiedCount, upsertedCount: 0, upsertedId: null };
    };

    const overrides: Record<string, unknown> = {
      updateOne: oneDoc('updateOne', matchedUpdate),
      replaceOne: oneDoc('replaceOne', matchedUpdate),
      findOneAndUpdate: oneDoc('findOneAndUpdate', matchedDoc),
      findOneAndReplace: oneDoc('findOneAndReplace', matchedDoc),
      updateMany,
      deleteOne,
      findOneAndDelete,
    };
    return new Proxy(coll, {
      get(target, prop, receiver) {
        if (typeof prop === 'string' && prop in overrides) return overrides[prop];
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  }

  /** A Db whose collections serialise single-document writes. */
  function wrapDb(db: Db): Db {
    return new Proxy(db, {
      get(target, prop) {
        if (prop === 'collection') return (n: string, o?: Document) => wrapCollection(target.collection(n, o));
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  }

  return { withLock, wrapDb, wrapCollection };
}

/** True when the server is FerretDB (its buildInfo says so). */
export async function isFerretDb(db: Db): Promise<boolean> {
  const info = await db.admin().command({ buildInfo: 1 });
  return typeof info.ferretdbVersion === 'string';
}
