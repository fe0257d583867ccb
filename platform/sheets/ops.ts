import {
  columnLetter,
  columnIndexOf,
  SHEET_LIMITS,
  type Cell,
  type ColumnType,
  type SheetOp,
  type SheetWhere,
} from '../../contracts/sheets';
import { a1, CellError, checkCell, convertCell, findColumn, showCell } from './cells';
import type { ColumnMeta, GridRow, WorkingGrid } from './grid';

/**
 * The sheet-edit engine: user ops (A1 addresses, column names, conditions) are first resolved
 * against the grid into id-based ops (rows and columns by their stable ids, conditions turned
 * into the rows they matched), then applied. The resolved ops are kept with the commit, so a
 * proposal can be re-applied later onto a grid that moved on (rebase), and the touched set
 * (cells, rows, columns, row order) decides whether later commits conflict with it.
 */

/** An error in op `field` (relative to the op, e.g. `column`, `rows.3.1`); the service prefixes `ops.<i>.`. */
export class OpError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

type Expr =
  | { k: 'num'; v: number }
  | { k: 'col'; c: number }
  | { k: 'neg'; a: Expr }
  | { k: 'bin'; op: '+' | '-' | '*' | '/'; a: Expr; b: Expr };

/** Id-based ops, as stored with a commit. WARNING: persisted (commits). */
export type ROp =
  | { k: 'set'; cells: [rowId: number, colId: number, value: Cell, hint: number][] }
  | { k: 'ins'; at: number; rows: { id?: number; v: [colId: number, value: Cell][] }[] }
  | { k: 'app'; rows: { id?: number; v: [colId: number, value: Cell][] }[] }
  | { k: 'del'; ids: [rowId: number, hint: number][] }
  | { k: 'icol'; at: number; col: { id?: number; name: string; type: ColumnType }; fill: Cell; expr?: Expr }
  | { k: 'dcol'; c: number }
  | { k: 'ren'; c: number; name: string }
  | { k: 'typ'; c: number; type: ColumnType }
  | { k: 'sort'; c: number; dir: 'asc' | 'desc' };

/** What a commit touched, for conflict checks. WARNING: persisted (commits). */
export interface Touched {
  /** `rowId:colId` of changed cells. */
  cells: string[];
  /** Deleted rows. */
  rows: number[];
  /** Columns deleted or retyped (or whose many cells changed). */
  cols: number[];
  /** Columns renamed (conflicts only with another change of the column itself, not its cells). */
  names?: number[];
  /**
   * Columns whose values the ops read to decide what to write: the column of a `where`, the
   * inputs of an `expression` (proposals only; absent on older commits). A later commit that
   * wrote one of them makes the proposal's computed values or matched rows stale.
   */
  reads?: number[];
  /** Row order changed (rows inserted or deleted in the middle, sort). */
  order: boolean;
  /** Column order changed (columns inserted or deleted). */
  colOrder: boolean;
  /** Everything (creation, rollback). */
  all: boolean;
}

export interface CellChangeView {
  cell: string;
  row: number;
  column: string;
  before: Cell;
  after: Cell;
}
export interface StructuralView {
  op: string;
  description: string;
  rows?: { row: number; values: Cell[] }[];
}
export interface DiffView {
  cells: CellChangeView[];
  changedCells: number;
  truncated: boolean;
  structure: StructuralView[];
}

/** More changed cells than this are recorded per column in `touched` (coarser, never looser). */
const TOUCHED_CELLS_MAX = 5_000;

class Recorder {
  private cells = new Map<string, CellChangeView & { r: number; c: number }>();
  readonly structure: StructuralView[] = [];
  private tRows = new Set<number>();
  private tCols = new Set<number>();
  private tNames = new Set<number>();
  order = false;
  colOrder = false;
  all = false;
  private goneRows = new Set<number>();
  private goneCols = new Set<number>();

  cell(index: number, colIdx: number, row: GridRow, col: ColumnMeta, before: Cell, after: Cell) {
    const key = `${row.id}:${col.id}`;
    const seen = this.cells.get(key);
    if (seen) {
      seen.after = after;
      return;
    }
    this.cells.set(key, {
      cell: a1(colIdx, index + 1),
      row: index + 1,
      column: col.name,
      before,
      after,
      r: row.id,
      c: col.id,
    });
  }

  rowsGone(ids: number[]) {
    for (const id of ids) {
      this.goneRows.add(id);
      this.tRows.add(id);
    }
  }
  colGone(id: number) {
    this.goneCols.add(id);
    this.tCols.add(id);
  }
  colTouched(id: number) {
    this.tCols.add(id);
  }
  colRenamed(id: number) {
    this.tNames.add(id);
  }

