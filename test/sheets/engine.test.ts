import { expect } from 'chai';
import { parseRange } from '../../platform/sheets/cells';
import { BLOCK_ROWS, emptyTree, WorkingGrid, type Tree } from '../../platform/sheets/grid';
import { applyOps, conflictOf, reapplyOps, type Touched } from '../../platform/sheets/ops';
import { AppError } from '../../platform/infra/errors';
import { createLocalSheetEngine } from '../../workers/engines/sheets/local.engine';
import type { SheetEditInput } from '../../workers/engines/sheets/sheet.engine';
import { SheetOps, type SheetOp } from '../../contracts/sheets';

const INPUT: SheetEditInput = {
  instruction: '',
  columns: [
    { letter: 'A', name: 'Item', type: 'string' },
    { letter: 'B', name: 'Price', type: 'number' },
    { letter: 'C', name: 'Qty', type: 'number' },
    { letter: 'D', name: 'Date', type: 'date' },
    { letter: 'E', name: 'Status', type: 'string' },
    { letter: 'F', name: 'Paid', type: 'boolean' },
  ],
  sample: [['Apple', 1, 2, '2024-01-01', 'open', false]],
  rowCount: 1,
};

describe('sheets: local-rules-v1 engine', () => {
  const engine = createLocalSheetEngine();
  const plan = async (instruction: string) =>
    (await engine.plan({ ...INPUT, instruction }, { signal: new AbortController().signal })).ops;

  it('when given the documented instructions, then it writes ops that pass the op contract', async () => {
    const cases: [string, unknown[]][] = [
      [
        'add a column Total = Price * Qty',
        [{ op: 'insertColumn', name: 'Total', type: 'number', expression: 'Price * Qty' }],
      ],
      [
        'Add a new column called "Net" as [Price] * 0.8',
        [{ op: 'insertColumn', name: 'Net', type: 'number', expression: '[Price] * 0.8' }],
      ],
      ['add a date column Due', [{ op: 'insertColumn', name: 'Due', type: 'date' }]],
      ['add a column Owner before Status', [{ op: 'insertColumn', name: 'Owner', type: 'string', before: 'Status' }]],
      ['sort by Date descending', [{ op: 'sort', column: 'Date', direction: 'desc' }]],
      ['order the rows by price, lowest first', [{ op: 'sort', column: 'price', direction: 'asc' }]],
      [
        'delete rows where Status is done',
        [{ op: 'deleteRows', where: { column: 'Status', cmp: 'eq', value: 'done' } }],
      ],
      ['remove rows where Qty > 5', [{ op: 'deleteRows', where: { column: 'Qty', cmp: 'gt', value: 5 } }]],
      [
        'delete rows where Status is not open',
        [{ op: 'deleteRows', where: { column: 'Status', cmp: 'ne', value: 'open' } }],
      ],
      ['delete rows where Date is empty', [{ op: 'deleteRows', where: { column: 'Date', cmp: 'empty' } }]],
      [
        'delete rows where Item contains "app"',
        [{ op: 'deleteRows', where: { column: 'Item', cmp: 'contains', value: 'app' } }],
      ],
      ['delete rows 3, 5 and 7', [{ op: 'deleteRows', rows: [3, 5, 7] }]],
      ['delete rows 2 to 4', [{ op: 'deleteRows', rows: [2, 3, 4] }]],
      ['rename column B to Owner', [{ op: 'renameColumn', column: 'B', name: 'Owner' }]],
      ['delete column Notes', [{ op: 'deleteColumn', column: 'Notes' }]],
      ['change column Qty to text', [{ op: 'retypeColumn', column: 'Qty', type: 'string' }]],
      [
        'set Status to done where Qty is 0',
        [{ op: 'update', set: [{ column: 'Status', value: 'done' }], where: { column: 'Qty', cmp: 'eq', value: 0 } }],
      ],
      [
        'set Paid to yes where Status = done',
        [
          {
            op: 'update',
            set: [{ column: 'Paid', value: true }],
            where: { column: 'Status', cmp: 'eq', value: 'done' },
          },
        ],
      ],
      ['set Price = Price * 1.1', [{ op: 'update', set: [{ column: 'Price', expression: 'Price * 1.1' }] }]],
      ['add a row: Widget, 3, 4.5', [{ op: 'appendRows', rows: [['Widget', 3, 4.5]] }]],
      [
        'sort by Date; then delete column Status',
        [
          { op: 'sort', column: 'Date', direction: 'asc' },
          { op: 'deleteColumn', column: 'Status' },
        ],
      ],
    ];
    for (const [instruction, ops] of cases) {
      const out = await plan(instruction);
      expect(out, instruction).to.deep.equal(ops);
      expect(SheetOps.safeParse(out).success, instruction).to.equal(true);
    }
  });

  it('when the instruction is not understood, then a validation_error names instruction and lists examples', async () => {
    const err = await plan('make it look nicer').catch((e: unknown) => e);
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('validation_error');
    expect((err as AppError).message).to.match(
      /^instruction: the local-rules-v1 engine does not understand "make it look nicer"; it understands instructions like: "add a column Total = Price \* Qty"/,
    );
  });
});

