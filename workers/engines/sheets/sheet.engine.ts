import type { Cell, ColumnType } from '../../../contracts/sheets';

/** What a sheet-edit engine sees: the instruction, the columns and a small sample of rows. */
export interface SheetEditInput {
  instruction: string;
  columns: { letter: string; name: string; type: ColumnType }[];
  /** The first rows (at most SHEET_EDIT_SAMPLE_ROWS), values in column order. */
  sample: Cell[][];
  rowCount: number;
}

/**
 * A sheet-edit engine turns an instruction into ops (the SheetOp shapes of contracts/sheets.ts).
 * Ops are returned as written (`unknown`): the API validates them exactly like ops a user sends,
 * so an engine never needs to see the whole grid (conditions and expressions are evaluated by the
 * API on every row). An instruction the engine cannot turn into ops is an AppError
 * validation_error naming `instruction`.
 */
export interface SheetEditEngine {
  readonly name: string;
  plan(input: SheetEditInput, ctx: { signal: AbortSignal }): Promise<{ ops: unknown[]; summary?: string }>;
}