  result(): { diff: DiffView; touched: Touched } {
    const changed = [...this.cells.values()].filter(
      (c) => c.before !== c.after && !this.goneRows.has(c.r) && !this.goneCols.has(c.c),
    );
    let cellKeys = changed.map((c) => `${c.r}:${c.c}`);
    const cols = new Set(this.tCols);
    if (cellKeys.length > TOUCHED_CELLS_MAX) {
      for (const c of changed) cols.add(c.c);
      cellKeys = [];
    }
    return {
      diff: {
        cells: changed
          .slice(0, SHEET_LIMITS.diffCells)
          .map(({ cell, row, column, before, after }) => ({ cell, row, column, before, after })),
        changedCells: changed.length,
        truncated: changed.length > SHEET_LIMITS.diffCells,
        structure: this.structure,
      },
      touched: {
        cells: cellKeys,
        rows: [...this.tRows],
        cols: [...cols],
        names: [...this.tNames],
        order: this.order,
        colOrder: this.colOrder,
        all: this.all,
      },
    };
  }
}

/** How the op list is being applied: fresh from a request, or re-applied onto a newer grid (rebase). */
interface Ctx {
  grid: WorkingGrid;
  rec: Recorder;
  /** Old id → id on this grid, for rows and columns the ops created (rebase). */
  rowIds: Map<number, number>;
  colIds: Map<number, number>;
}

const rowsView = (rows: GridRow[], firstRow: (i: number) => number) =>
  rows.slice(0, SHEET_LIMITS.diffRows).map((r, i) => ({ row: firstRow(i), values: [...r.v] }));
const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

function colIndexById(grid: WorkingGrid, id: number): number {
  return grid.columns.findIndex((c) => c.id === id);
}

function requireColumn(grid: WorkingGrid, ref: string, field: string): number {
  const i = findColumn(grid.columns, ref);
  if (i < 0) {
    const letters =
      columnIndexOf(ref.trim()) >= 0 ? ` (the last column is ${columnLetter(grid.columns.length - 1)})` : '';
    throw new OpError(field, `names no column "${ref.length > 40 ? `${ref.slice(0, 40)}…` : ref}"${letters}`);
  }
  return i;
}

function requireFreshName(grid: WorkingGrid, name: string, field: string, except?: number) {
  const lower = name.toLowerCase();
  if (grid.columns.some((c) => c.id !== except && c.name.toLowerCase() === lower))
    throw new OpError(field, `a column named "${name}" exists already`);
}

function checkIn(value: unknown, col: ColumnMeta, field: string): Cell {
  try {
    return checkCell(value, col);
  } catch (err) {
    if (err instanceof CellError) throw new OpError(field, err.message);
    throw err;
  }
}

// ---- Expressions -------------------------------------------------------------------------

/** Parse "Price * Qty", "[Unit price] * 1.2", "(A + B) / 2" against the grid's number columns. */
export function parseExpression(src: string, grid: WorkingGrid, field: string): Expr {
  const tokens: string[] = [];
  const re = /\s*(\d+(?:\.\d+)?|\[[^\]]*\]|[A-Za-z_][A-Za-z0-9_]*|[-+*/()])/y;
  let pos = 0;
  while (pos < src.length) {
    if (/^\s*$/.test(src.slice(pos))) break;
    re.lastIndex = pos;
    const m = re.exec(src);
    if (!m)
      throw new OpError(
        field,
        `cannot read "${src.slice(pos, pos + 20)}": use column names, numbers, + - * / and parentheses`,
      );
    tokens.push(m[1]!);
    pos = re.lastIndex;
  }
  let i = 0;
  const peek = () => tokens[i];
  const primary = (): Expr => {
    const t = tokens[i++];
    if (t === undefined) throw new OpError(field, 'ends too early');
    if (t === '(') {
      const e = sum();
      if (tokens[i++] !== ')') throw new OpError(field, 'a parenthesis is not closed');
      return e;
    }
    if (t === '-') return { k: 'neg', a: primary() };
    if (/^\d/.test(t)) return { k: 'num', v: Number(t) };
    if (/^[A-Za-z_[]/.test(t)) {
      const name = t.startsWith('[') ? t.slice(1, -1) : t;
      const ci = requireColumn(grid, name, field);
      const col = grid.columns[ci]!;
      if (col.type !== 'number')
        throw new OpError(field, `column "${col.name}" is ${col.type}; expressions use number columns`);
      return { k: 'col', c: col.id };
    }
    throw new OpError(field, `unexpected "${t}"`);
  };
  const product = (): Expr => {
    let e = primary();
    while (peek() === '*' || peek() === '/') {
      const op = tokens[i++] as '*' | '/';
      e = { k: 'bin', op, a: e, b: primary() };
    }
    return e;
  };
  const sum = (): Expr => {
    let e = product();
    while (peek() === '+' || peek() === '-') {
      const op = tokens[i++] as '+' | '-';
      e = { k: 'bin', op, a: e, b: product() };
    }
    return e;
  };
  if (!tokens.length) throw new OpError(field, 'must not be empty');
  const e = sum();
  if (i < tokens.length) throw new OpError(field, `unexpected "${tokens[i]}"`);
  return e;
}

