import { z } from 'zod';
import { Version, intBetween, line, listEnvelope, listQuery, text } from './common';
import { Tags } from './projects';

/**
 * Sheets (SPEC 2.17, 4.4). A sheet is a project of kind `sheet` whose grid is a header of typed
 * columns over data rows. Addressing is A1 notation over the DATA rows: row 1 is the first data
 * row (the header is not a row; columns are named by letter A, B, … or by header name).
 * WARNING: column types, op names and commit statuses are public contract and persisted.
 */
export const SHEET_LIMITS = {
  /** Columns of a sheet. */
  columns: 50,
  /** Data rows of a sheet. */
  rows: 20_000,
  /** rows × columns. Whole-grid ops (sort, filters, column changes) read and rewrite every cell on the request path. */
  cells: 250_000,
  /** Characters of one text cell. */
  cellChars: 2_000,
  /** Characters of a column name. */
  columnName: 100,
  /** Ops of one request. */
  ops: 100,
  /** Rows one insertRows / appendRows op may add. */
  rowsPerOp: 5_000,
  /** Characters of a commit summary. */
  summary: 500,
  /** Characters of an edit instruction. */
  instruction: 2_000,
  /** Characters of an expression (insertColumn / update). */
  expression: 500,
  /** Data rows GET /sheets/{id} answers per page (rowLimit). */
  rowPageMax: 1_000,
  rowPageDefault: 100,
  /** Cells a range read answers at most (more rows continue at `nextRange`). */
  rangeCells: 10_000,
  /** Changed cells a commit's stored diff lists (the count is always exact). */
  diffCells: 1_000,
  /** Row values kept per structural change in a diff (inserted or deleted rows). */
  diffRows: 100,
} as const;

/** Column types. WARNING: persisted. */
export const COLUMN_TYPES = ['string', 'number', 'boolean', 'date'] as const;
export type ColumnType = (typeof COLUMN_TYPES)[number];
export const ColumnTypeSchema = z.enum(COLUMN_TYPES, { error: `must be one of ${COLUMN_TYPES.join(', ')}` });

/** One cell: text, a finite number, a boolean, a date `YYYY-MM-DD` (in date columns), or null (empty). */
export type Cell = string | number | boolean | null;
export const CellSchema = z
  .union([text(SHEET_LIMITS.cellChars), z.number().finite(), z.boolean(), z.null()], {
    error: (iss) =>
      iss.input === undefined
        ? 'is required'
        : `must be a string (at most ${SHEET_LIMITS.cellChars} characters), a finite number, a boolean or null`,
  })
  .meta({
    id: 'SheetCell',
    description:
      'A cell: string, number, boolean, date string YYYY-MM-DD (date columns) or null (empty). Its type must match the column.',
  });

/** A row given positionally: values in column order (fewer values leave the rest empty). */
export const RowValues = z
  .array(CellSchema, { error: 'must be an array of cell values in column order' })
  .max(SHEET_LIMITS.columns, { error: `must have at most ${SHEET_LIMITS.columns} values` });

/** Column name: one line, 1 to 100 characters, unique in the sheet (case-insensitive). */
export const ColumnName = line(SHEET_LIMITS.columnName).trim().min(1, { error: 'must not be empty' });

export const ColumnDef = z
  .strictObject({
    name: ColumnName.describe('Header text; unique in the sheet (case-insensitive).'),
    type: ColumnTypeSchema.describe('string, number, boolean or date (YYYY-MM-DD).'),
  })
  .meta({ id: 'SheetColumnDef' });

/** A column reference: its header name (matched exactly, then case-insensitively) or its letter (A, B, … AX). */
const ColumnRef = line(SHEET_LIMITS.columnName)
  .min(1, { error: 'must not be empty' })
  .describe('A column: its header name, or its letter (A, B, …) when no column has that name.');
const RowNumber = intBetween(1, SHEET_LIMITS.rows + 1).describe('A data row number: 1 is the first data row.');
const A1Cell = line(16)
  .regex(/^[A-Za-z]{1,3}[1-9][0-9]{0,5}$/, { error: 'must be a cell in A1 notation, e.g. B3' })
  .describe('A cell in A1 notation: column letter and data row number (A1 is the first data row of column A).');
const Expression = line(SHEET_LIMITS.expression)
  .min(1, { error: 'must not be empty' })
  .describe(
    'Arithmetic over number columns of the same row: column names (wrap names with spaces or symbols in [brackets]), numbers, + - * / and parentheses, e.g. "Price * Qty". Evaluated once, when the op runs (values are stored, not a live formula); an empty operand or a division by zero gives an empty cell.',
  );

