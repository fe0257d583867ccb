import { columnIndexOf, columnLetter, SHEET_LIMITS, type Cell, type ColumnType } from '../../contracts/sheets';
import type { ColumnMeta } from './grid';

/** A value that does not fit where it was put; `message` completes "<field>: …". */
export class CellError extends Error {}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

export function isDate(s: string): boolean {
  const m = DATE.exec(s);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3]);
}

const quote = (s: string) => `"${s.length > 40 ? `${s.slice(0, 40)}…` : s}"`;

/** `value` checked against the column type (null always fits); CellError otherwise. */
export function checkCell(value: unknown, col: ColumnMeta): Cell {
  if (value === null || value === undefined) return null;
  const where = `column ${quote(col.name)} is ${col.type}`;
  switch (col.type) {
    case 'string':
      if (typeof value !== 'string') throw new CellError(`must be a string (${where})`);
      if (value.length > SHEET_LIMITS.cellChars)
        throw new CellError(`must be at most ${SHEET_LIMITS.cellChars} characters`);
      if (value.includes('\u0000')) throw new CellError('must not contain NUL characters');
      return value;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value))
        throw new CellError(`must be a finite number (${where})`);
      return value;
    case 'boolean':
      if (typeof value !== 'boolean') throw new CellError(`must be a boolean (${where})`);
      return value;
    case 'date':
      if (typeof value !== 'string' || !isDate(value)) throw new CellError(`must be a date YYYY-MM-DD (${where})`);
      return value;
  }
}

/** `value` converted to `type` (retypeColumn); undefined when it does not convert. */
export function convertCell(value: Cell, type: ColumnType): Cell | undefined {
  if (value === null) return null;
  switch (type) {
    case 'string':
      return String(value);
    case 'number':
      if (typeof value === 'number') return value;
      if (typeof value === 'boolean') return value ? 1 : 0;
      if (typeof value === 'string') {
        const t = value.trim().replace(/,/g, '');
        if (t === '') return null;
        if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t) && Number.isFinite(Number(t))) return Number(t);
      }
      return undefined;
    case 'boolean': {
      if (typeof value === 'boolean') return value;
      if (value === 1 || value === 0) return value === 1;
      const t = String(value).trim().toLowerCase();
      if (t === '') return null;
      if (['true', 'yes', 'y', '1'].includes(t)) return true;
      if (['false', 'no', 'n', '0'].includes(t)) return false;
      return undefined;
    }
    case 'date': {
      if (typeof value !== 'string') return undefined;
      const t = value.trim();
      if (t === '') return null;
      if (isDate(t)) return t;
      if (/^\d{4}-\d{2}-\d{2}T/.test(t) && !Number.isNaN(Date.parse(t)) && isDate(t.slice(0, 10)))
        return t.slice(0, 10);
      return undefined;
    }
  }
}

/** Display of a cell value in messages. */
export const showCell = (v: Cell) => (typeof v === 'string' ? quote(v) : String(v));

/**
 * Column by reference: its exact header name, then a case-insensitive unique name, then its
 * letter. -1 when none.
 */
export function findColumn(columns: ColumnMeta[], ref: string): number {
  const exact = columns.findIndex((c) => c.name === ref);
  if (exact >= 0) return exact;
  const lower = ref.trim().toLowerCase();
  const ci = columns.flatMap((c, i) => (c.name.toLowerCase() === lower ? [i] : []));
  if (ci.length === 1) return ci[0]!;
  const byLetter = columnIndexOf(ref.trim());
  return byLetter >= 0 && byLetter < columns.length ? byLetter : -1;
}

export const a1 = (col: number, row: number) => `${columnLetter(col)}${row}`;

/** A parsed range: 0-based inclusive columns, 1-based inclusive rows; null ends run to the grid's end. */
export interface ParsedRange {
  c1: number;
  c2: number | null;
  r1: number;
  r2: number | null;
  /** The range normalised (upper case, ends in order). */
  text: string;
}

const CELL = /^([A-Z]{1,3})([1-9][0-9]{0,5})$/;
const COL = /^([A-Z]{1,3})$/;
const ROW = /^([1-9][0-9]{0,5})$/;

/** Parse A1 notation: A1, A1:C10, B:B, A:C, 2:5, B2:D (to the last row). null when malformed. */
export function parseRange(raw: string): ParsedRange | null {
  const s = raw.trim().toUpperCase().replace(/\$/g, '');
  const parts = s.split(':');
  if (parts.length > 2 || parts.some((p) => p === '')) return null;
  const [a, b = a] = parts as [string, string?];
  const cell = (p: string) => CELL.exec(p);
  let c1: number, c2: number | null, r1: number, r2: number | null;
  const ca = cell(a);
  const cb = cell(b!);
  if (ca && cb) {
    c1 = columnIndexOf(ca[1]!);
    c2 = columnIndexOf(cb[1]!);
    r1 = Number(ca[2]);
    r2 = Number(cb[2]);
  } else if (ca && COL.test(b!)) {
    c1 = columnIndexOf(ca[1]!);
    c2 = columnIndexOf(b!);
    r1 = Number(ca[2]);
    r2 = null;
  } else if (COL.test(a) && COL.test(b!)) {
    c1 = columnIndexOf(a);
    c2 = columnIndexOf(b!);
    r1 = 1;
    r2 = null;
  } else if (ROW.test(a) && ROW.test(b!)) {
    c1 = 0;
    c2 = null;
    r1 = Number(a);
    r2 = Number(b);
  } else {
    return null;
  }
  if (c2 !== null && c2 < c1) [c1, c2] = [c2, c1];
  if (r2 !== null && r2 < r1) [r1, r2] = [r2, r1];
  return { c1, c2, r1, r2, text: parts.length === 1 ? a : `${a}:${b}` };
}