function evalExpr(e: Expr, row: GridRow, colPos: Map<number, number>): number | null {
  switch (e.k) {
    case 'num':
      return e.v;
    case 'col': {
      const v = row.v[colPos.get(e.c) ?? -1];
      return typeof v === 'number' ? v : null;
    }
    case 'neg': {
      const a = evalExpr(e.a, row, colPos);
      return a === null ? null : -a;
    }
    case 'bin': {
      const a = evalExpr(e.a, row, colPos);
      const b = evalExpr(e.b, row, colPos);
      if (a === null || b === null) return null;
      const r = e.op === '+' ? a + b : e.op === '-' ? a - b : e.op === '*' ? a * b : b === 0 ? null : a / b;
      // 1.1 * 3 is 3.3, not 3.3000000000000003.
      return r === null || !Number.isFinite(r) ? null : Number.parseFloat(r.toPrecision(15));
    }
  }
}

const exprColumns = (e: Expr, out: number[] = []): number[] => {
  if (e.k === 'col') out.push(e.c);
  else if (e.k === 'neg') exprColumns(e.a, out);
  else if (e.k === 'bin') {
    exprColumns(e.a, out);
    exprColumns(e.b, out);
  }
  return out;
};
const remapExpr = (e: Expr, ids: Map<number, number>): Expr =>
  e.k === 'col'
    ? { k: 'col', c: ids.get(e.c) ?? e.c }
    : e.k === 'neg'
      ? { k: 'neg', a: remapExpr(e.a, ids) }
      : e.k === 'bin'
        ? { ...e, a: remapExpr(e.a, ids), b: remapExpr(e.b, ids) }
        : e;

const colPositions = (grid: WorkingGrid) => new Map(grid.columns.map((c, i) => [c.id, i]));

// ---- Comparisons -------------------------------------------------------------------------

const isEmpty = (v: Cell) => v === null || v === '';

function compareCells(a: Cell, b: Cell): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  const x = String(a).toLowerCase();
  const y = String(b).toLowerCase();
  return x < y ? -1 : x > y ? 1 : 0;
}

interface ResolvedWhere {
  ci: number;
  cmp: SheetWhere['cmp'];
  value: Cell;
}

function resolveWhere(grid: WorkingGrid, w: SheetWhere, field: string): ResolvedWhere {
  const ci = requireColumn(grid, w.column, `${field}.column`);
  const col = grid.columns[ci]!;
  const needsValue = w.cmp !== 'empty' && w.cmp !== 'notEmpty';
  if (needsValue && w.value === undefined) throw new OpError(`${field}.value`, `is required for ${w.cmp}`);
  let value: Cell = w.value ?? null;
  if (w.cmp === 'contains') {
    if (value === null || typeof value === 'boolean')
      throw new OpError(`${field}.value`, 'must be text or a number for contains');
  } else if (needsValue) {
    if (value === null && w.cmp !== 'eq' && w.cmp !== 'ne')
      throw new OpError(`${field}.value`, `must not be null for ${w.cmp}`);
    value = checkIn(value, col, `${field}.value`);
    if (typeof value === 'boolean' && !['eq', 'ne'].includes(w.cmp))
      throw new OpError(`${field}.cmp`, `must be eq or ne for a boolean column`);
  }
  return { ci, cmp: w.cmp, value };
}

function matches(row: GridRow, w: ResolvedWhere): boolean {
  const v = row.v[w.ci] ?? null;
  switch (w.cmp) {
    case 'empty':
      return isEmpty(v);
    case 'notEmpty':
      return !isEmpty(v);
    case 'contains':
      return v !== null && String(v).toLowerCase().includes(String(w.value).toLowerCase());
    case 'eq':
      return w.value === null ? isEmpty(v) : v !== null && compareCells(v, w.value) === 0;
    case 'ne':
      return w.value === null ? !isEmpty(v) : v === null || compareCells(v, w.value) !== 0;
    default: {
      if (isEmpty(v)) return false;
      const c = compareCells(v, w.value);
      return w.cmp === 'lt' ? c < 0 : w.cmp === 'lte' ? c <= 0 : w.cmp === 'gt' ? c > 0 : c >= 0;
    }
  }
}

// ---- Applying id-based ops ---------------------------------------------------------------