export const WHERE_COMPARATORS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'contains', 'empty', 'notEmpty'] as const;
export const SheetWhere = z
  .strictObject({
    column: ColumnRef,
    cmp: z
      .enum(WHERE_COMPARATORS, { error: `must be one of ${WHERE_COMPARATORS.join(', ')}` })
      .default('eq')
      .describe('eq (default), ne, lt, lte, gt, gte, contains, empty, notEmpty. Text comparisons ignore case.'),
    value: CellSchema.optional().describe('What to compare with (not used by empty / notEmpty).'),
  })
  .meta({ id: 'SheetWhere', description: 'Selects the data rows whose cell in `column` compares true with `value`.' });
export type SheetWhere = z.output<typeof SheetWhere>;

const opBase = <T extends string, S extends z.ZodRawShape>(name: T, shape: S, description: string) =>
  z.strictObject({ op: z.literal(name), ...shape }).meta({ id: `SheetOp_${name}`, description });

export const SetOp = opBase(
  'set',
  {
    cell: A1Cell.optional(),
    row: RowNumber.optional(),
    column: ColumnRef.optional(),
    value: CellSchema,
  },
  'Set one cell, named by `cell` (A1) or by `row` and `column`.',
);
export const UpdateOp = opBase(
  'update',
  {
    where: SheetWhere.optional().describe('Rows to change; every row when omitted.'),
    set: z
      .array(z.strictObject({ column: ColumnRef, value: CellSchema.optional(), expression: Expression.optional() }), {
        error: 'must be an array of { column, value | expression }',
      })
      .min(1, { error: 'must name at least one column' })
      .max(SHEET_LIMITS.columns, { error: `must have at most ${SHEET_LIMITS.columns} entries` })
      .describe('For each column, a `value` or an `expression` computed per row.'),
  },
  'Set cells of every row matching `where`.',
);
export const InsertRowsOp = opBase(
  'insertRows',
  {
    at: RowNumber.describe(
      'The row number the first new row gets; the rows from there move down. rowCount + 1 appends.',
    ),
    rows: z
      .array(RowValues, { error: 'must be an array of rows' })
      .max(SHEET_LIMITS.rowsPerOp, { error: `must have at most ${SHEET_LIMITS.rowsPerOp} rows` })
      .optional()
      .describe('The new rows, values in column order.'),
    count: intBetween(1, SHEET_LIMITS.rowsPerOp).optional().describe('Insert this many empty rows instead of `rows`.'),
  },
  'Insert rows before row `at`.',
);
export const AppendRowsOp = opBase(
  'appendRows',
  {
    rows: z
      .array(RowValues, { error: 'must be an array of rows' })
      .min(1, { error: 'must have at least one row' })
      .max(SHEET_LIMITS.rowsPerOp, { error: `must have at most ${SHEET_LIMITS.rowsPerOp} rows` })
      .describe('Rows, values in column order.'),
  },
  'Append rows after the last row.',
);
export const DeleteRowsOp = opBase(
  'deleteRows',
  {
    rows: z
      .array(RowNumber, { error: 'must be an array of row numbers' })
      .min(1, { error: 'must name at least one row' })
      .max(SHEET_LIMITS.rowsPerOp, { error: `must have at most ${SHEET_LIMITS.rowsPerOp} rows` })
      .optional()
      .describe('Row numbers (as before this op).'),
    where: SheetWhere.optional().describe('Or: delete every row matching.'),
  },
  'Delete rows by number or by condition (exactly one of `rows`, `where`).',
);
export const InsertColumnOp = opBase(
  'insertColumn',
  {
    name: ColumnName,
    type: ColumnTypeSchema,
    before: ColumnRef.optional().describe('Insert before this column; appended after the last column when omitted.'),
    value: CellSchema.optional().describe('Value of every existing row (empty when omitted).'),
    expression: Expression.optional().describe('Or: compute the value of every row (number columns).'),
  },
  'Insert a column.',
);
export const DeleteColumnOp = opBase('deleteColumn', { column: ColumnRef }, 'Delete a column and its cells.');
export const RenameColumnOp = opBase('renameColumn', { column: ColumnRef, name: ColumnName }, 'Rename a column.');
export const RetypeColumnOp = opBase(
  'retypeColumn',
  { column: ColumnRef, type: ColumnTypeSchema },
  'Change a column type, converting its cells: to string always works; to number "3.5", true/false (1/0); to boolean true/false/yes/no/1/0; to date YYYY-MM-DD or an ISO date-time. A cell that does not convert refuses the op naming the cell.',
);
export const SortOp = opBase(
  'sort',
  {
    column: ColumnRef,
    direction: z.enum(['asc', 'desc'], { error: 'must be asc or desc' }).default('asc'),
  },
  'Sort the data rows by a column (stable; empty cells last in both directions; text ignores case).',
);

