import type { Cell, ColumnType } from '../../contracts/sheets';
import { SHEET_LIMITS } from '../../contracts/sheets';
import { newId } from '../infra/ids';

/**
 * A sheet's grid as stored: a small head ("tree") naming its columns and an ordered list of row
 * blocks, each block an immutable document of up to BLOCK_ROWS rows kept as one JSON string.
 *
 * Why blocks, and why strings: FerretDB (over PostgreSQL) decodes and re-encodes every BSON
 * element of a document it reads or updates, so a 10,000-row grid held as one document of nested
 * values costs about 400 ms per read and per write; the same rows as JSON strings in 40 blocks
 * read in about 30 ms, and changing one cell rewrites one block of 256 rows (a few ms).
 * Blocks are never updated in place: a change writes new blocks and a new tree, so every merged
 * commit keeps the tree it produced, and any merged state can be read back (rollback) without
 * replaying anything. Storage: each commit adds the blocks it changed (at most 256 rows each for
 * cell edits; every block for sorts and column changes) plus its tree (about 40 bytes per block).
 */
export const BLOCK_ROWS = 256;
/** A block's JSON is split further beyond this size (wide rows of long text). */
export const BLOCK_MAX_BYTES = 512 * 1024;
/** Largest total of the grid's block JSON (about 8 MiB): the whole grid is read by sorts and filters on the request path. */
export const GRID_MAX_BYTES = 8 * 1024 * 1024;

export interface ColumnMeta {
  /** Stable id: survives renames, moves and retypes (commits refer to columns by it). */
  id: number;
  name: string;
  type: ColumnType;
}

export interface BlockRef {
  id: string;
  rows: number;
  bytes: number;
}

/** The grid as of one merged commit. WARNING: persisted (head and commits). */
export interface Tree {
  columns: ColumnMeta[];
  blocks: BlockRef[];
  rowCount: number;
  /** Next row and column ids: ids are never reused, even after a rollback. */
  nextRowId: number;
  nextColId: number;
}

/** One data row: its stable id and its values in column order. */
export interface GridRow {
  id: number;
  v: Cell[];
}

export interface NewBlock {
  id: string;
  rows: number;
  data: string;
}

export type BlockLoader = (ids: string[]) => Promise<Map<string, string>>;

/** Block JSON: `[[rowId, cell0, cell1, …], …]`. */
export const encodeRows = (rows: GridRow[]): string => JSON.stringify(rows.map((r) => [r.id, ...r.v]));
export const decodeRows = (data: string, width: number): GridRow[] =>
  (JSON.parse(data) as Cell[][]).map((a) => {
    const v = a.slice(1);
    while (v.length < width) v.push(null);
    return { id: a[0] as number, v };
  });

export const emptyTree = (columns: { name: string; type: ColumnType }[]): Tree => ({
  columns: columns.map((c, i) => ({ id: i + 1, name: c.name, type: c.type })),
  blocks: [],
  rowCount: 0,
  nextRowId: 1,
  nextColId: columns.length + 1,
});

export const treeBytes = (t: Tree) => t.blocks.reduce((n, b) => n + b.bytes, 0);
export const sameTree = (a: Tree, b: Tree) =>
  a.blocks.length === b.blocks.length &&
  a.blocks.every((x, i) => x.id === b.blocks[i]!.id) &&
  JSON.stringify(a.columns) === JSON.stringify(b.columns);

interface Seg {
  ref: BlockRef | null;
  rows: GridRow[] | null;
  count: number;
  dirty: boolean;
}

/** Thrown when the grid would outgrow SHEET_LIMITS / GRID_MAX_BYTES. */
export class GridLimitError extends Error {}

/**
 * A grid being changed: blocks are loaded when an op needs them, changed blocks are marked
 * dirty, and `finalize` writes only those (split or merged to BLOCK_ROWS) into a new tree.
 * Length: one grid being edited: 17 methods over the same row blocks, columns and loaded-block cache; the
 * longest, finalize, is 44 lines.
 */
export class WorkingGrid {
  columns: ColumnMeta[];
  nextRowId: number;
  nextColId: number;
  private segs: Seg[];
  private starts: number[] | null = null;
  private total: number;