function checkRowLimit(grid: WorkingGrid, adding: number, field: string) {
  const rows = grid.rowCount + adding;
  if (rows > SHEET_LIMITS.rows)
    throw new OpError(field, `the sheet would have ${rows} rows; at most ${SHEET_LIMITS.rows}`);
  if (rows * grid.columns.length > SHEET_LIMITS.cells)
    throw new OpError(
      field,
      `the sheet would have ${rows * grid.columns.length} cells; at most ${SHEET_LIMITS.cells} (rows × columns)`,
    );
}

function buildRows(ctx: Ctx, rows: { id?: number; v: [number, Cell][] }[], field: string): GridRow[] {
  const { grid } = ctx;
  const pos = colPositions(grid);
  return rows.map((r, ri) => {
    const v: Cell[] = grid.columns.map(() => null);
    for (const [cid, value] of r.v) {
      const ci = pos.get(ctx.colIds.get(cid) ?? cid);
      if (ci === undefined) {
        if (value === null) continue;
        throw new OpError(`${field}.${ri}`, 'writes a column that no longer exists');
      }
      v[ci] = checkIn(value, grid.columns[ci]!, `${field}.${ri}.${ci}`);
    }
    const id = grid.nextRowId++;
    if (r.id !== undefined && r.id !== id) ctx.rowIds.set(r.id, id);
    r.id ??= id;
    return { id, v };
  });
}