export const SheetOp = z
  .discriminatedUnion(
    'op',
    [
      SetOp,
      UpdateOp,
      InsertRowsOp,
      AppendRowsOp,
      DeleteRowsOp,
      InsertColumnOp,
      DeleteColumnOp,
      RenameColumnOp,
      RetypeColumnOp,
      SortOp,
    ],
    {
      error:
        'must be an op object whose `op` is one of set, update, insertRows, appendRows, deleteRows, insertColumn, deleteColumn, renameColumn, retypeColumn, sort',
    },
  )
  .meta({ id: 'SheetOp' });
export type SheetOp = z.output<typeof SheetOp>;
export const SHEET_OP_NAMES = [
  'set',
  'update',
  'insertRows',
  'appendRows',
  'deleteRows',
  'insertColumn',
  'deleteColumn',
  'renameColumn',
  'retypeColumn',
  'sort',
] as const;

export const SheetOps = z
  .array(SheetOp, { error: 'must be an array of ops' })
  .min(1, { error: 'must have at least one op' })
  .max(SHEET_LIMITS.ops, { error: `must have at most ${SHEET_LIMITS.ops} ops` });

// ---- Requests ------------------------------------------------------------------------------

export const SheetCreate = z
  .strictObject({
    name: line(255).trim().min(1, { error: 'must not be empty' }).describe('Sheet name, at most 255 characters.'),
    description: text(2000).optional().describe('At most 2000 characters.'),
    tags: Tags.optional(),
    columns: z
      .array(ColumnDef, { error: 'must be an array of { name, type }' })
      .min(1, { error: 'must have at least one column' })
      .max(SHEET_LIMITS.columns, { error: `must have at most ${SHEET_LIMITS.columns} columns` }),
    rows: z
      .array(RowValues, { error: 'must be an array of rows' })
      .max(SHEET_LIMITS.rows, { error: `must have at most ${SHEET_LIMITS.rows} rows` })
      .optional()
      .describe('Initial data rows, values in column order, each checked against its column type.'),
  })
  .meta({ id: 'SheetCreate' });
export type SheetCreate = z.output<typeof SheetCreate>;

export const SheetOpsRequest = z
  .strictObject({
    ops: SheetOps.describe(`1 to ${SHEET_LIMITS.ops} ops, applied in order as one commit (all or none).`),
    propose: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('true: record a proposed commit without changing the grid (merge or reject it later).'),
    summary: line(SHEET_LIMITS.summary).optional().describe('What the change does; a summary of the ops when omitted.'),
  })
  .meta({ id: 'SheetOpsRequest' });
export type SheetOpsRequest = z.output<typeof SheetOpsRequest>;

export const SheetEditRequest = z
  .strictObject({
    instruction: text(SHEET_LIMITS.instruction)
      .trim()
      .min(1, { error: 'must not be empty' })
      .describe('What to change, in plain words, e.g. "sort by Date descending".'),
    propose: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('true: record the change as a proposed commit.'),
  })
  .meta({ id: 'SheetEditRequest' });
export type SheetEditRequest = z.output<typeof SheetEditRequest>;

export const CommitResolveRequest = z
  .strictObject({
    action: z
      .enum(['merge', 'reject'], { error: 'must be merge or reject' })
      .describe(
        'merge applies the proposal (rebased onto later commits when they touched other cells); reject closes it.',
      ),
  })
  .meta({ id: 'SheetCommitResolveRequest' });

export const SheetRollbackRequest = z
  .strictObject({
    commitId: line(128)
      .min(1, { error: 'must not be empty' })
      .describe('A merged commit of this sheet; the grid is restored to its state after that commit, as a new commit.'),
    summary: line(SHEET_LIMITS.summary).optional(),
  })
  .meta({ id: 'SheetRollbackRequest' });

