import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { type Collection, type Db, MongoClient } from 'mongodb';
import { keysetPage } from '../../platform/infra/lists';
import { accountSlice } from '../../platform/infra/tenant';

/**
 * An account's slice of a collection (what every tenant repository's `forAccount` is built on),
 * straight against the database server: whatever filter a caller passes, it reads and writes the
 * slice's account only.
 */
const baseUrl = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');

interface Row {
  _id: string;
  accountId: string;
  n: number;
}

describe('accountSlice (straight against the server)', function () {
  this.timeout(60_000);
  const dbName = `t_slice_${randomBytes(4).toString('hex')}`;
  let client: MongoClient;
  let db: Db;
  let col: Collection<Row>;

  before(async () => {
    client = new MongoClient(`${baseUrl}/${dbName}`);
    await client.connect();
    db = client.db();
    col = db.collection<Row>('rows');
    await col.insertMany([
      { _id: 'a1', accountId: 'acc_a', n: 1 },
      { _id: 'a2', accountId: 'acc_a', n: 2 },
      { _id: 'b1', accountId: 'acc_b', n: 1 },
    ]);
  });
  after(async () => {
    await db.dropDatabase().catch(() => {});
    await client.close();
  });

  it("when account A reads by B's id or names B in its filter, then it finds nothing", async () => {
    const a = accountSlice(col, 'acc_a');
    expect(await a.findOne({ _id: 'b1' })).to.equal(null);
    expect(await a.countDocuments({})).to.equal(2);
    expect((await a.find().sort({ _id: 1 }).toArray()).map((r) => r._id)).to.deep.equal(['a1', 'a2']);
    expect(await a.distinct('_id', { n: 1 })).to.deep.equal(['a1']);
    const page = await keysetPage(a, {}, { tag: 't', field: 'n', direction: 1, limit: 1 });
    expect(page.data.map((r) => r._id)).to.deep.equal(['a1']);
    expect(page.total).to.equal(2);
  });

  it("when account A updates or deletes B's document, then B's document is unchanged", async () => {
    const a = accountSlice(col, 'acc_a');
    expect((await a.updateOne({ _id: 'b1' }, { $set: { n: 99 } })).matchedCount).to.equal(0);
    expect((await a.updateMany({}, { $inc: { n: 10 } })).modifiedCount).to.equal(2);
    expect(await a.findOneAndUpdate({ _id: 'b1' }, { $set: { n: 99 } })).to.equal(null);
    expect(await a.findOneAndDelete({ _id: 'b1' })).to.equal(null);
    expect((await a.deleteOne({ _id: 'b1' })).deletedCount).to.equal(0);
    const agg = await a.aggregate<{ total: number }>([{ $group: { _id: null, total: { $sum: '$n' } } }]).toArray();
    expect(agg[0]?.total).to.equal(23);
    expect(await col.findOne({ _id: 'b1' })).to.deep.equal({ _id: 'b1', accountId: 'acc_b', n: 1 });
  });

  it('when a filter or a document names another account, then the slice throws before the database sees it', async () => {
    const a = accountSlice(col, 'acc_a');
    expect(() => a.find({ accountId: 'acc_b' })).to.throw(TypeError, /another account/);
    expect(() => a.deleteMany({ accountId: 'acc_b' })).to.throw(TypeError, /another account/);
    expect(() => a.insertOne({ _id: 'x', accountId: 'acc_b', n: 0 })).to.throw(TypeError, /another account/);
    expect(await col.countDocuments({ accountId: 'acc_b' })).to.equal(1);
  });

  it("when account A inserts or upserts, then the document is A's", async () => {
    const a = accountSlice(col, 'acc_a');
    await a.insertOne({ _id: 'a3', accountId: 'acc_a', n: 3 });
    await a.insertMany([{ _id: 'a4', n: 4 } as Row]);
    await a.updateOne({ _id: 'a5' }, { $set: { n: 5 } }, { upsert: true });
    const stored = await col.find({ _id: { $in: ['a3', 'a4', 'a5'] } }).toArray();
    expect(stored.map((r) => r.accountId)).to.deep.equal(['acc_a', 'acc_a', 'acc_a']);
  });

  it('when no account id is given, then the slice refuses to exist', () => {
    expect(() => accountSlice(col, '')).to.throw(TypeError);
  });
});