  constructor(
    tree: Tree,
    private readonly load: BlockLoader,
  ) {
    this.columns = tree.columns.map((c) => ({ ...c }));
    this.nextRowId = tree.nextRowId;
    this.nextColId = tree.nextColId;
    this.segs = tree.blocks.map((b) => ({ ref: b, rows: null, count: b.rows, dirty: false }));
    this.total = tree.rowCount;
  }

  get rowCount(): number {
    return this.total;
  }

  private index(): number[] {
    if (!this.starts) {
      let n = 0;
      this.starts = this.segs.map((s) => {
        const at = n;
        n += s.count;
        return at;
      });
    }
    return this.starts;
  }

  /** The segment holding row `index` (0-based) and the row's offset in it. */
  private locate(index: number): { seg: Seg; si: number; off: number } {
    const starts = this.index();
    let lo = 0;
    let hi = this.segs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= index) lo = mid;
      else hi = mid - 1;
    }
    // Skip empty segments that start at the same index.
    while (lo < this.segs.length - 1 && this.segs[lo]!.count === 0) lo++;
    return { seg: this.segs[lo]!, si: lo, off: index - starts[lo]! };
  }

  private async loadSegs(segs: Seg[]): Promise<void> {
    const todo = segs.filter((s) => !s.rows && s.ref);
    if (!todo.length) return;
    const data = await this.load(todo.map((s) => s.ref!.id));
    const width = this.columns.length;
    for (const s of todo) {
      const raw = data.get(s.ref!.id);
      if (raw === undefined) throw new Error(`sheet block ${s.ref!.id} is missing`);
      s.rows = decodeRows(raw, width);
    }
  }

  /** Load the blocks holding rows [start, end). */
  async ensure(start: number, end: number): Promise<void> {
    if (end <= start || this.total === 0) return;
    const starts = this.index();
    const need = this.segs.filter((s, i) => starts[i]! < end && starts[i]! + s.count > start);
    await this.loadSegs(need);
  }

  async ensureAll(): Promise<void> {
    await this.loadSegs(this.segs);
  }

  /** Row `index` (0-based); its block must be loaded. */
  row(index: number): GridRow {
    const { seg, off } = this.locate(index);
    if (!seg.rows) throw new Error('sheet block not loaded');
    return seg.rows[off]!;
  }

  /** Rows [start, end); their blocks must be loaded. */
  slice(start: number, end: number): GridRow[] {
    const out: GridRow[] = [];
    const starts = this.index();
    for (let i = 0; i < this.segs.length && out.length < end - start; i++) {
      const s = this.segs[i]!;
      const s0 = starts[i]!;
      if (s0 + s.count <= start || s0 >= end) continue;
      if (!s.rows) throw new Error('sheet block not loaded');
      out.push(...s.rows.slice(Math.max(0, start - s0), Math.min(s.count, end - s0)));
    }
    return out;
  }

  /** Every row in order (all blocks must be loaded: ensureAll). */
  all(): GridRow[] {
    return this.slice(0, this.total);
  }

  private ids: Map<number, number> | null = null;

  /**
   * The 0-based index of row `id`, or -1. `hint` is where it was when the op was written: checked
   * first (one block), else every block is read to find it (rebases only).
   */
  async indexOfRow(id: number, hint?: number): Promise<number> {
    if (hint !== undefined && hint >= 0 && hint < this.total) {
      await this.ensure(hint, hint + 1);
      if (this.row(hint).id === id) return hint;
    }
    if (!this.ids) {
      await this.ensureAll();
      this.ids = new Map(this.all().map((r, i) => [r.id, i]));
    }
    return this.ids.get(id) ?? -1;
  }

  /** Mark the block of row `index` changed (after mutating the row in place). */
  touch(index: number): void {
    this.locate(index).seg.dirty = true;
  }

  /** Insert rows before `index` (index = rowCount appends). */
  async insertAt(index: number, rows: GridRow[]): Promise<void> {
    if (!rows.length) return;
    if (this.total === 0 || this.segs.length === 0) {
      this.segs = [{ ref: null, rows: [...rows], count: rows.length, dirty: true }];
    } else if (index >= this.total) {
      const last = this.segs[this.segs.length - 1]!;
      if (last.count >= BLOCK_ROWS) {
        // A full last block stays as it is: the rows start a new one (no read needed).
        this.segs.push({ ref: null, rows: [...rows], count: rows.length, dirty: true });
      } else {
        await this.loadSegs([last]);
        last.rows!.push(...rows);
        last.count += rows.length;
        last.dirty = true;
      }
    } else {
      const { seg, off } = this.locate(index);
      await this.loadSegs([seg]);
      seg.rows!.splice(off, 0, ...rows);
      seg.count += rows.length;
      seg.dirty = true;
    }
    this.total += rows.length;
    this.starts = null;
    this.ids = null;
  }

  /** Delete rows at these 0-based indices (their blocks must be loaded). */
  deleteAt(indices: number[]): GridRow[] {
    const sorted = [...new Set(indices)].sort((a, b) => b - a);
    const removed: GridRow[] = [];
    for (const i of sorted) {
      const { seg, off } = this.locate(i);
      if (!seg.rows) throw new Error('sheet block not loaded');
      removed.push(seg.rows.splice(off, 1)[0]!);
      seg.count--;
      seg.dirty = true;
      this.total--;
      this.starts = null;
      this.ids = null;
    }
    return removed.reverse();
  }

  /** Replace every row (sort, column changes); all blocks are rewritten. */
  replaceAll(rows: GridRow[]): void {
    this.segs = rows.length ? [{ ref: null, rows, count: rows.length, dirty: true }] : [];
    this.total = rows.length;
    this.starts = null;
    this.ids = null;
  }

  /** Mark every block changed (every row was mutated in place). */
  touchAll(): void {
    for (const s of this.segs) s.dirty = true;
  }

  /**
   * The new tree and the blocks to write. Runs of changed blocks are re-cut to BLOCK_ROWS rows
   * (and BLOCK_MAX_BYTES); a grid fragmented by many small deletions is re-cut whole.
   */
  async finalize(): Promise<{ tree: Tree; newBlocks: NewBlock[] }> {
    const ideal = Math.ceil(this.total / BLOCK_ROWS);
    if (this.segs.length > 2 * ideal + 4) {
      await this.ensureAll();
      this.replaceAll(this.all());
    }
    const blocks: BlockRef[] = [];
    const newBlocks: NewBlock[] = [];
    let run: GridRow[] = [];
    const flush = () => {
      for (let i = 0; i < run.length; i += BLOCK_ROWS) cut(run.slice(i, i + BLOCK_ROWS));
      run = [];
    };
    const cut = (rows: GridRow[]) => {
      const data = encodeRows(rows);
      if (data.length > BLOCK_MAX_BYTES && rows.length > 1) {
        const half = rows.length >> 1;
        cut(rows.slice(0, half));
        cut(rows.slice(half));
        return;
      }
      const b = { id: newId('blk'), rows: rows.length, data };
      newBlocks.push(b);
      blocks.push({ id: b.id, rows: b.rows, bytes: data.length });
    };
    for (const s of this.segs) {
      if (s.dirty) {
        run.push(...s.rows!);
        continue;
      }
      flush();
      if (s.count > 0) blocks.push(s.ref!);
    }
    flush();
    const tree: Tree = {
      columns: this.columns.map((c) => ({ ...c })),
      blocks,
      rowCount: this.total,
      nextRowId: this.nextRowId,
      nextColId: this.nextColId,
    };
    checkTreeLimits(tree);
    return { tree, newBlocks };
  }
}

/** Refuse a grid beyond the documented limits (GridLimitError names the limit). */
export function checkTreeLimits(tree: Tree): void {
  const cols = tree.columns.length;
  if (cols > SHEET_LIMITS.columns)
    throw new GridLimitError(`the sheet would have ${cols} columns; at most ${SHEET_LIMITS.columns}`);
  if (tree.rowCount > SHEET_LIMITS.rows)
    throw new GridLimitError(`the sheet would have ${tree.rowCount} rows; at most ${SHEET_LIMITS.rows}`);
  if (tree.rowCount * cols > SHEET_LIMITS.cells)
    throw new GridLimitError(
      `the sheet would have ${tree.rowCount * cols} cells; at most ${SHEET_LIMITS.cells} (rows × columns)`,
    );
  const bytes = treeBytes(tree);
  if (bytes > GRID_MAX_BYTES)
    throw new GridLimitError(
      `the sheet would hold ${(bytes / 1048576).toFixed(1)} MiB of cell data; at most ${GRID_MAX_BYTES / 1048576} MiB`,
    );
}