export const SheetListQuery = listQuery({});
export const SheetReadQuery = z.object({
  startRow: z.coerce
    .number({ error: 'must be an integer of at least 1' })
    .int({ error: 'must be an integer of at least 1' })
    .min(1, { error: 'must be at least 1' })
    .max(SHEET_LIMITS.rows + 1, { error: `must be at most ${SHEET_LIMITS.rows + 1}` })
    .default(1)
    .describe('First data row answered (1 is the first data row).'),
  rowLimit: z.coerce
    .number({ error: `must be an integer between 0 and ${SHEET_LIMITS.rowPageMax}` })
    .int({ error: `must be an integer between 0 and ${SHEET_LIMITS.rowPageMax}` })
    .min(0, { error: `must be between 0 and ${SHEET_LIMITS.rowPageMax}` })
    .max(SHEET_LIMITS.rowPageMax, { error: `must be between 0 and ${SHEET_LIMITS.rowPageMax}` })
    .default(SHEET_LIMITS.rowPageDefault)
    .describe(
      `Data rows answered, 0 to ${SHEET_LIMITS.rowPageMax}; default ${SHEET_LIMITS.rowPageDefault}. Continue at nextStartRow.`,
    ),
});
export const SheetRangeQuery = z.object({
  range: line(32)
    .min(1, { error: 'must not be empty' })
    .describe(
      'A1 notation over data rows: A1:C10, A1 (one cell), B:B (whole columns), 2:5 (whole rows), B2:D (from B2 to the last row). Row 1 is the first data row.',
    ),
});
export const CommitListQuery = listQuery({
  status: z
    .enum(['proposed', 'merged', 'rejected'], { error: 'must be proposed, merged or rejected' })
    .optional()
    .describe('Only commits with this status.'),
});

// ---- Responses -----------------------------------------------------------------------------

export const SheetColumn = z
  .object({
    letter: z.string().describe('A, B, …: the column letter in A1 notation.'),
    name: z.string(),
    type: ColumnTypeSchema,
  })
  .meta({ id: 'SheetColumn' });

const sheetFields = {
  id: z.string().describe('The project id (prj_…): a sheet is a project of kind sheet.'),
  name: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  openUrl: z.string().describe('Absolute link of the shape {base}/sheets/{id}.'),
  columns: z.array(SheetColumn),
  rowCount: z.number().int().describe('Data rows (the header is not counted).'),
  columnCount: z.number().int(),
  version: Version.describe(
    'The grid version: 1 at creation, +1 per merged commit (also the ETag). Equals the head commit seq.',
  ),
  headCommitId: z.string().describe('The merged commit the grid is at.'),
  createdAt: z.string(),
  updatedAt: z.string(),
};

export const SheetSummary = z.object(sheetFields).meta({ id: 'SheetSummary' });
export const SheetList = listEnvelope(SheetSummary).meta({ id: 'SheetList' });

export const Sheet = z
  .object({
    ...sheetFields,
    startRow: z.number().int().describe('Row number of rows[0].'),
    rows: z.array(z.array(CellSchema)).describe('Data rows from startRow, values in column order.'),
    nextStartRow: z.number().int().nullable().describe('startRow of the next page, or null at the end.'),
  })
  .meta({ id: 'Sheet' });

export const SheetRange = z
  .object({
    range: z
      .string()
      .describe('The range answered (clamped to the grid), in A1 notation; empty rows part when no row is in it.'),
    requested: z.string().describe('The range as asked (normalised).'),
    columns: z.array(SheetColumn).describe('The columns of the range.'),
    startRow: z.number().int(),
    rows: z.array(z.array(CellSchema)).describe('Values, one array per row.'),
    rowCount: z.number().int().describe('Data rows of the sheet.'),
    truncated: z
      .boolean()
      .describe(`true when the range held more than ${SHEET_LIMITS.rangeCells} cells: read on at nextRange.`),
    nextRange: z.string().nullable(),
    version: Version,
  })
  .meta({ id: 'SheetRange' });

export const COMMIT_STATUSES = ['proposed', 'merged', 'rejected'] as const;
export const COMMIT_SOURCES = ['create', 'ops', 'edit', 'rollback'] as const;

export const CellChange = z
  .object({
    cell: z.string().describe('A1 address when the change was made.'),
    row: z.number().int(),
    column: z.string().describe('Column name.'),
    before: CellSchema,
    after: CellSchema,
  })
  .meta({ id: 'SheetCellChange' });

export const StructuralChange = z
  .object({
    op: z
      .string()
      .describe(
        'insertRows, appendRows, deleteRows, insertColumn, deleteColumn, renameColumn, retypeColumn, sort, create, rollback.',
      ),
    description: z.string(),
    rows: z
      .array(z.object({ row: z.number().int(), values: z.array(CellSchema) }))
      .optional()
      .describe(`Inserted or deleted rows with their values (the first ${SHEET_LIMITS.diffRows}).`),
  })
  .meta({ id: 'SheetStructuralChange' });

