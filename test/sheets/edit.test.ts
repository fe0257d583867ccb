import { expect } from 'chai';
import sinon from 'sinon';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { fakeServer } from '../helpers/fake-provider';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { account, newSheet } from './helpers';
import { fromUnits } from '../../platform/credits/credits';

const balance = async (api: { get: (p: string) => Promise<{ body: { balance: number } }> }) =>
  (await api.get('/account/credits')).body.balance;

describe('sheets: POST /sheets/{id}/edit with the local engine (sheet pool over RabbitMQ)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'sheet' } });
  });
  after(() => stack.stop());

  it('when the instruction adds a computed column, then the pool writes the ops, the API applies them as a commit summarised by the instruction, and sheet_edit is charged', async () => {
    const { api, accountId } = await account(stack, { credits: 10 });
    const price = fromUnits(stack.rt.credits.millicreditsFor('sheet_edit'));
    const s = await newSheet(api);
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'add a column Total = Price * Qty' });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ engine: 'local-rules-v1', charged: price, version: 2 });
    expect(r.body.commit).to.include({ status: 'merged', source: 'edit', summary: 'add a column Total = Price * Qty' });
    expect(r.body.commit.ops).to.deep.equal([
      { op: 'insertColumn', name: 'Total', type: 'number', expression: 'Price * Qty' },
    ]);
    const rows = (await api.get(`/sheets/${s.id}`)).body.rows;
    expect(rows.map((x: unknown[]) => x[5])).to.deep.equal([3.3, 10, 5, null]);
    expect(await balance(api)).to.equal(10 - price);
    const ledger = await stack.db.db
      .collection(COLLECTIONS.ledger)
      .find({ accountId } as never)
      .toArray();
    expect(ledger.map((e) => `${e.kind}:${e.operation}`)).to.deep.equal(['charge:sheet_edit']);
  });

  it('when instructions sort, delete by condition, rename by letter and chain with ";", then each becomes the right ops', async () => {
    const { api } = await account(stack);
    const s = await newSheet(api);
    const sorted = await api.post(`/sheets/${s.id}/edit`, { instruction: 'Sort by Date descending.' });
    expect(sorted.body.commit.ops).to.deep.equal([{ op: 'sort', column: 'Date', direction: 'desc' }]);
    expect((await api.get(`/sheets/${s.id}`)).body.rows.map((x: unknown[]) => x[0])).to.deep.equal([
      'Fig',
      'Apple',
      'Plum',
      'Pear',
    ]);
    const del = await api.post(`/sheets/${s.id}/edit`, { instruction: 'delete rows where Status is done' });
    expect(del.body.commit.ops).to.deep.equal([
      { op: 'deleteRows', where: { column: 'Status', cmp: 'eq', value: 'done' } },
    ]);
    expect(del.body.rowCount).to.equal(2);
    const ren = await api.post(`/sheets/${s.id}/edit`, {
      instruction: 'rename column B to Owner; set Qty to 0 where Item is plum; add a row: Kiwi, 2, 1',
    });
    expect(ren.status, ren.text).to.equal(200);
    expect(ren.body.columns[1].name).to.equal('Owner');
    expect((await api.get(`/sheets/${s.id}`)).body.rows).to.deep.equal([
      ['Apple', 1.1, 3, '2024-03-01', 'open'],
      ['Plum', 0.5, 0, '2024-02-10', 'open'],
      ['Kiwi', 2, 1, null, null],
    ]);
  });

  it('when propose is true, then the edit is a proposed commit (charged: the proposal was written) and the grid waits for the merge', async () => {
    const { api } = await account(stack);
    const s = await newSheet(api);
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'delete column Date', propose: true });
    expect(r.status).to.equal(200);
    expect(r.body.commit.status).to.equal('proposed');
    expect(r.body.columns).to.have.length(5);
    const m = await api.post(`/sheets/${s.id}/commits/${r.body.commit.id}/resolve`, { action: 'merge' });
    expect(m.body.columns.map((c: { name: string }) => c.name)).to.deep.equal(['Item', 'Price', 'Qty', 'Status']);
  });

  it('when the instruction is not understood, then 400 says what the engine understands and nothing is charged', async () => {
    const { api, accountId } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'make it prettier' });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(
      /^instruction: the local-rules-v1 engine does not understand "make it prettier"; it understands instructions like: "add a column Total = Price \* Qty", "add a date column Due", "sort by Date descending"/,
    );
    expect(r.body.error.message).to.match(/nothing was charged$/);
    expect(await balance(api)).to.equal(5);
    const ledger = await stack.db.db
      .collection(COLLECTIONS.ledger)
      .find({ accountId } as never)
      .toArray();
    expect(ledger.map((e) => e.kind).sort()).to.deep.equal(['charge', 'refund']);
    expect((await api.get(`/sheets/${s.id}/commits`)).body.total).to.equal(1);
  });

  it('when the engine writes ops that do not apply to the sheet, then 400 names the op and nothing is charged', async () => {
    const { api } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Colour' });
    expect(r.status).to.equal(400);
    expect(r.body.error.message).to.equal(
      `instruction: the local-rules-v1 engine's ops do not apply to this sheet: ops.0.column: names no column "Colour"; nothing was charged`,
    );
    expect(await balance(api)).to.equal(5);
  });

  it('when If-Match names another version of the sheet, then 412 precondition_failed before anything is held or asked', async () => {
    const { api, accountId } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' }, { 'if-match': '"7"' });
    expect(r.status, r.text).to.equal(412);
    expect(r.body.error.code).to.equal('precondition_failed');
    expect(await balance(api)).to.equal(5);
    expect(await stack.db.ledger.countDocuments({ accountId })).to.equal(0);
    const ok = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' }, { 'if-match': '"1"' });
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.version).to.equal(2);
  });

  it('when capturing the credits fails after the commit merged, then the edit still answers 200 (once, charged) and the scheduler captures the hold, never refunds it', async () => {
    const { api, accountId } = await account(stack, { credits: 10 });
    const price = fromUnits(stack.rt.credits.millicreditsFor('sheet_edit'));
    const s = await newSheet(api);
    sinon.stub(stack.rt.credits, 'capture').rejects(new Error('connection reset'));
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date descending' });
    sinon.restore();
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ charged: price, version: 2 });
    const holds = stack.db.db.collection<any>(COLLECTIONS.creditHolds);
    const [hold] = await holds.find({ accountId }).toArray();
    expect(hold.deliveredBy).to.deep.equal({ collection: COLLECTIONS.sheetCommits, id: r.body.commit.id });
    // The scheduler's sweep once the hold's deadline passed: the commit exists, so it is captured.
    await stack.rt.credits.settleExpiredHolds(new Date(hold.until.getTime() + 1));
    expect(await holds.countDocuments({ accountId })).to.equal(0);
    expect(await balance(api)).to.equal(10 - price);
    const ledger = await stack.db.ledger.find({ accountId }).toArray();
    expect(ledger.map((e) => e.kind)).to.deep.equal(['charge']);
    expect((await api.get(`/sheets/${s.id}/commits`)).body.total).to.equal(2);
  });

  it('when the scheduler settled the hold while the edit waited to write its commit, then no commit is written, 504 and nothing is charged', async () => {
    const { api, accountId } = await account(stack, { credits: 10 });
    const s = await newSheet(api);
    const credits = stack.rt.credits;
    const extend = credits.extend.bind(credits);
    // The sweep takes the hold over right before the edit's guard (as if the hold had expired meanwhile).
    sinon.stub(credits, 'extend').callsFake(async (id: string, ms: number) => {
      await credits.settle(id);
      return extend(id, ms);
    });
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date descending' });
    sinon.restore();
    expect(r.status, r.text).to.equal(504);
    expect(r.body.error.code).to.equal('timeout');
    expect(r.body.error.message).to.match(/nothing was charged$/);
    expect(await balance(api)).to.equal(10);
    expect((await stack.db.ledger.find({ accountId }).toArray()).map((e) => e.kind).sort()).to.deep.equal([
      'charge',
      'refund',
    ]);
    expect((await api.get(`/sheets/${s.id}`)).body.version).to.equal(1);
    expect((await api.get(`/sheets/${s.id}/commits`)).body.total).to.equal(1);
  });

  it('when the body is invalid or the credits are short, then 400 or 402 before anything runs', async () => {
    const { api } = await account(stack, { credits: 0 });
    const s = await newSheet(api);
    expect((await api.post(`/sheets/${s.id}/edit`, {})).body.error.message).to.match(/^instruction: is required/);
    expect((await api.post(`/sheets/${s.id}/edit`, { instruction: '   ' })).body.error.message).to.match(
      /^instruction: must not be empty/,
    );
    expect((await api.post(`/sheets/${s.id}/edit`, { instruction: 'x'.repeat(2001) })).body.error.message).to.match(
      /^instruction: must be at most 2000 characters/,
    );
    const poor = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' });
    expect(poor.status).to.equal(402);
    expect(poor.body.error.code).to.equal('insufficient_credits');
    expect((await api.post('/sheets/prj_00000000000000000000/edit', { instruction: 'sort by Date' })).status).to.equal(
      404,
    );
  });
});

