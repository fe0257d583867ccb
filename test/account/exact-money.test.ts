import { expect } from 'chai';
import { start as startApi, type ApiServer } from '../../api/app';
import { fromUnits, migrateCreditUnits, toUnits } from '../../platform/credits/credits';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** A seeded generator, so a failure can be replayed. */
function mulberry32(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Thousandths as the decimal a client would write: 3127 → "3.127". */
const decimal = (thousandths: bigint) => {
  const neg = thousandths < 0n;
  const abs = neg ? -thousandths : thousandths;
  return `${neg ? '-' : ''}${abs / 1000n}.${String(abs % 1000n).padStart(3, '0')}`;
};

async function pool<T>(n: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

describe('exact money (credits kept in integer millicredits)', () => {
  let stack: Stack;
  before(async () => {
    // Fractional prices, one per character for speech; no workers: job POSTs only charge.
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: {
        CREDIT_PRICES: '{"speech_char":0.003,"code_build":0.007,"song":1.333,"research":2.101}',
        RATE_LIMIT_MAX: '100000',
        CREDIT_LEASE_CREDITS: '50',
        CREDIT_LEASE_MIN_BALANCE: '100',
      },
    });
  });
  after(() => stack.stop());

  it('when amounts go to millicredits and back, then every one round-trips exactly and reads as its decimal', () => {
    for (let u = 0; u <= 2_000_000; u++) if (toUnits(fromUnits(u)) !== u) expect.fail(`${u} does not round-trip`);
    expect(fromUnits(713250)).to.equal(713.25);
    expect(String(fromUnits(713250))).to.equal('713.25');
    expect(toUnits(713.2500000000001)).to.equal(713250);
    expect(toUnits(0.1) + toUnits(0.2)).to.equal(toUnits(0.3));
    expect(stack.rt.credits.millicreditsFor('speech_char', 37)).to.equal(111);
  });

  // 2,000 operations in the suite (about a minute on a quiet machine); EXACT_MONEY_OPERATIONS=10000
  // for the full run (about 15 minutes on a loaded one: every operation is 2 to 4 database commands).
  const OPERATIONS = Number(process.env.EXACT_MONEY_OPERATIONS ?? 2_000);

  it(`when ${OPERATIONS} random fractional charges, refunds and holds run concurrently, then the balance is the initial one less the ledger, exactly, and GET /account/credits shows the exact decimal`, async function () {
    this.timeout(1_800_000);
    const { rt } = stack;
    const initial = 100_000_250n; // 100000.25 credits
    const { key, accountId } = await stack.createAccount({ credits: Number(decimal(initial)) });
    const rand = mulberry32(20261203);
    // The plan, drawn up front (the random sequence does not depend on the timing).
    const ops = Array.from({ length: OPERATIONS }, (_, i) => {
      const kind = rand();
      // Amounts of 3 decimals, written and parsed as a client's decimal.
      const thousandths = BigInt(1 + Math.floor(rand() * 5000));
      const chars = 1 + Math.floor(rand() * 400);
      if (kind < 0.4) return { i, op: 'debit' as const, amount: Number(decimal(thousandths)) };
      if (kind < 0.6) return { i, op: 'speech' as const, chars };
      if (kind < 0.7) return { i, op: 'hold-capture' as const, amount: Number(decimal(thousandths)) };
      if (kind < 0.85) return { i, op: 'hold-release' as const, chars };
      return { i, op: 'debit-refund' as const, amount: Number(decimal(thousandths)) };
    });
    // What each does to the balance, in thousandths (the model, independent of the code's units).
    const net = await pool(ops.length, 40, async (k): Promise<bigint> => {
      const o = ops[k]!;
      const ref = `exact_${o.i}`;
      switch (o.op) {
        case 'debit': {
          await rt.credits.debit({
            accountId,
            operation: 'image',
            millicredits: toUnits(o.amount),
            jobId: ref,
            requestId: 'req_exact',
          });
          await rt.credits.confirm(ref, accountId);
          return -BigInt(Math.round(o.amount * 1000));
        }
        case 'speech': {
          const units = rt.credits.millicreditsFor('speech_char', o.chars);
          await rt.credits.debit({
            accountId,
            operation: 'speech_char',
            millicredits: units,
            jobId: ref,
            requestId: 'req_exact',
          });
          await rt.credits.confirm(ref, accountId);
          return -BigInt(o.chars) * 3n;
        }
        case 'hold-capture': {
          const hold = await rt.credits.hold({
            accountId,
            operation: 'sheet_edit',
            millicredits: toUnits(o.amount),
            requestId: 'req_exact',
            ttlMs: 600_000,
            id: `hold_${ref}`,
          });
          await rt.credits.capture(hold);
          return -BigInt(Math.round(o.amount * 1000));
        }
        case 'hold-release': {
          const hold = await rt.credits.hold({
            accountId,
            operation: 'speech_char',
            millicredits: rt.credits.millicreditsFor('speech_char', o.chars),
            requestId: 'req_exact',
            ttlMs: 600_000,
            id: `hold_${ref}`,
          });
          expect(await rt.credits.release(hold)).to.equal(true);
          return 0n;
        }
        case 'debit-refund': {
          await rt.credits.debit({
            accountId,
            operation: 'research',
            millicredits: toUnits(o.amount),
            jobId: ref,
            requestId: 'req_exact',
          });
          await rt.credits.confirm(ref, accountId);
          await rt.credits.refund({ accountId, operation: 'research', millicredits: toUnits(o.amount), jobId: ref });
          return 0n;
        }
      }
    });
    const expected = net.reduce((a, b) => a + b, initial);

    const ledger = await stack.db.ledger.find({ accountId }).toArray();
    for (const e of ledger) expect(Number.isInteger(e.millicredits), e._id).to.equal(true);
    const charges = ledger.filter((e) => e.kind === 'charge');
    const refunds = ledger.filter((e) => e.kind === 'refund');
    expect(charges).to.have.length(OPERATIONS);
    expect(refunds).to.have.length(ops.filter((o) => o.op === 'hold-release' || o.op === 'debit-refund').length);
    expect(charges.every((e) => e.state === 'applied')).to.equal(true);
    const ledgerNet = ledger.reduce((n, e) => n + BigInt(e.kind === 'refund' ? e.millicredits : -e.millicredits), 0n);

    const balance = BigInt(await rt.credits.balance(accountId));
    expect(balance).to.equal(initial + ledgerNet);
    expect(balance).to.equal(expected);
    const shown = (await client(stack.baseUrl, key).get('/account/credits')).body.balance;
    expect(shown).to.equal(Number(decimal(expected)));
    expect(String(shown)).to.equal(decimal(expected).replace(/\.?0+$/, ''));
  });

  it('when fractional jobs are posted concurrently over HTTP (per job and from credit leases), then the balance shown is the initial one less their prices, exactly', async function () {
    this.timeout(300_000);
    const prices = { '/code-builds': 7n, '/songs': 1333n, '/research': 2101n } as const;
    const bodies = {
      '/code-builds': { prompt: 'a tiny app' },
      '/songs': { style: 'upbeat synth pop', tier: 'fast' },
      '/research': { query: 'exact sums' },
    } as const;
    // One account under the lease threshold (every job its own update), one over it (leases).
    for (const initial of [97_777n, 713_250n]) {
      const { key, accountId } = await stack.createAccount({ credits: Number(decimal(initial)) });
      const api = client(stack.baseUrl, key);
      const paths = Object.keys(prices) as (keyof typeof prices)[];
      const rand = mulberry32(Number(initial));
      const plan = Array.from({ length: 60 }, () => paths[Math.floor(rand() * paths.length)]!);
      const results = await pool(plan.length, 20, (i) => api.post(plan[i]!, bodies[plan[i]!]));
      const accepted = plan.filter((_, i) => results[i]!.status === 202);
      expect(accepted.length, JSON.stringify(results.find((r) => r.status !== 202)?.body)).to.equal(plan.length);
      const expected = accepted.reduce((n, p) => n - prices[p], initial);
      await stack.rt.jobs.flushAccepted();
      const shown = (await api.get('/account/credits')).body.balance;
      expect(shown).to.equal(Number(decimal(expected)));
      const jobs = await stack.db.jobs.find({ accountId }).toArray();
      expect(jobs.reduce((n, j) => n + BigInt(j.credits.millicredits), 0n)).to.equal(initial - expected);
    }
  });

  it('when the database holds accounts and ledger entries in decimal credits, then starting converts them once, even with several processes at once, and the balance reads back exactly', async function () {
    this.timeout(120_000);
    const { db } = stack;
    const raw = (name: string) => db.db.collection<Record<string, unknown>>(name);
    // A database from before millicredits: no migration recorded, old field names, a drifted sum.
    await raw(COLLECTIONS.migrations).deleteMany({});
    const accountId = 'acct_decimalera';
    const at = new Date();
    await raw(COLLECTIONS.accounts).insertOne({
      _id: accountId as never,
      name: 'old',
      plan: 'pro',
      credits: 713.2500000000001,
      features: {},
      createdAt: at,
    });
    await raw(COLLECTIONS.ledger).insertMany([
      {
        _id: 'led_charge_old1' as never,
        accountId,
        kind: 'charge',
        state: 'applied',
        operation: 'speech_char',
        amount: 0.1,
        jobId: 'old1',
        requestId: null,
        at,
      },
      {
        _id: 'led_charge_old2' as never,
        accountId,
        kind: 'charge',
        state: 'applied',
        operation: 'speech_char',
        amount: 0.2,
        jobId: 'old2',
        requestId: null,
        at,
      },
    ]);
    await raw(COLLECTIONS.jobs).insertOne({
      _id: 'code_decimalera' as never,
      accountId,
      type: 'code',
      status: 'complete',
      credits: { operation: 'code_build', amount: 5.125, refunded: false, charged: true },
    });
    await raw(COLLECTIONS.creditHolds).insertOne({
      _id: 'hold_decimalera' as never,
      accountId: 'acct_other',
      operation: 'image',
      amount: 2.5,
      until: new Date(Date.now() + 3_600_000),
      deliveredBy: null,
    });
    await raw(COLLECTIONS.creditLeases).insertOne({
      _id: 'lse_decimalera' as never,
      accountId: 'acct_other',
      owner: 'gone',
      amount: 100,
      spent: 12.345,
      at,
      until: new Date(Date.now() + 3_600_000),
      settling: null,
    });
    await raw(COLLECTIONS.audit).insertOne({
      _id: 'aud_decimalera' as never,
      at,
      accountId,
      keyId: 'key_x',
      method: 'POST',
      route: '/api/v1/speech',
      status: 200,
      durationMs: 1,
      creditsCharged: 0.33,
      requestId: 'r',
    });
    await raw(COLLECTIONS.liveSessions).insertOne({
      _id: 'live_decimalera' as never,
      accountId,
      charge: { operation: 'live_session', amount: 5, holdId: null, capturedAt: null },
      spent: 6.5,
    });

    // Two more API processes start (each migrates at startup) while this one migrates too.
    const started: ApiServer[] = [];
    try {
      const [, , mine] = await Promise.all([
        startApi(stack.config2()).then((a) => started.push(a)),
        startApi(stack.config2()).then((a) => started.push(a)),
        migrateCreditUnits(stack.rt.store),
      ]);
      expect(mine.converted).to.be.at.most(8);
      const account = await raw(COLLECTIONS.accounts).findOne({ _id: accountId as never });
      expect(account).to.include({ millicredits: 713_250 }).and.not.have.property('credits');
      expect(
        (await db.ledger.find({ accountId }).sort({ _id: 1 }).toArray()).map((e) => [
          e.millicredits,
          (e as { amount?: number }).amount,
        ]),
      ).to.deep.equal([
        [100, undefined],
        [200, undefined],
      ]);
      expect((await db.jobs.findOne({ _id: 'code_decimalera' }))?.credits)
        .to.deep.include({ millicredits: 5125 })
        .and.not.have.property('amount');
      expect(await raw(COLLECTIONS.creditHolds).findOne({ _id: 'hold_decimalera' as never }))
        .to.include({ millicredits: 2500 })
        .and.not.have.property('amount');
      expect(await raw(COLLECTIONS.creditLeases).findOne({ _id: 'lse_decimalera' as never }))
        .to.include({ millicredits: 100_000, spentMillicredits: 12_345 })
        .and.not.have.property('spent');
      expect(await raw(COLLECTIONS.audit).findOne({ _id: 'aud_decimalera' as never }))
        .to.include({ millicreditsCharged: 330 })
        .and.not.have.property('creditsCharged');
      const live = await raw(COLLECTIONS.liveSessions).findOne({ _id: 'live_decimalera' as never });
      expect(live).to.deep.include({
        charge: { operation: 'live_session', millicredits: 5000, holdId: null, capturedAt: null },
        spentMillicredits: 6500,
      });
      expect(await raw(COLLECTIONS.migrations).countDocuments({})).to.equal(1);
      // A later start finds the migration recorded and converts nothing.
      expect(await migrateCreditUnits(stack.rt.store)).to.deep.equal({ converted: 0 });

      const { key } = await stack.rt.accounts.forAccount(accountId).createKey({ scopes: ['read'] });
      const r = await client(stack.baseUrl, key).get('/account/credits');
      expect(r.status).to.equal(200);
      expect(r.body.balance).to.equal(713.25);
      expect(String(r.body.balance)).to.equal('713.25');
    } finally {
      await Promise.all(started.map((a) => a.stop()));
    }
  });
});
