import type { Collection, Document, Filter } from 'mongodb';

/**
 * One account's slice of a collection of tenant data: every filter it is given is narrowed to
 * `accountId`, every document it inserts
 * carries it, and an aggregation starts by matching it; a filter or document naming another
 * account throws. Repositories of tenant data build their
 * `forAccount(accountId)` on it, so a query cannot forget the tenant filter: another account's
 * document is simply not found.
 *
 * The methods keep the driver's own signatures (so `keysetPage` and the update helpers take a
 * slice as they take a collection); an upsert through `updateOne` inserts the account id from
 * the filter, as MongoDB copies equality fields of the filter into the new document.
 */
export interface AccountSlice<T extends Document> {
  readonly accountId: string;
  find: Collection<T>['find'];
  findOne: Collection<T>['findOne'];
  countDocuments: Collection<T>['countDocuments'];
  distinct: Collection<T>['distinct'];
  insertOne: Collection<T>['insertOne'];
  insertMany: Collection<T>['insertMany'];
  updateOne: Collection<T>['updateOne'];
  updateMany: Collection<T>['updateMany'];
  findOneAndUpdate: Collection<T>['findOneAndUpdate'];
  findOneAndDelete: Collection<T>['findOneAndDelete'];
  deleteOne: Collection<T>['deleteOne'];
  deleteMany: Collection<T>['deleteMany'];
  aggregate: Collection<T>['aggregate'];
}

/**
 * The filter of `T` narrowed to one account (what the slice sends). A filter that names another
 * account is a programming error, refused with a TypeError (narrowing it silently would turn a
 * delete of B's documents into a delete of A's).
 */
export function ownedBy<T extends Document>(accountId: string, f: Filter<T> = {}): Filter<T> {
  const named = (f as { accountId?: unknown }).accountId;
  if (named !== undefined && named !== accountId) throw new TypeError('accountSlice: a filter names another account');
  return { ...f, accountId } as Filter<T>;
}

export function accountSlice<T extends Document & { accountId: string }>(
  col: Collection<T>,
  accountId: string,
): AccountSlice<T> {
  if (typeof accountId !== 'string' || accountId === '') throw new TypeError('accountSlice: an account id is required');
  const mine = (f?: Filter<T>) => ownedBy<T>(accountId, f);
  const stamp = <D>(doc: D) => {
    const named = (doc as { accountId?: unknown }).accountId;
    if (named !== undefined && named !== accountId)
      throw new TypeError('accountSlice: a document names another account');
    return { ...doc, accountId };
  };
  // `as` below: each wrapper forwards to the driver's overloads, which TypeScript cannot express
  // for a forwarding function; the interface above holds the real signatures.
  return {
    accountId,
    find: ((f?: Filter<T>, o?: object) => col.find(mine(f), o)) as Collection<T>['find'],
    findOne: ((f?: Filter<T>, o?: object) => col.findOne(mine(f), o)) as Collection<T>['findOne'],
    countDocuments: ((f?: Filter<T>, o?: object) => col.countDocuments(mine(f), o)) as Collection<T>['countDocuments'],
    distinct: ((key: string, f?: Filter<T>, o?: object) =>
      col.distinct(key as never, mine(f), o as never)) as Collection<T>['distinct'],
    insertOne: ((doc: T, o?: object) => col.insertOne(stamp(doc) as never, o)) as Collection<T>['insertOne'],
    insertMany: ((docs: readonly T[], o?: object) =>
      col.insertMany(docs.map(stamp) as never, o)) as Collection<T>['insertMany'],
    updateOne: ((f: Filter<T>, u: never, o?: object) => col.updateOne(mine(f), u, o)) as Collection<T>['updateOne'],
    updateMany: ((f: Filter<T>, u: never, o?: object) => col.updateMany(mine(f), u, o)) as Collection<T>['updateMany'],
    findOneAndUpdate: ((f: Filter<T>, u: never, o?: object) =>
      col.findOneAndUpdate(mine(f), u, o as never)) as Collection<T>['findOneAndUpdate'],
    findOneAndDelete: ((f: Filter<T>, o?: object) =>
      col.findOneAndDelete(mine(f), o as never)) as Collection<T>['findOneAndDelete'],
    deleteOne: ((f?: Filter<T>, o?: object) => col.deleteOne(mine(f), o)) as Collection<T>['deleteOne'],
    deleteMany: ((f?: Filter<T>, o?: object) => col.deleteMany(mine(f), o)) as Collection<T>['deleteMany'],
    aggregate: ((pipeline: Document[] = [], o?: object) =>
      col.aggregate([{ $match: { accountId } }, ...pipeline], o)) as Collection<T>['aggregate'],
  };
}