describe('sheets: POST /sheets/{id}/edit when the sheet pool does not answer', () => {
  it('when no sheet worker answers before the deadline, then 504 timeout and the credits come back', async () => {
    const stack = await startStack({ workers: false, scheduler: false, env: { SHEET_RPC_TIMEOUT_MS: '300' } });
    try {
      const { api, accountId } = await account(stack, { credits: 3 });
      const s = await newSheet(api);
      const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' });
      expect(r.status).to.equal(504);
      expect(r.body.error.code).to.equal('timeout');
      expect(r.body.error.message).to.match(/sheet pool did not answer within 300 ms; nothing was charged/);
      expect(await balance(api)).to.equal(3);
      const ledger = await stack.db.db
        .collection(COLLECTIONS.ledger)
        .find({ accountId } as never)
        .toArray();
      expect(ledger.map((e) => e.kind).sort()).to.deep.equal(['charge', 'refund']);
      expect((await api.get(`/sheets/${s.id}`)).body.version).to.equal(1);
    } finally {
      await stack.stop();
    }
  });
});

describe('sheets: POST /sheets/{id}/edit with SHEET_ENGINE=openai against a fake chat-completions provider', () => {
  let stack: Stack;
  let fake: Awaited<ReturnType<typeof fakeServer>>;
  let answer: unknown = { ops: [] };
  let status = 200;
  before(async () => {
    fake = await fakeServer((req, res) => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return void res.writeHead(404).end();
      if (status !== 200)
        return void res
          .writeHead(status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: 'upstream exploded', type: 'server_error' } }));
      const content = typeof answer === 'string' ? answer : JSON.stringify(answer);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-7',
          object: 'chat.completion',
          created: 1,
          model: 'sheet-model',
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 80, completion_tokens: 20, total_tokens: 100 },
        }),
      );
    });
    stack = await startStack({
      scheduler: false,
      env: {
        WORKER_POOLS: 'sheet',
        SHEET_ENGINE: 'openai',
        OPENAI_BASE_URL: `${fake.url}/v1`,
        OPENAI_API_KEY: 'sk-sheet',
        OPENAI_MODEL: 'sheet-model',
      },
    });
  });
  after(async () => {
    await stack.stop();
    await fake.close();
  });

  it('when the model answers ops, then they are validated and applied, and the request carried the columns, a sample and the instruction in JSON mode', async () => {
    const { api } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    answer = {
      ops: [
        { op: 'update', where: { column: 'Status', cmp: 'eq', value: 'done' }, set: [{ column: 'Qty', value: 0 }] },
      ],
    };
    const r = await api.post(`/sheets/${s.id}/edit`, { instruction: 'zero the quantity of finished items' });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({
      engine: 'openai-compatible:sheet-model',
      charged: fromUnits(stack.rt.credits.millicreditsFor('sheet_edit')),
    });
    expect((await api.get(`/sheets/${s.id}`)).body.rows.map((x: unknown[]) => x[2])).to.deep.equal([3, 0, 10, 0]);
    const sent = fake.requests.at(-1)!;
    expect(sent.headers.authorization).to.equal('Bearer sk-sheet');
    const body = JSON.parse(sent.body);
    expect(body).to.deep.include({ model: 'sheet-model', response_format: { type: 'json_object' } });
    expect(body.messages[0].content).to.contain('{"ops":[...]}');
    expect(body.messages[1].content)
      .to.contain('"name":"Price","type":"number"')
      .and.contain('["Apple",1.1,3,"2024-03-01","open"]')
      .and.contain('Instruction: zero the quantity of finished items');
  });

  it('when the model writes invalid ops, then 400 names the op and field and nothing is charged', async () => {
    const { api } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    answer = { ops: [{ op: 'explode', cell: 'A1' }] };
    const shape = await api.post(`/sheets/${s.id}/edit`, { instruction: 'boom' });
    expect(shape.status).to.equal(400);
    expect(shape.body.error.message).to.match(
      /^the openai-compatible:sheet-model engine wrote ops that are not valid \(ops\.0\.op: .*\); nothing was charged$/,
    );
    answer = { ops: [{ op: 'set', cell: 'Z1', value: 1 }] };
    const target = await api.post(`/sheets/${s.id}/edit`, { instruction: 'set z1' });
    expect(target.status).to.equal(400);
    expect(target.body.error.message).to.equal(
      "instruction: the openai-compatible:sheet-model engine's ops do not apply to this sheet: ops.0.cell: column Z is beyond the last column (E); nothing was charged",
    );
    answer = { ops: [], error: 'there is no colour column' };
    const none = await api.post(`/sheets/${s.id}/edit`, { instruction: 'paint it' });
    expect(none.body.error.message).to.equal(
      'instruction: the openai-compatible:sheet-model engine found no change to make: there is no colour column; nothing was charged',
    );
    expect(await balance(api)).to.equal(5);
    expect((await api.get(`/sheets/${s.id}`)).body.version).to.equal(1);
  });

  it('when the provider fails or answers something else than JSON ops, then 503 and nothing is charged', async () => {
    const { api } = await account(stack, { credits: 5 });
    const s = await newSheet(api);
    status = 500;
    const down = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' });
    status = 200;
    expect(down.status).to.equal(503);
    expect(down.body.error.message).to.match(/sheet provider answered 500/);
    answer = 'Sure! Here are your ops.';
    const prose = await api.post(`/sheets/${s.id}/edit`, { instruction: 'sort by Date' });
    expect(prose.status).to.equal(503);
    expect(prose.body.error.message).to.match(/did not answer JSON ops/);
    expect(await balance(api)).to.equal(5);
  });
});