export const CommitDiff = z
  .object({
    cells: z.array(CellChange).describe(`Each changed cell, before and after (the first ${SHEET_LIMITS.diffCells}).`),
    changedCells: z.number().int().describe('How many cells changed (exact).'),
    truncated: z.boolean(),
    structure: z.array(StructuralChange).describe('Rows and columns inserted, deleted, renamed, retyped; sorts.'),
  })
  .meta({ id: 'SheetCommitDiff' });

const commitFields = {
  id: z.string().describe('cmt_…'),
  sheetId: z.string(),
  status: z.enum(COMMIT_STATUSES).describe('proposed → merged | rejected; applied commits are merged at once.'),
  seq: z
    .number()
    .int()
    .nullable()
    .describe(
      'Position in the merged history (1 is the creation); equals the sheet version it produced. null unless merged.',
    ),
  parentId: z
    .string()
    .nullable()
    .describe(
      'The merged commit before this one (null for the creation); for a proposal, the commit it was proposed on.',
    ),
  baseCommitId: z.string().nullable().describe('The head commit when the change was made or proposed.'),
  summary: z.string(),
  source: z.enum(COMMIT_SOURCES),
  author: z.object({ keyId: z.string().nullable().describe('The API key id (never the key) that made the commit.') }),
  resolvedBy: z
    .object({ keyId: z.string().nullable() })
    .nullable()
    .describe('The key that merged or rejected a proposal.'),
  rebased: z.boolean().describe('true when a proposal was merged onto later commits.'),
  rollbackOf: z.string().nullable().describe('For a rollback, the commit whose grid it restored.'),
  changedCells: z.number().int(),
  createdAt: z.string(),
  resolvedAt: z.string().nullable(),
};

export const SheetCommitSummary = z.object(commitFields).meta({ id: 'SheetCommitSummary' });
export const SheetCommit = z
  .object({
    ...commitFields,
    ops: z.array(z.record(z.string(), z.unknown())).describe('The ops as sent (for edits, as the engine wrote them).'),
    diff: CommitDiff,
  })
  .meta({ id: 'SheetCommit' });
export const SheetCommitList = listEnvelope(SheetCommitSummary).meta({ id: 'SheetCommitList' });

/** Answer of ops, edit, resolve and rollback. */
export const SheetChange = z
  .object({
    commit: SheetCommit,
    version: Version.describe("The sheet's version after the request (unchanged for a proposal or a rejection)."),
    rowCount: z.number().int(),
    columns: z.array(SheetColumn),
  })
  .meta({ id: 'SheetChange' });

export const SheetEditResult = SheetChange.extend({
  engine: z.string().describe('The sheet-edit engine that wrote the ops, e.g. local-rules-v1.'),
  charged: z.number().int().describe('Credits charged (operation sheet_edit).'),
}).meta({ id: 'SheetEditResult' });

// ---- Sheet pool (request/reply) ------------------------------------------------------------

/** What the API sends the sheet pool for POST /sheets/{id}/edit. */
export const SheetRpcRequest = z.object({
  kind: z.literal('edit'),
  instruction: z.string(),
  columns: z.array(z.object({ letter: z.string(), name: z.string(), type: ColumnTypeSchema })),
  sample: z.array(z.array(z.union([z.string(), z.number(), z.boolean(), z.null()]))),
  rowCount: z.number().int(),
});
export type SheetRpcRequest = z.infer<typeof SheetRpcRequest>;

/** The pool's answer: ops as the engine wrote them (the API validates them like user ops). */
export interface SheetRpcReply {
  engine: string;
  ops: unknown[];
  summary?: string;
}

/** Rows of the sample the API sends the engine. */
export const SHEET_EDIT_SAMPLE_ROWS = 20;

// ---- A1 helpers (shared by the API and the engines) -----------------------------------------

/** 0 → A, 25 → Z, 26 → AA. */
export function columnLetter(index: number): string {
  let n = index + 1;
  let s = '';
  while (n > 0) {
    const m = (n - 1) % 26;
    s = String.fromCharCode(65 + m) + s;
    n = Math.floor((n - 1) / 26);
  }
  return s;
}

/** A → 0, AA → 26; -1 when not letters. */
export function columnIndexOf(letters: string): number {
  if (!/^[A-Za-z]{1,3}$/.test(letters)) return -1;
  let n = 0;
  for (const ch of letters.toUpperCase()) n = n * 26 + (ch.charCodeAt(0) - 64);
  return n - 1;
}