/** Apply one id-based op. In a rebase, OpError means the op no longer applies. */
// Length: one switch over the 9 op kinds sharing the op context (grid, id maps, record); each case is
// self-contained, the longest (icol) 39 lines.
async function applyR(ctx: Ctx, op: ROp): Promise<void> {
  const { grid, rec } = ctx;
  switch (op.k) {
    case 'set': {
      for (const cell of op.cells) {
        const [rid, cid, value, hint] = cell;
        const idx = await grid.indexOfRow(ctx.rowIds.get(rid) ?? rid, hint);
        if (idx < 0) throw new OpError('row', 'writes a row that no longer exists');
        const ci = colIndexById(grid, ctx.colIds.get(cid) ?? cid);
        if (ci < 0) throw new OpError('column', 'writes a column that no longer exists');
        const col = grid.columns[ci]!;
        const row = grid.row(idx);
        const v = checkIn(value, col, 'value');
        const before = row.v[ci] ?? null;
        row.v[ci] = v;
        grid.touch(idx);
        rec.cell(idx, ci, row, col, before, v);
        cell[3] = idx;
      }
      return;
    }
    case 'ins':
    case 'app': {
      checkRowLimit(grid, op.rows.length, 'rows');
      const at = op.k === 'app' ? grid.rowCount : op.at;
      if (at > grid.rowCount) throw new OpError('at', `must be at most ${grid.rowCount + 1} (rowCount + 1)`);
      const rows = buildRows(ctx, op.rows, 'rows');
      await grid.insertAt(at, rows);
      if (op.k === 'ins' && at < grid.rowCount - rows.length) rec.order = true;
      rec.structure.push({
        op: op.k === 'app' ? 'appendRows' : 'insertRows',
        description:
          op.k === 'app'
            ? `appended ${plural(rows.length, 'row')} (rows ${at + 1} to ${at + rows.length})`
            : `inserted ${plural(rows.length, 'row')} at row ${at + 1}`,
        rows: rowsView(rows, (i) => at + i + 1),
      });
      return;
    }
    case 'del': {
      const found: number[] = [];
      for (const [rid, hint] of op.ids) {
        const idx = await grid.indexOfRow(ctx.rowIds.get(rid) ?? rid, hint);
        if (idx < 0) throw new OpError('rows', 'deletes a row that no longer exists');
        found.push(idx);
      }
      const order = [...found].sort((a, b) => a - b);
      const views = order.slice(0, SHEET_LIMITS.diffRows).map((i) => ({ row: i + 1, values: [...grid.row(i).v] }));
      const removed = grid.deleteAt(found);
      rec.rowsGone(removed.map((r) => r.id));
      if (removed.length) rec.order = true;
      const shown = order
        .slice(0, 10)
        .map((i) => i + 1)
        .join(', ');
      rec.structure.push({
        op: 'deleteRows',
        description: removed.length
          ? `deleted ${plural(removed.length, 'row')} (${shown}${order.length > 10 ? ', …' : ''})`
          : 'deleted no row (none matched)',
        rows: views,
      });
      return;
    }
    case 'icol': {
      if (grid.columns.length + 1 > SHEET_LIMITS.columns)
        throw new OpError(
          'name',
          `the sheet would have ${grid.columns.length + 1} columns; at most ${SHEET_LIMITS.columns}`,
        );
      if (grid.rowCount * (grid.columns.length + 1) > SHEET_LIMITS.cells)
        throw new OpError(
          'name',
          `the sheet would have ${grid.rowCount * (grid.columns.length + 1)} cells; at most ${SHEET_LIMITS.cells} (rows × columns)`,
        );
      requireFreshName(grid, op.col.name, 'name');
      const at = Math.min(op.at, grid.columns.length);
      const expr = op.expr && remapExpr(op.expr, ctx.colIds);
      if (expr)
        for (const c of exprColumns(expr))
          if (colIndexById(grid, c) < 0) throw new OpError('expression', 'uses a column that no longer exists');
      const id = grid.nextColId++;
      if (op.col.id !== undefined && op.col.id !== id) ctx.colIds.set(op.col.id, id);
      op.col.id ??= id;
      const col: ColumnMeta = { id, name: op.col.name, type: op.col.type };
      const fill = checkIn(op.fill, col, 'value');
      await grid.ensureAll();
      const pos = colPositions(grid);
      const rows = grid.all();
      const values = rows.map((r) => (expr ? evalExpr(expr, r, pos) : fill));
      grid.columns.splice(at, 0, col);
      rows.forEach((r, i) => {
        r.v.splice(at, 0, values[i]!);
        if (values[i] !== null) rec.cell(i, at, r, col, null, values[i]!);
      });
      grid.touchAll();
      if (at < grid.columns.length - 1) rec.colOrder = true;
      rec.structure.push({
        op: 'insertColumn',
        description: `inserted column ${columnLetter(at)} "${col.name}" (${col.type})${expr ? ' with computed values' : ''}`,
      });
      return;
    }
    case 'dcol': {
      const ci = colIndexById(grid, ctx.colIds.get(op.c) ?? op.c);
      if (ci < 0) throw new OpError('column', 'names a column that no longer exists');
      if (grid.columns.length === 1) throw new OpError('column', 'a sheet keeps at least one column');
      const col = grid.columns[ci]!;
      await grid.ensureAll();
      for (const r of grid.all()) r.v.splice(ci, 1);
      grid.columns.splice(ci, 1);
      grid.touchAll();
      rec.colGone(col.id);
      if (ci < grid.columns.length) rec.colOrder = true;
      rec.structure.push({ op: 'deleteColumn', description: `deleted column ${columnLetter(ci)} "${col.name}"` });
      return;
    }
    case 'ren': {
      const ci = colIndexById(grid, ctx.colIds.get(op.c) ?? op.c);
      if (ci < 0) throw new OpError('column', 'names a column that no longer exists');
      const col = grid.columns[ci]!;
      requireFreshName(grid, op.name, 'name', col.id);
      const old = col.name;
      col.name = op.name;
      rec.colRenamed(col.id);
      rec.structure.push({
        op: 'renameColumn',
        description: `renamed column ${columnLetter(ci)} "${old}" to "${op.name}"`,
      });
      return;
    }
    case 'typ': {
      const ci = colIndexById(grid, ctx.colIds.get(op.c) ?? op.c);
      if (ci < 0) throw new OpError('column', 'names a column that no longer exists');
      const col = grid.columns[ci]!;
      const from = col.type;
      await grid.ensureAll();
      const rows = grid.all();
      const next = rows.map((r, i) => {
        const v = convertCell(r.v[ci] ?? null, op.type);
        if (v === undefined)
          throw new OpError(
            'type',
            `cell ${a1(ci, i + 1)} (${showCell(r.v[ci] ?? null)}) does not convert to ${op.type}`,
          );
        return v;
      });
      col.type = op.type;
      rows.forEach((r, i) => {
        const before = r.v[ci] ?? null;
        if (before !== next[i]) {
          r.v[ci] = next[i]!;
          rec.cell(i, ci, r, col, before, next[i]!);
        }
      });
      grid.touchAll();
      rec.colTouched(col.id);
      rec.structure.push({
        op: 'retypeColumn',
        description: `changed column ${columnLetter(ci)} "${col.name}" from ${from} to ${op.type}`,
      });
      return;
    }
    case 'sort': {
      const ci = colIndexById(grid, ctx.colIds.get(op.c) ?? op.c);
      if (ci < 0) throw new OpError('column', 'names a column that no longer exists');
      await grid.ensureAll();
      const rows = grid.all();
      const sign = op.dir === 'desc' ? -1 : 1;
      const sorted = rows
        .map((r, i) => ({ r, i }))
        .sort((x, y) => {
          const a = x.r.v[ci] ?? null;
          const b = y.r.v[ci] ?? null;
          const ea = isEmpty(a);
          const eb = isEmpty(b);
          if (ea || eb) return ea && eb ? x.i - y.i : ea ? 1 : -1;
          return sign * compareCells(a, b) || x.i - y.i;
        })
        .map((x) => x.r);
      const moved = sorted.some((r, i) => r !== rows[i]);
      if (moved) {
        grid.replaceAll(sorted);
        rec.order = true;
      }
      rec.structure.push({
        op: 'sort',
        description: `sorted ${plural(rows.length, 'row')} by ${columnLetter(ci)} "${grid.columns[ci]!.name}" ${op.dir === 'desc' ? 'descending' : 'ascending'}${moved ? '' : ' (already in order)'}`,
      });
      return;
    }
  }
}