describe('sheets: A1 ranges', () => {
  it('when ranges are parsed, then cells, boxes, whole columns, whole rows and open ends are understood; the rest is null', () => {
    expect(parseRange('A1')).to.deep.include({ c1: 0, c2: 0, r1: 1, r2: 1 });
    expect(parseRange('b2:c10')).to.deep.include({ c1: 1, c2: 2, r1: 2, r2: 10, text: 'B2:C10' });
    expect(parseRange('$A$1:$B$2')).to.deep.include({ c1: 0, c2: 1, r1: 1, r2: 2 });
    expect(parseRange('B:B')).to.deep.include({ c1: 1, c2: 1, r1: 1, r2: null });
    expect(parseRange('2:5')).to.deep.include({ c1: 0, c2: null, r1: 2, r2: 5 });
    expect(parseRange('B2:D')).to.deep.include({ c1: 1, c2: 3, r1: 2, r2: null });
    expect(parseRange('AA10')).to.deep.include({ c1: 26, r1: 10 });
    for (const bad of ['', 'A0', '1A', 'A1:', ':A1', 'A1:B2:C3', 'A-1', 'ABCD1', 'A1234567', 'Sheet1!A1'])
      expect(parseRange(bad), bad).to.equal(null);
  });
});

describe('sheets: grid blocks and ops engine', () => {
  /** An in-memory block store. */
  const store = () => {
    const blocks = new Map<string, string>();
    return {
      blocks,
      load: async (ids: string[]) => new Map(ids.map((id) => [id, blocks.get(id)!])),
      async commit(grid: WorkingGrid) {
        const { tree, newBlocks } = await grid.finalize();
        for (const b of newBlocks) blocks.set(b.id, b.data);
        return { tree, written: newBlocks.length };
      },
    };
  };
  const build = async (n: number) => {
    const st = store();
    const g = new WorkingGrid(
      emptyTree([
        { name: 'k', type: 'number' },
        { name: 's', type: 'string' },
      ]),
      st.load,
    );
    await g.insertAt(
      0,
      Array.from({ length: n }, (_, i) => ({ id: g.nextRowId++, v: [i, `r${i}`] })),
    );
    const { tree } = await st.commit(g);
    return { st, tree };
  };
  const rows = async (st: ReturnType<typeof store>, tree: Tree) => {
    const g = new WorkingGrid(tree, st.load);
    await g.ensureAll();
    return g.all().map((r) => r.v);
  };
  const run = async (st: ReturnType<typeof store>, tree: Tree, ops: unknown[]) => {
    const g = new WorkingGrid(tree, st.load);
    const applied = await applyOps(g, SheetOps.parse(ops) as SheetOp[]);
    return { ...applied, ...(await st.commit(g)) };
  };

  it('when rows are written, then blocks hold at most 256 rows; appending to a full last block starts a new one without rewriting it', async () => {
    const { st, tree } = await build(BLOCK_ROWS * 2);
    expect(tree.blocks.map((b) => b.rows)).to.deep.equal([256, 256]);
    const r = await run(st, tree, [{ op: 'appendRows', rows: [[1, 'x']] }]);
    expect(r.written).to.equal(1);
    expect(r.tree.blocks.slice(0, 2)).to.deep.equal(tree.blocks);
    expect(r.tree.blocks[2]!.rows).to.equal(1);
  });

  it('when many scattered rows are deleted, then a fragmented grid is re-cut into full blocks', async () => {
    const { st, tree } = await build(2_000);
    let t = tree;
    for (let i = 0; i < 6; i++) t = (await run(st, t, [{ op: 'deleteRows', rows: [1 + i * 250] }])).tree;
    expect(t.rowCount).to.equal(1_994);
    expect(t.blocks.length).to.be.at.most(Math.ceil(1_994 / BLOCK_ROWS) + 6);
    const all = await rows(st, t);
    expect(all).to.have.length(1_994);
    expect(all[0]).to.deep.equal([1, 'r1']);
  });

  it('when a proposal is re-applied onto a grid where rows moved, then it follows its rows by id; a touched set decides conflicts', async () => {
    const { st, tree } = await build(10);
    const proposal = await run(st, tree, [
      { op: 'set', cell: 'B3', value: 'mine' },
      { op: 'appendRows', rows: [[99, 'new']] },
    ]);
    const later = await run(st, tree, [
      { op: 'insertRows', at: 1, rows: [[-1, 'first']] },
      { op: 'sort', column: 'k', direction: 'desc' },
    ]);
    expect(conflictOf(proposal.touched, [{ id: 'c', touched: later.touched }])).to.equal(null);
    const g = new WorkingGrid(later.tree, st.load);
    const re = await reapplyOps(g, proposal.resolved);
    const { tree: merged } = await st.commit(g);
    const all = await rows(st, merged);
    expect(all.find((r) => r[0] === 2)).to.deep.equal([2, 'mine']);
    expect(all.at(-1)).to.deep.equal([99, 'new']);
    expect(re.diff.cells).to.have.length(1);
    const clash: Touched = {
      cells: proposal.touched.cells,
      rows: [],
      cols: [],
      order: false,
      colOrder: false,
      all: false,
    };
    expect(conflictOf(proposal.touched, [{ id: 'cmt_x', touched: clash }])).to.equal(
      'commit cmt_x changed a cell this proposal changes',
    );
  });
});
