import { expect } from 'chai';
import { Board, Card } from '../../contracts/boards';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { allCards, boardsCol, cardsCol, createBoard, createCard, insertProject, lanes } from './helpers';

describe('boards API: boards and cards', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    ({ accountId } = await stack.createAccount().then(async (a) => {
      api = client(stack.baseUrl, a.key);
      return a;
    }));
  });
  after(() => stack.stop());

  const expect400 = async (p: Promise<{ status: number; body: any; text: string }>, message: RegExp) => {
    const r = await p;
    expect(r.status, r.text).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(message);
  };

  describe('boards', () => {
    it('when a board is created without lanes, then 201 has To do / Doing / Done with zero counts, version 1, an absolute openUrl, and it is stored', async () => {
      const r = await api.post('/boards', { name: 'Launch', description: 'Q3 launch', tags: ['q3', 'q3'] });
      expect(r.status).to.equal(201);
      expect(() => Board.parse(r.body)).to.not.throw();
      expect(r.body.id).to.match(/^brd_[0-9a-z]{20}$/);
      expect(r.body).to.include({
        name: 'Launch',
        description: 'Q3 launch',
        version: 1,
        cardCount: 0,
        openUrl: `${stack.config.PUBLIC_BASE_URL}/boards/${r.body.id}`,
      });
      expect(r.body.columns).to.deep.equal([
        { id: 'todo', name: 'To do', cardCount: 0 },
        { id: 'doing', name: 'Doing', cardCount: 0 },
        { id: 'done', name: 'Done', cardCount: 0 },
      ]);
      expect(r.body.tags).to.deep.equal(['q3']);
      expect(r.headers.get('etag')).to.equal('"1"');
      const doc = await boardsCol(stack).findOne({ _id: r.body.id });
      expect(doc).to.include({ accountId, name: 'Launch', version: 1 });
      expect(doc.columns.map((c: any) => c.id)).to.deep.equal(['todo', 'doing', 'done']);
    });

    it('when lanes are given, then given ids are kept and the others are made from the names, never twice', async () => {
      const b = await createBoard(api, {
        columns: [
          { name: 'Backlog' },
          { id: 'wip', name: 'In progress' },
          { name: 'In review' },
          { name: 'In review' },
          { name: '✓ Shipped!' },
          { name: '🚀' },
        ],
      });
      expect(b.columns.map((c: any) => c.id)).to.deep.equal([
        'backlog',
        'wip',
        'in-review',
        'in-review-2',
        'shipped',
        'column',
      ]);
      expect(b.columns.map((c: any) => c.name)).to.deep.equal([
        'Backlog',
        'In progress',
        'In review',
        'In review',
        '✓ Shipped!',
        '🚀',
      ]);
    });

    it('when a board body breaks a rule, then 400 names the field', async () => {
      const cases: [unknown, RegExp][] = [
        [{}, /^name: is required/],
        [{ name: '   ' }, /^name: must not be empty/],
        [{ name: 'x'.repeat(256) }, /^name: must be at most 255 characters/],
        [{ name: 'a\nb' }, /^name: must not contain control characters/],
        [{ name: 'x', description: 'd'.repeat(5001) }, /^description: must be at most 5000 characters/],
        [{ name: 'x', columns: [] }, /^columns: must have at least 1 column/],
        [
          { name: 'x', columns: Array.from({ length: 21 }, (_, i) => ({ name: `c${i}` })) },
          /^columns: must have at most 20 columns/,
        ],
        [{ name: 'x', columns: [{ name: '' }] }, /^columns\.0\.name: must not be empty/],
        [{ name: 'x', columns: [{ id: 'a b', name: 'A' }] }, /^columns\.0\.id: must be letters, digits, _ and -/],
        [
          {
            name: 'x',
            columns: [
              { id: 'a', name: 'A' },
              { id: 'a', name: 'B' },
            ],
          },
          /^columns\.1\.id: duplicate column id "a"/,
        ],
        [{ name: 'x', columns: [{ name: 'A', color: 'red' }] }, /color: unknown field/],
        [{ name: 'x', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, /^tags: must have at most 20 tags/],
        [{ name: 'x', owner: 'me' }, /owner: unknown field/],
      ];
      for (const [body, message] of cases) await expect400(api.post('/boards', body), message);
    });

    it('when boards are listed, then the envelope pages newest change first with an opaque cursor, filters by tag and bounds limit', async () => {
      const { key } = await stack.createAccount();
      const own = client(stack.baseUrl, key);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await createBoard(own, { name: `B${i}`, tags: i % 2 ? ['odd'] : [] })).id);
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const r = await own.get(`/boards?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(r.status).to.equal(200);
        expect(r.body.total).to.equal(pages === 0 ? 5 : 6);
        for (const b of r.body.data) expect(b.columns[0]).to.not.have.property('cardCount');
        seen.push(...r.body.data.map((b: any) => b.id));
        cursor = r.body.cursor;
        pages++;
        if (pages === 1) await createBoard(own, { name: 'added while paging' }); // newest: lands before the pages still to read, never repeats them
      } while (cursor);
      expect(seen).to.deep.equal([...ids].reverse());
      const odd = await own.get('/boards?tag=odd');
      expect(odd.body.data.map((b: any) => b.name)).to.deep.equal(['B3', 'B1']);
      expect(odd.body.total).to.equal(2);
      await expect400(own.get('/boards?limit=101'), /^limit: must be between 1 and 100/);
      await expect400(own.get('/boards?limit=0'), /^limit: /);
      await expect400(own.get('/boards?cursor=bm9wZQ'), /^cursor: /);
    });

    it('when a board is patched, then only the passed fields change, version and ETag move on, and a stale If-Match is 412 precondition_failed', async () => {
      const b = await createBoard(api, { name: 'Old', description: 'keep me', tags: ['a'] });
      const r = await api.patch(`/boards/${b.id}`, { name: 'New' });
      expect(r.status).to.equal(200);
      expect(r.body).to.include({ name: 'New', description: 'keep me', version: 2 });
      expect(r.body.tags).to.deep.equal(['a']);
      expect(r.body.columns.map((c: any) => c.id)).to.deep.equal(['todo', 'doing', 'done']);
      expect(r.headers.get('etag')).to.equal('"2"');
      const stale = await api.patch(`/boards/${b.id}`, { description: 'lost' }, { 'if-match': '"1"' });
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      const staleLanes = await api.patch(`/boards/${b.id}`, { columns: [{ name: 'x' }] }, { 'if-match': '"1"' });
      expect(staleLanes.status).to.equal(412);
      expect(staleLanes.body.error.code).to.equal('precondition_failed');
      const ok = await api.patch(`/boards/${b.id}`, { description: 'changed' }, { 'if-match': '"2"' });
      expect(ok.status).to.equal(200);
      expect(ok.body).to.include({ name: 'New', description: 'changed', version: 3 });
      const doc = await boardsCol(stack).findOne({ _id: b.id });
      expect(doc).to.include({ name: 'New', description: 'changed', version: 3 });
      await expect400(api.patch(`/boards/${b.id}`, {}), /name a field to change/);
      await expect400(api.patch(`/boards/${b.id}`, { name: '' }), /^name: must not be empty/);
      await expect400(api.patch(`/boards/${b.id}`, { columns: [] }), /^columns: must have at least 1/);
      await expect400(api.patch(`/boards/${b.id}`, { version: 9 }), /version: unknown field/);
      await expect400(api.patch(`/boards/${b.id}`, { name: 'x' }, { 'if-match': 'nope' }), /^If-Match: /);
    });

    it('when lanes are renamed, reordered, added and an empty one removed, then cards keep their lanes; removing a lane with cards is 409 column_not_empty and changes nothing', async () => {
      const b = await createBoard(api);
      await createCard(api, b.id, { title: 'T1', column: 'todo' });
      await createCard(api, b.id, { title: 'D1', column: 'done' });
      const r = await api.patch(`/boards/${b.id}`, {
        columns: [{ id: 'done', name: 'Shipped' }, { id: 'todo', name: 'Backlog' }, { name: 'Review' }],
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.columns).to.deep.equal([
        { id: 'done', name: 'Shipped', cardCount: 1 },
        { id: 'todo', name: 'Backlog', cardCount: 1 },
        { id: 'review', name: 'Review', cardCount: 0 },
      ]);
      expect(lanes(await allCards(api, b.id))).to.deep.equal({ done: ['D1'], todo: ['T1'] });
      expect((await allCards(api, b.id)).map((c) => c.title)).to.deep.equal(['D1', 'T1']); // lane order follows the board

      const refused = await api.patch(`/boards/${b.id}`, {
        name: 'renamed too',
        columns: [{ id: 'done', name: 'Shipped' }],
      });
      expect(refused.status).to.equal(409);
      expect(refused.body.error.code).to.equal('column_not_empty');
      expect(refused.body.error.message).to.include('"todo" (1 cards)');
      const doc = await boardsCol(stack).findOne({ _id: b.id });
      expect(doc.name).to.equal('Sprint');
      expect(doc.columns.map((c: any) => c.id)).to.deep.equal(['done', 'todo', 'review']);
      expect(doc.closing ?? {}).to.deep.equal({});

      const removed = await api.patch(`/boards/${b.id}`, {
        columns: [
          { id: 'todo', name: 'Backlog' },
          { id: 'done', name: 'Shipped' },
        ],
      });
      expect(removed.status).to.equal(200);
      expect(removed.body.columns.map((c: any) => c.id)).to.deep.equal(['todo', 'done']);
      expect(removed.body.version).to.equal(3);
    });

    it('when a board is read, then GET shows card counts per lane and in total', async () => {
      const b = await createBoard(api);
      await createCard(api, b.id, { column: 'doing' });
      await createCard(api, b.id, { column: 'doing' });
      await createCard(api, b.id, { column: 'done' });
      const r = await api.get(`/boards/${b.id}`);
      expect(r.status).to.equal(200);
      expect(() => Board.parse(r.body)).to.not.throw();
      expect(r.body.columns.map((c: any) => c.cardCount)).to.deep.equal([0, 2, 1]);
      expect(r.body.cardCount).to.equal(3);
      expect(r.headers.get('etag')).to.equal('"1"');
    });

    it('when a board is deleted, then 204, its cards are gone from the collection, and it answers 404 after', async () => {
      const b = await createBoard(api);
      for (let i = 0; i < 3; i++) await createCard(api, b.id);
      const other = await createBoard(api);
      await createCard(api, other.id);
      const r = await api.delete(`/boards/${b.id}`);
      expect(r.status).to.equal(204);
      expect(r.text).to.equal('');
      expect(await boardsCol(stack).countDocuments({ _id: b.id })).to.equal(0);
      expect(await cardsCol(stack).countDocuments({ boardId: b.id })).to.equal(0);
      expect(await cardsCol(stack).countDocuments({ boardId: other.id })).to.equal(1);
      expect((await api.get(`/boards/${b.id}`)).status).to.equal(404);
      expect((await api.get(`/boards/${b.id}/cards`)).status).to.equal(404);
      expect((await api.delete(`/boards/${b.id}`)).status).to.equal(404);
    });

    it('when a board is duplicated, then 201 is a deep copy with new ids, the same lanes, cards and order, and the source is untouched', async () => {
      const projectId = await insertProject(stack, accountId);
      const b = await createBoard(api, {
        name: 'Source',
        description: 'desc',
        tags: ['t'],
        columns: [
          { id: 'a', name: 'A' },
          { id: 'b', name: 'B' },
        ],
      });
      const made = [];
      for (const [i, col] of ['a', 'a', 'b', 'a'].entries())
        made.push(
          await createCard(api, b.id, {
            title: `C${i}`,
            column: col,
            body: `body ${i}`,
            labels: ['x'],
            assignee: 'ann',
            dueDate: '2026-12-31',
            projectIds: [projectId],
          }),
        );
      // Reorder so the copy must follow positions, not creation order.
      await api.patch(`/boards/${b.id}/cards/${made[3].id}`, { after: null });
      const before = await allCards(api, b.id);

      const r = await api.post(`/boards/${b.id}/duplicate`, {});
      expect(r.status, r.text).to.equal(201);
      expect(r.body.id).to.match(/^brd_/).and.not.equal(b.id);
      expect(r.body).to.include({ name: 'Source (copy)', description: 'desc', version: 1, cardCount: 4 });
      expect(r.body.columns).to.deep.equal([
        { id: 'a', name: 'A', cardCount: 3 },
        { id: 'b', name: 'B', cardCount: 1 },
      ]);
      expect(r.body.tags).to.deep.equal(['t']);
      const copy = await allCards(api, r.body.id);
      expect(
        copy.map((c) => [c.title, c.column, c.body, c.labels, c.assignee, c.dueDate, c.projectIds, c.version]),
      ).to.deep.equal(before.map((c) => [c.title, c.column, c.body, c.labels, c.assignee, c.dueDate, c.projectIds, 1]));
      const sourceIds = new Set(before.map((c) => c.id));
      for (const c of copy) {
        expect(sourceIds.has(c.id)).to.equal(false);
        expect(c.id).to.match(/^crd_/);
        expect(c.boardId).to.equal(r.body.id);
      }
      expect(await allCards(api, b.id)).to.deep.equal(before);

      const named = await api.post(`/boards/${b.id}/duplicate`, { name: 'Mine' });
      expect(named.status).to.equal(201);
      expect(named.body.name).to.equal('Mine');
      const long = await createBoard(api, { name: 'n'.repeat(255) });
      const longCopy = await api.post(`/boards/${long.id}/duplicate`, {});
      expect(longCopy.body.name)
        .to.have.length(255)
        .and.match(/ \(copy\)$/);
      await expect400(api.post(`/boards/${b.id}/duplicate`, { name: '' }), /^name: must not be empty/);
      await expect400(api.post(`/boards/${b.id}/duplicate`, { deep: true }), /deep: unknown field/);
      expect((await api.post('/boards/brd_00000000000000000000/duplicate', {})).status).to.equal(404);
      // No body at all is {}; an empty JSON body is still 400.
      const bare = await api.post(`/boards/${b.id}/duplicate`);
      expect(bare.status, bare.text).to.equal(201);
      expect(bare.body.name).to.equal(`${b.name} (copy)`);
      expect((await api.post(`/boards/${b.id}/duplicate`, '', { 'content-type': 'application/json' })).status).to.equal(
        400,
      );
    });
  });

  describe('cards', () => {
    it('when a card is created, then 201 puts it at the bottom of the first lane with every field, and it is stored', async () => {
      const b = await createBoard(api);
      const first = await createCard(api, b.id, { title: 'First' });
      const r = await api.post(`/boards/${b.id}/cards`, {
        title: '  Second  ',
        body: '# Notes\n\n- a',
        labels: ['bug', 'bug', 'ui'],
        assignee: 'ann@example.com',
        dueDate: '2028-02-29',
      });
      expect(r.status, r.text).to.equal(201);
      expect(() => Card.parse(r.body)).to.not.throw();
      expect(r.body.id).to.match(/^crd_[0-9a-z]{20}$/);
      expect(r.body).to.include({
        boardId: b.id,
        title: 'Second',
        body: '# Notes\n\n- a',
        column: 'todo',
        assignee: 'ann@example.com',
        dueDate: '2028-02-29',
        version: 1,
      });
      expect(r.body.labels).to.deep.equal(['bug', 'ui']);
      expect(r.body.projectIds).to.deep.equal([]);
      expect(r.body.position > first.position).to.equal(true);
      expect(r.headers.get('etag')).to.equal('"1"');
      expect(first).to.include({ body: '', assignee: null, dueDate: null });
      const doc = await cardsCol(stack).findOne({ _id: r.body.id });
      expect(doc).to.include({ accountId, boardId: b.id, column: 'todo', position: r.body.position });
    });

    it('when a card body breaks a rule, then 400 names the field', async () => {
      const b = await createBoard(api);
      const c = await createCard(api, b.id);
      const cases: [unknown, RegExp][] = [
        [{}, /^title: is required/],
        [{ title: ' ' }, /^title: must not be empty/],
        [{ title: 't'.repeat(501) }, /^title: must be at most 500 characters/],
        [{ title: 'a\tb' }, /^title: must not contain control characters/],
        [{ title: 'x', body: 'b'.repeat(20_001) }, /^body: must be at most 20000 characters/],
        [{ title: 'x', body: 'a\u0000b' }, /^body: must not contain NUL/],
        [{ title: 'x', column: 'nope' }, /^column: names no column of this board/],
        [{ title: 'x', column: '../x' }, /^column: must be letters, digits/],
        [{ title: 'x', dueDate: '2026-02-30' }, /^dueDate: must be a date YYYY-MM-DD/],
        [{ title: 'x', dueDate: '2026-12-01T10:00:00Z' }, /^dueDate: must be a date YYYY-MM-DD/],
        [{ title: 'x', labels: Array.from({ length: 21 }, (_, i) => `l${i}`) }, /^labels: must have at most 20 labels/],
        [{ title: 'x', labels: ['ok', ''] }, /^labels\.1: must not be empty/],
        [{ title: 'x', assignee: 'a'.repeat(257) }, /^assignee: must be at most 256 characters/],
        [{ title: 'x', projectIds: 'prj_1' }, /^projectIds: must be an array of project ids/],
        [
          { title: 'x', projectIds: Array.from({ length: 21 }, (_, i) => `prj_${i}`) },
          /^projectIds: must have at most 20 projects/,
        ],
        [{ title: 'x', projectIds: ['prj_00000000000000000000'] }, /^projectIds\.0: names no project of yours/],
        [{ title: 'x', before: 'crd_00000000000000000000' }, /^before: names no card of this board/],
        [{ title: 'x', after: 'crd_00000000000000000000' }, /^after: names no card of this board/],
        [{ title: 'x', before: null, after: null }, /^before: before and after cannot both be null/],
        [{ title: 'x', before: c.id, after: c.id }, /^before: must differ from after/],
        [{ title: 'x', after: c.id, column: 'done' }, /^after: that card is in column "todo", not "done"/],
        [{ title: 'x', position: 'a0' }, /position: unknown field/],
      ];
      for (const [body, message] of cases) await expect400(api.post(`/boards/${b.id}/cards`, body), message);
      expect(await cardsCol(stack).countDocuments({ boardId: b.id })).to.equal(1);
    });

    it("when a card links projects, then its own projects are accepted and another account's is 400 naming the field, exactly like an unknown id", async () => {
      const b = await createBoard(api);
      const mine = await insertProject(stack, accountId);
      const other = await stack.createAccount();
      const theirs = await insertProject(stack, other.accountId);
      const ok = await api.post(`/boards/${b.id}/cards`, { title: 'linked', projectIds: [mine, mine] });
      expect(ok.status).to.equal(201);
      expect(ok.body.projectIds).to.deep.equal([mine]);
      const foreign = await api.post(`/boards/${b.id}/cards`, { title: 'x', projectIds: [mine, theirs] });
      const unknown = await api.post(`/boards/${b.id}/cards`, {
        title: 'x',
        projectIds: [mine, 'prj_00000000000000000000'],
      });
      expect(foreign.status).to.equal(400);
      expect(foreign.body.error.message).to.equal('projectIds.1: names no project of yours');
      expect(unknown.body.error.message).to.equal(foreign.body.error.message);
      const patched = await api.patch(`/boards/${b.id}/cards/${ok.body.id}`, { projectIds: [theirs] });
      expect(patched.status).to.equal(400);
      expect(patched.body.error.message).to.equal('projectIds.0: names no project of yours');
      const cleared = await api.patch(`/boards/${b.id}/cards/${ok.body.id}`, { projectIds: [] });
      expect(cleared.body.projectIds).to.deep.equal([]);
    });

    it('when cards are listed, then they come lane by lane in board order, then by position, page by page, with filters', async () => {
      const b = await createBoard(api);
      await createCard(api, b.id, { title: 'D1', column: 'done', labels: ['bug'] });
      await createCard(api, b.id, { title: 'T1', column: 'todo', assignee: 'ann' });
      await createCard(api, b.id, { title: 'G1', column: 'doing', labels: ['bug'], assignee: 'ann' });
      await createCard(api, b.id, { title: 'T2', column: 'todo' });
      await createCard(api, b.id, { title: 'D2', column: 'done' });
      const all = await allCards(api, b.id, '', 2);
      expect(all.map((c) => c.title)).to.deep.equal(['T1', 'T2', 'G1', 'D1', 'D2']);
      const first = await api.get(`/boards/${b.id}/cards?limit=2`);
      expect(first.body.total).to.equal(5);
      expect(first.body.cursor).to.be.a('string');
      // A card added to an earlier lane while paging does not shift the pages still to read.
      await createCard(api, b.id, { title: 'T0', column: 'todo', after: null });
      const rest = await api.get(`/boards/${b.id}/cards?limit=10&cursor=${first.body.cursor}`);
      expect(rest.body.data.map((c: any) => c.title)).to.deep.equal(['G1', 'D1', 'D2']);
      expect(rest.body).to.not.have.property('cursor');
      expect((await allCards(api, b.id, '&column=done')).map((c) => c.title)).to.deep.equal(['D1', 'D2']);
      expect((await allCards(api, b.id, '&label=bug', 1)).map((c) => c.title)).to.deep.equal(['G1', 'D1']);
      expect((await allCards(api, b.id, '&assignee=ann')).map((c) => c.title)).to.deep.equal(['T1', 'G1']);
      const filtered = await api.get(`/boards/${b.id}/cards?label=bug`);
      expect(filtered.body.total).to.equal(2);
      await expect400(api.get(`/boards/${b.id}/cards?column=nope`), /^column: names no column of this board/);
      await expect400(api.get(`/boards/${b.id}/cards?limit=101`), /^limit: must be between 1 and 100/);
      await expect400(api.get(`/boards/${b.id}/cards?cursor=${encodeURIComponent('not-a-cursor')}`), /^cursor: /);
      const otherBoard = await createBoard(api);
      await expect400(api.get(`/boards/${otherBoard.id}/cards?cursor=${first.body.cursor}`), /^cursor: /);
    });

    it('when a card is patched, then only the passed fields change, its place is kept, null clears, and a stale If-Match is 412', async () => {
      const b = await createBoard(api);
      const c = await createCard(api, b.id, { title: 'T', labels: ['a'], assignee: 'ann', dueDate: '2027-01-01' });
      const r = await api.patch(`/boards/${b.id}/cards/${c.id}`, { title: 'Renamed', assignee: null });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({
        title: 'Renamed',
        assignee: null,
        dueDate: '2027-01-01',
        column: 'todo',
        position: c.position,
        version: 2,
      });
      expect(r.body.labels).to.deep.equal(['a']);
      expect(r.headers.get('etag')).to.equal('"2"');
      const stale = await api.patch(`/boards/${b.id}/cards/${c.id}`, { title: 'lost' }, { 'if-match': '"1"' });
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      const staleMove = await api.patch(`/boards/${b.id}/cards/${c.id}`, { column: 'done' }, { 'if-match': '"1"' });
      expect(staleMove.status).to.equal(412);
      const ok = await api.patch(`/boards/${b.id}/cards/${c.id}`, { dueDate: null, body: 'x' }, { 'if-match': '"2"' });
      expect(ok.body).to.include({ dueDate: null, body: 'x', version: 3, title: 'Renamed' });
      const doc = await cardsCol(stack).findOne({ _id: c.id });
      expect(doc).to.include({ title: 'Renamed', dueDate: null, version: 3, column: 'todo' });
      await expect400(api.patch(`/boards/${b.id}/cards/${c.id}`, {}), /name a field to change/);
      await expect400(api.patch(`/boards/${b.id}/cards/${c.id}`, { after: c.id }), /^after: must name another card/);
      await expect400(api.patch(`/boards/${b.id}/cards/${c.id}`, { column: 'nope' }), /^column: names no column/);
      await expect400(api.patch(`/boards/${b.id}/cards/${c.id}`, { boardId: 'x' }), /boardId: unknown field/);
      expect((await api.patch(`/boards/${b.id}/cards/crd_00000000000000000000`, { title: 'x' })).status).to.equal(404);
      const otherBoard = await createBoard(api);
      expect((await api.patch(`/boards/${otherBoard.id}/cards/${c.id}`, { title: 'x' })).status).to.equal(404); // a card is reached through its own board
    });

    it('when a card is deleted, then 204, it leaves the list and the collection, and a second delete is 404', async () => {
      const b = await createBoard(api);
      const c = await createCard(api, b.id);
      const keep = await createCard(api, b.id);
      expect((await api.delete(`/boards/${b.id}/cards/${c.id}`)).status).to.equal(204);
      expect((await allCards(api, b.id)).map((x) => x.id)).to.deep.equal([keep.id]);
      expect(await cardsCol(stack).countDocuments({ _id: c.id })).to.equal(0);
      expect((await api.delete(`/boards/${b.id}/cards/${c.id}`)).status).to.equal(404);
      expect((await api.get(`/boards/${b.id}`)).body.cardCount).to.equal(1);
    });
  });

  describe('tenants and scopes', () => {
    it("when a second account uses the first account's ids on every boards route, then each answers 404 and never their data", async () => {
      const b = await createBoard(api, { name: 'Secret plans' });
      const c = await createCard(api, b.id, { title: 'Secret card' });
      const intruder = client(stack.baseUrl, (await stack.createAccount()).key);
      const calls: [string, Promise<{ status: number; text: string }>][] = [
        ['getBoard', intruder.get(`/boards/${b.id}`)],
        ['updateBoard', intruder.patch(`/boards/${b.id}`, { name: 'mine' })],
        ['duplicateBoard', intruder.post(`/boards/${b.id}/duplicate`, {})],
        ['listCards', intruder.get(`/boards/${b.id}/cards`)],
        ['createCard', intruder.post(`/boards/${b.id}/cards`, { title: 'x' })],
        ['updateCard', intruder.patch(`/boards/${b.id}/cards/${c.id}`, { title: 'x' })],
        ['deleteCard', intruder.delete(`/boards/${b.id}/cards/${c.id}`)],
        ['deleteBoard', intruder.delete(`/boards/${b.id}`)],
      ];
      for (const [name, p] of calls) {
        const r = await p;
        expect(r.status, name).to.equal(404);
        expect(r.text, name).to.not.include('Secret');
      }
      const own = await createBoard(intruder, { name: 'Intruder board' });
      // Their own board cannot reach the first account's cards either.
      expect((await intruder.patch(`/boards/${own.id}/cards/${c.id}`, { title: 'x' })).status).to.equal(404);
      expect((await intruder.delete(`/boards/${own.id}/cards/${c.id}`)).status).to.equal(404);
      expect((await intruder.post(`/boards/${own.id}/cards`, { title: 'x', after: c.id })).status).to.equal(400);
      const list = await intruder.get('/boards');
      expect(list.body.total).to.equal(1);
      expect(list.body.data.map((x: any) => x.id)).to.deep.equal([own.id]);
      // Nothing of the first account changed.
      const still = await api.get(`/boards/${b.id}`);
      expect(still.body).to.include({ name: 'Secret plans', version: 1, cardCount: 1 });
      expect((await api.get(`/boards/${b.id}/cards`)).body.data[0]).to.include({ title: 'Secret card', version: 1 });
    });

    it('when a key lacks the scope, then GETs need read and writes need write (403)', async () => {
      const b = await createBoard(api);
      const c = await createCard(api, b.id);
      const reader = client(stack.baseUrl, (await stack.createAccount({ scopes: ['read'] })).key);
      const writer = client(stack.baseUrl, (await stack.createAccount({ scopes: ['write'] })).key);
      const ai = client(stack.baseUrl, (await stack.createAccount({ scopes: ['ai'] })).key);
      for (const k of [writer, ai]) {
        expect((await k.get('/boards')).status).to.equal(403);
        expect((await k.get(`/boards/${b.id}`)).status).to.equal(403);
        expect((await k.get(`/boards/${b.id}/cards`)).status).to.equal(403);
      }
      for (const k of [reader, ai]) {
        const writes = [
          k.post('/boards', { name: 'x' }),
          k.patch(`/boards/${b.id}`, { name: 'x' }),
          k.delete(`/boards/${b.id}`),
          k.post(`/boards/${b.id}/duplicate`, {}),
          k.post(`/boards/${b.id}/cards`, { title: 'x' }),
          k.patch(`/boards/${b.id}/cards/${c.id}`, { title: 'x' }),
          k.delete(`/boards/${b.id}/cards/${c.id}`),
        ];
        for (const r of await Promise.all(writes)) {
          expect(r.status).to.equal(403);
          expect(r.body.error.code).to.equal('forbidden');
        }
      }
      expect((await reader.get('/boards')).status).to.equal(200);
      expect((await writer.post('/boards', { name: 'x' })).status).to.equal(201);
    });
  });
});
