import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import { assertAtomicServer, UnsupportedServerError } from '../../platform/infra/mongo';

/**
 * The database server itself applies read-modify-write commands atomically (MongoDB does; our
 * FerretDB build does through scripts/ferretdb/*.patch), so the application needs no locks.
 * These run straight against the server with the plain driver, no application code between.
 */
const baseUrl = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');

describe('database server atomicity (straight against the server)', function () {
  this.timeout(120_000);
  const dbName = `t_atomic_${randomBytes(4).toString('hex')}`;
  let client: MongoClient;
  let db: Db;

  before(async () => {
    client = new MongoClient(`${baseUrl}/${dbName}`, { maxPoolSize: 100 });
    await client.connect();
    db = client.db();
  });
  after(async () => {
    await db.dropDatabase().catch(() => {});
    await client.close();
  });

  it('when the server is FerretDB, then it is the patched build', async () => {
    const info = await db.admin().command({ buildInfo: 1 });
    if (typeof info.ferretdbVersion !== 'string') return this.ctx.skip(); // a real MongoDB
    expect(info.ferretdbVersion).to.match(/-svc\.\d+$/);
  });

  it('when 1,200 concurrent $inc hit one document, then it counts 1,200', async () => {
    const c = db.collection<{ _id: string; n: number }>('counters');
    await c.insertOne({ _id: 'x', n: 0 });
    await Promise.all(Array.from({ length: 1200 }, () => c.updateOne({ _id: 'x' }, { $inc: { n: 1 } })));
    expect((await c.findOne({ _id: 'x' }))?.n).to.equal(1200);
  });

  it('when 50 conditional debits race against a balance that covers 10, then exactly 10 succeed and the balance ends at 0', async () => {
    const c = db.collection<{ _id: string; credits: number }>('accounts');
    await c.insertOne({ _id: 'a', credits: 30 });
    const r = await Promise.all(
      Array.from({ length: 50 }, () => c.updateOne({ _id: 'a', credits: { $gte: 3 } }, { $inc: { credits: -3 } })),
    );
    expect(r.filter((x) => x.modifiedCount === 1)).to.have.length(10);
    expect((await c.findOne({ _id: 'a' }))?.credits).to.equal(0);
  });

  it('when 20 workers claim one job with findOneAndUpdate, then exactly one wins', async () => {
    const c = db.collection<{ _id: string; status: string; owner?: string }>('jobs');
    await c.insertOne({ _id: 'j', status: 'queued' });
    const r = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        c.findOneAndUpdate(
          { _id: 'j', status: 'queued' },
          { $set: { status: 'processing', owner: `w${i}` } },
          { returnDocument: 'after' },
        ),
      ),
    );
    const winners = r.filter((x) => x !== null);
    expect(winners).to.have.length(1);
    expect((await c.findOne({ _id: 'j' }))?.owner).to.equal(winners[0]!.owner);
  });

  it('when a filtered delete races an update that makes the filter false, then they never both apply', async () => {
    const c = db.collection<{ _id: string; state: string }>('records');
    for (let round = 0; round < 20; round++) {
      await c.insertOne({ _id: `r${round}`, state: 'in_flight' });
      const [del, upd] = await Promise.all([
        c.deleteOne({ _id: `r${round}`, state: 'in_flight' }),
        c.updateOne({ _id: `r${round}`, state: 'in_flight' }, { $set: { state: 'done' } }),
      ]);
      expect(del.deletedCount + upd.modifiedCount, `round ${round}`).to.equal(1);
    }
  });

  it('when a 1.x FerretDB without the patch is found, then the process refuses to start and says how to build the patched one', async () => {
    const fake = (ferretdbVersion?: string) =>
      ({ admin: () => ({ command: async () => ({ version: '7.0.77', ferretdbVersion }) }) }) as unknown as Db;
    const err = await assertAtomicServer(fake('v1.24.0')).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(UnsupportedServerError);
    expect((err as Error).message)
      .to.contain('npm run services')
      .and.contain('v1.24.0-svc.2');
    await assertAtomicServer(fake('v1.24.0-svc.1'));
    await assertAtomicServer(fake(undefined)); // MongoDB
  });

  it('when several client processes run hundreds of concurrent updates across collections mixed with finds, then every count is exact and the server still answers ping', async () => {
    const procs = 3;
    const perProc = 400;
    // More connections per client (100) than FerretDB has PostgreSQL connections (50): the load
    // that wedged stock FerretDB for good (each update held one connection waiting for another).
    const script = `
      import { MongoClient } from 'mongodb';
      const c = new MongoClient(process.argv[1], { maxPoolSize: 100 });
      await c.connect();
      const db = c.db();
      const ops = [];
      for (let i = 0; i < ${perProc}; i++) {
        const coll = db.collection('stress_' + (i % 4));
        const id = 'd' + (i % 10);
        ops.push(i % 5 === 4
          ? coll.find({ n: { $gte: 0 } }).limit(20).toArray()
          : i % 5 === 3
            ? coll.findOneAndUpdate({ _id: id }, { $inc: { n: 1 } }, { upsert: true })
            : coll.updateOne({ _id: id }, { $inc: { n: 1 } }, { upsert: true }));
      }
      await Promise.all(ops);
      await c.close();
    `;
    const run = () =>
      new Promise<void>((resolve, reject) => {
        const p = spawn(process.execPath, ['--input-type=module', '-e', script, `${baseUrl}/${dbName}`], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let err = '';
        p.stderr.on('data', (d: Buffer) => (err += d.toString()));
        p.on('exit', (code) =>
          code === 0 ? resolve() : reject(new Error(`stress client exited ${code}: ${err.slice(0, 500)}`)),
        );
      });
    await Promise.all(Array.from({ length: procs }, run));

    const started = Date.now();
    await db.command({ ping: 1 });
    expect(Date.now() - started).to.be.below(2000);
    let total = 0;
    for (let k = 0; k < 4; k++)
      for (const d of await db.collection<{ n: number }>(`stress_${k}`).find().toArray()) total += d.n;
    // 4 of every 5 operations increment: 320 per process.
    expect(total).to.equal(procs * perProc * 0.8);
  });
});