// ---- Resolving user ops ------------------------------------------------------------------

function rowValues(grid: WorkingGrid, rows: Cell[][], field: string): { v: [number, Cell][] }[] {
  return rows.map((values, ri) => {
    if (values.length > grid.columns.length)
      throw new OpError(`${field}.${ri}`, `has ${values.length} values; the sheet has ${grid.columns.length} columns`);
    const v: [number, Cell][] = [];
    values.forEach((value, ci) => {
      const cell = checkIn(value, grid.columns[ci]!, `${field}.${ri}.${ci}`);
      if (cell !== null) v.push([grid.columns[ci]!.id, cell]);
    });
    return { v };
  });
}

function rowIndex(grid: WorkingGrid, n: number, field: string): number {
  if (n > grid.rowCount)
    throw new OpError(
      field,
      grid.rowCount === 0 ? `row ${n}: the sheet has no rows` : `row ${n} is beyond the last row (${grid.rowCount})`,
    );
  return n - 1;
}

/** Resolve one request op against the grid; the columns it reads to decide its writes go into `reads`. */
async function resolve(grid: WorkingGrid, op: SheetOp, reads: Set<number>): Promise<ROp> {
  const read = (ids: number[]) => {
    for (const id of ids) reads.add(id);
  };
  switch (op.op) {
    case 'set': {
      let ci: number;
      let ri: number;
      if (op.cell !== undefined) {
        if (op.row !== undefined || op.column !== undefined)
          throw new OpError('cell', 'give either cell, or row and column, not both');
        const m = /^([A-Za-z]{1,3})(\d+)$/.exec(op.cell)!;
        ci = columnIndexOf(m[1]!);
        if (ci >= grid.columns.length)
          throw new OpError(
            'cell',
            `column ${m[1]!.toUpperCase()} is beyond the last column (${columnLetter(grid.columns.length - 1)})`,
          );
        ri = rowIndex(grid, Number(m[2]), 'cell');
      } else {
        if (op.row === undefined || op.column === undefined)
          throw new OpError(op.row === undefined ? 'row' : 'column', 'is required (or give cell, e.g. B3)');
        ci = requireColumn(grid, op.column, 'column');
        ri = rowIndex(grid, op.row, 'row');
      }
      const value = checkIn(op.value, grid.columns[ci]!, 'value');
      await grid.ensure(ri, ri + 1);
      return { k: 'set', cells: [[grid.row(ri).id, grid.columns[ci]!.id, value, ri]] };
    }
    case 'update': {
      const where = op.where && resolveWhere(grid, op.where, 'where');
      const sets = op.set.map((s, j) => {
        const ci = requireColumn(grid, s.column, `set.${j}.column`);
        const col = grid.columns[ci]!;
        if ((s.value === undefined) === (s.expression === undefined))
          throw new OpError(`set.${j}`, 'give value or expression (one of them)');
        if (s.expression !== undefined) {
          if (col.type !== 'number')
            throw new OpError(`set.${j}.expression`, `column "${col.name}" is ${col.type}; expressions give numbers`);
          return { ci, col, expr: parseExpression(s.expression, grid, `set.${j}.expression`) };
        }
        return { ci, col, value: checkIn(s.value, col, `set.${j}.value`) };
      });
      if (where) read([grid.columns[where.ci]!.id]);
      for (const s of sets) if (s.expr) read(exprColumns(s.expr));
      await grid.ensureAll();
      const pos = colPositions(grid);
      const cells: [number, number, Cell, number][] = [];
      grid.all().forEach((r, i) => {
        if (where && !matches(r, where)) return;
        for (const s of sets) cells.push([r.id, s.col.id, s.expr ? evalExpr(s.expr, r, pos) : s.value!, i]);
      });
      return { k: 'set', cells };
    }
    case 'insertRows': {
      if ((op.rows === undefined) === (op.count === undefined))
        throw new OpError('rows', 'give rows or count (one of them)');
      if (op.at > grid.rowCount + 1) throw new OpError('at', `must be at most ${grid.rowCount + 1} (rowCount + 1)`);
      const rows = op.rows
        ? rowValues(grid, op.rows, 'rows')
        : Array.from({ length: op.count! }, () => ({ v: [] as [number, Cell][] }));
      checkRowLimit(grid, rows.length, op.rows ? 'rows' : 'count');
      return { k: 'ins', at: op.at - 1, rows };
    }
    case 'appendRows': {
      const rows = rowValues(grid, op.rows, 'rows');
      checkRowLimit(grid, rows.length, 'rows');
      return { k: 'app', rows };
    }
    case 'deleteRows': {
      if ((op.rows === undefined) === (op.where === undefined))
        throw new OpError('rows', 'give rows or where (one of them)');
      if (op.rows) {
        const idx = [...new Set(op.rows.map((n, j) => rowIndex(grid, n, `rows.${j}`)))];
        for (const i of idx) await grid.ensure(i, i + 1);
        return { k: 'del', ids: idx.map((i) => [grid.row(i).id, i]) };
      }
      const where = resolveWhere(grid, op.where!, 'where');
      read([grid.columns[where.ci]!.id]);
      await grid.ensureAll();
      const ids: [number, number][] = [];
      grid.all().forEach((r, i) => {
        if (matches(r, where)) ids.push([r.id, i]);
      });
      return { k: 'del', ids };
    }
    case 'insertColumn': {
      requireFreshName(grid, op.name, 'name');
      const at = op.before === undefined ? grid.columns.length : requireColumn(grid, op.before, 'before');
      if (op.expression !== undefined && op.value !== undefined)
        throw new OpError('expression', 'give value or expression, not both');
      let expr: Expr | undefined;
      if (op.expression !== undefined) {
        if (op.type !== 'number') throw new OpError('type', 'must be number when an expression computes the values');
        expr = parseExpression(op.expression, grid, 'expression');
        read(exprColumns(expr));
      }
      const fill = checkIn(op.value ?? null, { id: 0, name: op.name, type: op.type }, 'value');
      return { k: 'icol', at, col: { name: op.name, type: op.type }, fill, ...(expr ? { expr } : {}) };
    }
    case 'deleteColumn':
      return { k: 'dcol', c: grid.columns[requireColumn(grid, op.column, 'column')]!.id };
    case 'renameColumn': {
      const col = grid.columns[requireColumn(grid, op.column, 'column')]!;
      requireFreshName(grid, op.name, 'name', col.id);
      return { k: 'ren', c: col.id, name: op.name };
    }
    case 'retypeColumn':
      return { k: 'typ', c: grid.columns[requireColumn(grid, op.column, 'column')]!.id, type: op.type };
    case 'sort':
      return { k: 'sort', c: grid.columns[requireColumn(grid, op.column, 'column')]!.id, dir: op.direction };
  }
}

