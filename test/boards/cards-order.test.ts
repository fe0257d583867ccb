import { expect } from 'chai';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { allCards, cardsCol, createBoard, createCard, lanes } from './helpers';

/** Card order: fractional keys, moves within and across lanes, concurrency (platform/boards/order.ts). */
describe('boards API: card order and moves', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    api = client(stack.baseUrl, (await stack.createAccount()).key);
  });
  after(() => stack.stop());

  /** A board with cards A..E in todo and X in done. */
  async function seed() {
    const b = await createBoard(api);
    const c: Record<string, any> = {};
    for (const t of ['A', 'B', 'C', 'D', 'E']) c[t] = await createCard(api, b.id, { title: t });
    c.X = await createCard(api, b.id, { title: 'X', column: 'done' });
    return { b, c };
  }
  const move = async (boardId: string, cardId: string, body: Record<string, unknown>) => {
    const r = await api.patch(`/boards/${boardId}/cards/${cardId}`, body);
    expect(r.status, r.text).to.equal(200);
    return r.body;
  };
  /** Positions as stored, by card id, with versions. */
  const stored = async (boardId: string) =>
    new Map(
      (await cardsCol(stack).find({ boardId }).toArray()).map((d: any) => [
        d._id,
        { position: d.position, column: d.column, version: d.version },
      ]),
    );

  it('when cards are created, then each lands at the bottom of its lane with a strictly larger key', async () => {
    const { b, c } = await seed();
    const keys = ['A', 'B', 'C', 'D', 'E'].map((t) => c[t].position);
    expect([...keys].sort()).to.deep.equal(keys);
    expect(new Set(keys).size).to.equal(5);
    expect(lanes(await allCards(api, b.id))).to.deep.equal({ todo: ['A', 'B', 'C', 'D', 'E'], done: ['X'] });
  });

  it('when a card moves within its lane (after, before, top, bottom, between), then the order follows and only that card is written', async () => {
    const { b, c } = await seed();
    const order = async () => lanes(await allCards(api, b.id)).todo;

    let snap = await stored(b.id);
    const moved = await move(b.id, c.E.id, { after: c.A.id });
    expect(await order()).to.deep.equal(['A', 'E', 'B', 'C', 'D']);
    expect(moved.version).to.equal(2);
    const after = await stored(b.id);
    for (const [id, s] of snap) if (id !== c.E.id) expect(after.get(id), id).to.deep.equal(s); // nobody else was renumbered

    await move(b.id, c.A.id, { before: c.D.id });
    expect(await order()).to.deep.equal(['E', 'B', 'C', 'A', 'D']);
    await move(b.id, c.D.id, { after: null });
    expect(await order()).to.deep.equal(['D', 'E', 'B', 'C', 'A']);
    await move(b.id, c.D.id, { before: null });
    expect(await order()).to.deep.equal(['E', 'B', 'C', 'A', 'D']);
    await move(b.id, c.D.id, { after: c.E.id, before: c.B.id });
    expect(await order()).to.deep.equal(['E', 'D', 'B', 'C', 'A']);

    // Already in the asked spot: the key is kept (a retried request changes nothing in the order).
    snap = await stored(b.id);
    const same = await move(b.id, c.D.id, { after: c.E.id });
    expect(same.position).to.equal(snap.get(c.D.id)!.position);
    const title = await move(b.id, c.D.id, { title: 'D!' });
    expect(title.position).to.equal(snap.get(c.D.id)!.position);

    const bad = await api.patch(`/boards/${b.id}/cards/${c.D.id}`, { after: c.A.id, before: c.E.id });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.match(/^before: must come after the card named by after/);
  });

  it('when a card moves across lanes, then a lane alone puts it at the bottom, with after/before where they say, and the counts follow', async () => {
    const { b, c } = await seed();
    await move(b.id, c.A.id, { column: 'done' });
    expect(lanes(await allCards(api, b.id))).to.deep.equal({ todo: ['B', 'C', 'D', 'E'], done: ['X', 'A'] });
    await move(b.id, c.B.id, { after: c.X.id }); // the lane of the neighbour
    expect(lanes(await allCards(api, b.id))).to.deep.equal({ todo: ['C', 'D', 'E'], done: ['X', 'B', 'A'] });
    await move(b.id, c.C.id, { column: 'done', after: null });
    expect(lanes(await allCards(api, b.id))).to.deep.equal({ todo: ['D', 'E'], done: ['C', 'X', 'B', 'A'] });
    await move(b.id, c.X.id, { column: 'doing' });
    expect(lanes(await allCards(api, b.id))).to.deep.equal({ todo: ['D', 'E'], doing: ['X'], done: ['C', 'B', 'A'] });
    const board = await api.get(`/boards/${b.id}`);
    expect(board.body.columns.map((x: any) => x.cardCount)).to.deep.equal([2, 1, 3]);
    const wrong = await api.patch(`/boards/${b.id}/cards/${c.D.id}`, { column: 'doing', before: c.A.id });
    expect(wrong.status).to.equal(400);
    expect(wrong.body.error.message).to.equal('before: that card is in column "done", not "doing"');
  });

  it('when 10 moves into the same gap run at once, then every one succeeds, no two cards share a key and the order is total and stable', async () => {
    const b = await createBoard(api);
    const anchor = await createCard(api, b.id, { title: 'anchor' });
    await createCard(api, b.id, { title: 'tail' });
    const movers = [];
    for (let i = 0; i < 10; i++) movers.push(await createCard(api, b.id, { title: `m${i}`, column: 'done' }));
    const results = await Promise.all(
      movers.map((m) => api.patch(`/boards/${b.id}/cards/${m.id}`, { after: anchor.id })),
    );
    for (const r of results) expect(r.status, r.text).to.equal(200);

    const docs = await cardsCol(stack).find({ boardId: b.id }).toArray();
    expect(new Set(docs.map((d: any) => `${d.column} ${d.position}`)).size).to.equal(docs.length);
    const todo = lanes(await allCards(api, b.id, '', 3)).todo!;
    expect(todo).to.have.length(12);
    expect(todo[0]).to.equal('anchor');
    expect(todo[11]).to.equal('tail');
    expect([...todo.slice(1, 11)].sort()).to.deep.equal(movers.map((m) => m.title).sort());
    // Stable: reading again gives the same order, and it is the stored key order.
    expect(lanes(await allCards(api, b.id)).todo).to.deep.equal(todo);
    const byKey = docs
      .filter((d: any) => d.column === 'todo')
      .sort((x: any, y: any) => (x.position < y.position ? -1 : 1))
      .map((d: any) => d.title);
    expect(byKey).to.deep.equal(todo);
  });

  it('when 10 cards are created at once at the bottom of a lane, and moved at once to the top, then keys stay unique and nothing is lost', async () => {
    const b = await createBoard(api);
    const made = await Promise.all(
      Array.from({ length: 10 }, (_, i) => api.post(`/boards/${b.id}/cards`, { title: `n${i}` })),
    );
    for (const r of made) expect(r.status, r.text).to.equal(201);
    const tops = await Promise.all(
      made.map((r) => api.patch(`/boards/${b.id}/cards/${r.body.id}`, { column: 'doing', after: null })),
    );
    for (const r of tops) expect(r.status, r.text).to.equal(200);
    const docs = await cardsCol(stack).find({ boardId: b.id }).toArray();
    expect(docs).to.have.length(10);
    expect(new Set(docs.map((d: any) => d.position)).size).to.equal(10);
    expect(docs.every((d: any) => d.column === 'doing')).to.equal(true);
    expect(await allCards(api, b.id, '', 4)).to.have.length(10);
  });

  it('when a lane is removed while cards are being created and moved into it, then no card is ever left in a lane the board no longer has', async () => {
    for (let round = 0; round < 4; round++) {
      const b = await createBoard(api);
      const src = await createCard(api, b.id, { title: 'mover', column: 'todo' });
      const removal = api.patch(`/boards/${b.id}`, {
        columns: [
          { id: 'todo', name: 'To do' },
          { id: 'done', name: 'Done' },
        ],
      });
      const writes = [
        api.post(`/boards/${b.id}/cards`, { title: 'new', column: 'doing' }),
        api.patch(`/boards/${b.id}/cards/${src.id}`, { column: 'doing' }),
        api.post(`/boards/${b.id}/cards`, { title: 'new2', column: 'doing' }),
      ];
      const [r, ...w] = await Promise.all([removal, ...writes]);
      expect([200, 409], r!.text).to.include(r!.status);
      // 400: the lane was already gone when the write read the board; 409: it was being removed.
      for (const x of w) expect([200, 201, 400, 409], x.text).to.include(x.status);
      if (process.env.BOARDS_VERBOSE)
        console.log(
          round,
          r!.status,
          w.map((x) => x.status),
        );
      const board = (await api.get(`/boards/${b.id}`)).body;
      const laneIds = new Set(board.columns.map((c: any) => c.id));
      const docs = await cardsCol(stack).find({ boardId: b.id }).toArray();
      for (const d of docs)
        expect(laneIds.has(d.column), `round ${round}: card in ${d.column}, lanes ${[...laneIds]}`).to.equal(true);
      expect(board.cardCount).to.equal(docs.length);
      if (r!.status === 200) expect(laneIds.has('doing')).to.equal(false);
      else expect(r!.body.error.code).to.equal('column_not_empty');
    }
  });

  it('when a board is deleted while cards are being added, then none of its cards remain', async () => {
    for (let round = 0; round < 3; round++) {
      const b = await createBoard(api);
      await createCard(api, b.id);
      const results = await Promise.all([
        api.post(`/boards/${b.id}/cards`, { title: 'racing 1' }),
        api.delete(`/boards/${b.id}`),
        api.post(`/boards/${b.id}/cards`, { title: 'racing 2' }),
      ]);
      expect(results[1]!.status).to.equal(204);
      for (const r of [results[0]!, results[2]!]) expect([201, 404], r.text).to.include(r.status);
      expect(await cardsCol(stack).countDocuments({ boardId: b.id })).to.equal(0);
    }
  });
});