export interface Applied {
  resolved: ROp[];
  diff: DiffView;
  touched: Touched;
}

/**
 * Apply request ops in order onto `grid` (all or nothing: the caller writes nothing on error).
 * Throws OpErrorAt naming `ops.<i>.<field>`.
 */
export async function applyOps(grid: WorkingGrid, ops: SheetOp[]): Promise<Applied> {
  const ctx: Ctx = { grid, rec: new Recorder(), rowIds: new Map(), colIds: new Map() };
  const resolved: ROp[] = [];
  const reads = new Set<number>();
  for (const [i, op] of ops.entries()) {
    try {
      const r = await resolve(grid, op, reads);
      await applyR(ctx, r);
      resolved.push(r);
    } catch (err) {
      if (err instanceof OpError) throw new OpErrorAt(i, err.field, err.message);
      throw err;
    }
  }
  const { diff, touched } = ctx.rec.result();
  return { resolved, diff, touched: reads.size ? { ...touched, reads: [...reads] } : touched };
}

/** Re-apply a proposal's resolved ops onto a newer grid. Throws OpErrorAt when one no longer applies. */
export async function reapplyOps(grid: WorkingGrid, resolved: ROp[]): Promise<Applied> {
  const ctx: Ctx = { grid, rec: new Recorder(), rowIds: new Map(), colIds: new Map() };
  const copy = JSON.parse(JSON.stringify(resolved)) as ROp[];
  for (const [i, op] of copy.entries()) {
    try {
      await applyR(ctx, op);
    } catch (err) {
      if (err instanceof OpError) throw new OpErrorAt(i, err.field, err.message);
      throw err;
    }
  }
  // Store the ids as they are on this grid.
  const rows = ctx.rowIds;
  const cols = ctx.colIds;
  for (const op of copy) {
    if (op.k === 'set') {
      for (const c of op.cells) {
        c[0] = rows.get(c[0]) ?? c[0];
        c[1] = cols.get(c[1]) ?? c[1];
      }
    }
    if (op.k === 'ins' || op.k === 'app') {
      for (const r of op.rows) {
        r.id = r.id === undefined ? r.id : (rows.get(r.id) ?? r.id);
        for (const p of r.v) p[0] = cols.get(p[0]) ?? p[0];
      }
    }
    if (op.k === 'del') for (const d of op.ids) d[0] = rows.get(d[0]) ?? d[0];
    if (op.k === 'icol') {
      if (op.col.id !== undefined) op.col.id = cols.get(op.col.id) ?? op.col.id;
      if (op.expr) op.expr = remapExpr(op.expr, cols);
    }
    if (op.k === 'dcol' || op.k === 'ren' || op.k === 'typ' || op.k === 'sort') op.c = cols.get(op.c) ?? op.c;
  }
  return { resolved: copy, ...ctx.rec.result() };
}

export class OpErrorAt extends Error {
  constructor(
    readonly index: number,
    readonly field: string,
    message: string,
  ) {
    super(`ops.${index}${field ? `.${field}` : ''}: ${message}`);
  }
}

/**
 * Whether a proposal's touched set meets what later merged commits touched; the reason when
 * it does (for the 409 stale_commit message), else null.
 */
export function conflictOf(p: Touched, later: { id: string; touched: Touched }[]): string | null {
  const pCells = new Set(p.cells);
  const pRows = new Set(p.rows);
  const pCols = new Set(p.cols);
  const pNames = new Set(p.names ?? []);
  const pCellRows = new Set(p.cells.map((k) => Number(k.split(':')[0])));
  const pCellCols = new Set(p.cells.map((k) => Number(k.split(':')[1])));
  const pReads = new Set(p.reads ?? []);
  const readStale = (id: string) =>
    `commit ${id} changed values this proposal computed from or selected rows by (a column of its expression or where)`;
  for (const l of later) {
    const t = l.touched;
    if (t.all || p.all) return `commit ${l.id} replaced the whole grid`;
    for (const k of t.cells) {
      const [r, c] = k.split(':').map(Number) as [number, number];
      if (pCells.has(k)) return `commit ${l.id} changed a cell this proposal changes`;
      if (pRows.has(r)) return `commit ${l.id} changed a row this proposal deletes`;
      if (pCols.has(c)) return `commit ${l.id} changed a column this proposal changes`;
      if (pReads.has(c)) return readStale(l.id);
    }
    for (const c of t.cols) if (pReads.has(c)) return readStale(l.id);
    for (const r of t.rows)
      if (pCellRows.has(r) || pRows.has(r)) return `commit ${l.id} deleted a row this proposal changes`;
    for (const c of t.cols)
      if (pCellCols.has(c) || pCols.has(c) || pNames.has(c))
        return `commit ${l.id} changed a column this proposal changes`;
    for (const c of t.names ?? [])
      if (pCols.has(c) || pNames.has(c)) return `commit ${l.id} renamed a column this proposal changes`;
    if (t.order && p.order)
      return `commit ${l.id} changed the row order (rows inserted, deleted or sorted) and so does this proposal`;
    if (t.colOrder && p.colOrder) return `commit ${l.id} changed the column order and so does this proposal`;
  }
  return null;
}

/** A short summary of request ops ("set B3; sort by Date desc"), for commits sent without one. */
export function describeOps(ops: SheetOp[]): string {
  const one = (op: SheetOp): string => {
    switch (op.op) {
      case 'set':
        return `set ${op.cell ?? `${op.column} row ${op.row}`}`;
      case 'update':
        return `update ${op.set.map((s) => s.column).join(', ')}${op.where ? ` where ${op.where.column} ${op.where.cmp}` : ''}`;
      case 'insertRows':
        return `insert ${op.rows?.length ?? op.count} row(s) at ${op.at}`;
      case 'appendRows':
        return `append ${op.rows.length} row(s)`;
      case 'deleteRows':
        return op.rows ? `delete ${op.rows.length} row(s)` : `delete rows where ${op.where!.column} ${op.where!.cmp}`;
      case 'insertColumn':
        return `insert column ${op.name}`;
      case 'deleteColumn':
        return `delete column ${op.column}`;
      case 'renameColumn':
        return `rename column ${op.column} to ${op.name}`;
      case 'retypeColumn':
        return `retype column ${op.column} to ${op.type}`;
      case 'sort':
        return `sort by ${op.column} ${op.direction}`;
    }
  };
  const s = ops.slice(0, 5).map(one).join('; ') + (ops.length > 5 ? `; and ${ops.length - 5} more` : '');
  return s.length > SHEET_LIMITS.summary ? `${s.slice(0, SHEET_LIMITS.summary - 1)}…` : s;
}
