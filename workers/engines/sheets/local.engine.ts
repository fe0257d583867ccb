import type { Cell, ColumnType } from '../../../contracts/sheets';
import { AppError } from '../../../platform/infra/errors';
import type { SheetEditEngine, SheetEditInput } from './sheet.engine';

/** Examples of what `local-rules-v1` understands (also the 400 message for anything else). */
export const LOCAL_SHEET_EXAMPLES = [
  'add a column Total = Price * Qty',
  'add a date column Due',
  'sort by Date descending',
  'delete rows where Status is done',
  'delete rows 3, 5 and 7',
  'rename column B to Owner',
  'delete column Notes',
  'set Status to done where Qty is 0',
  'change column Qty to number',
  'add a row: Widget, 3, 4.5',
] as const;

const TYPE_WORDS: Record<string, ColumnType> = {
  string: 'string',
  text: 'string',
  number: 'number',
  numeric: 'number',
  boolean: 'boolean',
  date: 'date',
};
const unquote = (s: string) =>
  s
    .trim()
    .replace(/^["'“‘`](.*)["'”’`]$/s, '$1')
    .trim();

/** The column an instruction names (header, case-insensitive, or letter), for typing values. */
function columnOf(input: SheetEditInput, ref: string) {
  const r = unquote(ref).toLowerCase();
  return (
    input.columns.find((c) => c.name.toLowerCase() === r) ?? input.columns.find((c) => c.letter.toLowerCase() === r)
  );
}

/** A value from the instruction, typed for its column ("3" → 3 in a number column). */
function typed(input: SheetEditInput, column: string, raw: string): Cell {
  const v = unquote(raw);
  const type = columnOf(input, column)?.type ?? 'string';
  if (/^(empty|blank|nothing|null)$/i.test(v)) return null;
  if (type === 'number') {
    const n = Number(v.replace(/,/g, ''));
    return v !== '' && Number.isFinite(n) ? n : v;
  }
  if (type === 'boolean') {
    if (/^(true|yes|y|1)$/i.test(v)) return true;
    if (/^(false|no|n|0)$/i.test(v)) return false;
  }
  return v;
}

const COMPARATORS: [RegExp, string][] = [
  [/^(.+?)\s+(?:is not empty|is not blank|has a value)$/i, 'notEmpty'],
  [/^(.+?)\s+(?:is empty|is blank|has no value)$/i, 'empty'],
  [/^(.+?)\s*(?:>=|is at least|is greater than or equal to)\s*(.+)$/i, 'gte'],
  [/^(.+?)\s*(?:<=|is at most|is less than or equal to)\s*(.+)$/i, 'lte'],
  [/^(.+?)\s*(?:>|is greater than|is more than|is above|is after)\s*(.+)$/i, 'gt'],
  [/^(.+?)\s*(?:<|is less than|is below|is before)\s*(.+)$/i, 'lt'],
  [/^(.+?)\s+(?:contains|includes|has)\s+(.+)$/i, 'contains'],
  [/^(.+?)\s*(?:!=|<>|is not|isn't|does not equal|is other than)\s*(.+)$/i, 'ne'],
  [/^(.+?)\s*(?:==|=|is|equals|is equal to)\s*(.+)$/i, 'eq'],
];

function condition(input: SheetEditInput, text: string) {
  for (const [re, cmp] of COMPARATORS) {
    const m = re.exec(text.trim());
    if (!m) continue;
    const column = unquote(m[1]!);
    if (cmp === 'empty' || cmp === 'notEmpty') return { column, cmp };
    const value = cmp === 'contains' ? unquote(m[2]!) : typed(input, column, m[2]!);
    return { column, cmp, value };
  }
  return null;
}

type Rule = (m: RegExpExecArray, input: SheetEditInput) => unknown[] | null;

const RULES: [RegExp, Rule][] = [
  // add a column Total = Price * Qty
  [
    /^(?:add|insert|create)\s+(?:a\s+|an\s+)?(?:new\s+)?(?:number\s+|numeric\s+)?column\s+(?:called\s+|named\s+)?(.+?)\s*(?:=|:=|as|with|equal to|equals)\s*(.+)$/i,
    (m) => {
      const name = unquote(m[1]!);
      const expression = m[2]!.trim();
      if (!/[-+*/]|^\[?[A-Za-z_]/.test(expression) || TYPE_WORDS[expression.toLowerCase()]) return null;
      return [{ op: 'insertColumn', name, type: 'number', expression }];
    },
  ],
  // add a (date) column Due (of type date) (before Status)
  [
    /^(?:add|insert|create)\s+(?:a\s+|an\s+)?(?:new\s+)?(?:(string|text|number|numeric|boolean|date)\s+)?column\s+(?:called\s+|named\s+)?(.+?)(?:\s+(?:of type|of kind|typed|type)\s+(string|text|number|numeric|boolean|date))?(?:\s+before\s+(?:column\s+)?(.+))?$/i,
    (m) => {
      const type = TYPE_WORDS[(m[1] ?? m[3] ?? 'string').toLowerCase()]!;
      return [{ op: 'insertColumn', name: unquote(m[2]!), type, ...(m[4] ? { before: unquote(m[4]) } : {}) }];
    },
  ],
  // sort by Date descending
  [
    /^(?:sort|order)\s+(?:the\s+)?(?:rows\s+|sheet\s+|table\s+|data\s+)?by\s+(?:column\s+)?(.+?)(?:\s*,?\s+(asc|ascending|desc|descending|increasing|decreasing|newest first|oldest first|largest first|biggest first|highest first|smallest first|lowest first|a-z|a to z|z-a|z to a))?$/i,
    (m) => {
      const dir = (m[2] ?? 'asc').toLowerCase();
      const desc =
        /^(desc|descending|decreasing|newest first|largest first|biggest first|highest first|z-a|z to a)$/.test(dir);
      return [{ op: 'sort', column: unquote(m[1]!), direction: desc ? 'desc' : 'asc' }];
    },
  ],
  // delete rows where Status is done
  [
    /^(?:delete|remove|drop)\s+(?:all\s+)?(?:the\s+)?rows?\s+(?:where|with|whose|in which|that have)\s+(.+)$/i,
    (m, input) => {
      const where = condition(input, m[1]!);
      return where ? [{ op: 'deleteRows', where }] : null;
    },
  ],
  // delete rows 3, 5 and 7 / delete rows 3 to 6
  [
    /^(?:delete|remove|drop)\s+(?:the\s+)?rows?\s+(\d+(?:\s*(?:,|and|to|-|through)\s*\d+)*)$/i,
    (m) => {
      const rows = new Set<number>();
      for (const part of m[1]!.split(/\s*(?:,|and)\s*/i)) {
        const range = /^(\d+)\s*(?:to|-|through)\s*(\d+)$/i.exec(part.trim());
        if (range) for (let n = Number(range[1]); n <= Number(range[2]) && rows.size <= 5000; n++) rows.add(n);
        else if (part.trim()) rows.add(Number(part.trim()));
      }
      return [{ op: 'deleteRows', rows: [...rows] }];
    },
  ],
  // rename column B to Owner
  [
    /^rename\s+(?:the\s+)?(?:column\s+)?(.+?)\s+(?:to|as|into)\s+(.+)$/i,
    (m) => [{ op: 'renameColumn', column: unquote(m[1]!), name: unquote(m[2]!) }],
  ],
  // delete column Notes
  [/^(?:delete|remove|drop)\s+(?:the\s+)?column\s+(.+)$/i, (m) => [{ op: 'deleteColumn', column: unquote(m[1]!) }]],
  // change column Qty to number
  [
    /^(?:change|convert|make|retype|turn)\s+(?:the\s+)?(?:column\s+)?(.+?)\s+(?:to|into)\s+(?:an?\s+)?(string|text|number|numeric|boolean|date)(?:\s+column)?$/i,
    (m) => [{ op: 'retypeColumn', column: unquote(m[1]!), type: TYPE_WORDS[m[2]!.toLowerCase()] }],
  ],
  // set Status to done where Qty is 0 / set Total = Price * Qty
  [
    /^(?:set|fill|change)\s+(?:column\s+)?(.+?)\s+(?:to|=|with)\s+(.+?)(?:\s+(?:where|when|for rows where|in rows where)\s+(.+))?$/i,
    (m, input) => {
      const column = unquote(m[1]!);
      const raw = m[2]!.trim();
      const where = m[3] ? condition(input, m[3]) : undefined;
      if (m[3] && !where) return null;
      const isExpr =
        columnOf(input, column)?.type === 'number' && /[-+*/]/.test(raw) && !/^[-+]?\d+(\.\d+)?$/.test(raw);
      const set = isExpr ? { column, expression: raw } : { column, value: typed(input, column, raw) };
      return [{ op: 'update', set: [set], ...(where ? { where } : {}) }];
    },
  ],
  // add a row: Widget, 3, 4.5
  [
    /^(?:add|append|insert)\s+(?:a\s+|one\s+)?(?:new\s+)?row\s*(?:with\s+|:\s*|of\s+)?(.+)$/i,
    (m, input) => {
      const values = m[1]!
        .split(/\s*,\s*/)
        .map((v, i) => (input.columns[i] ? typed(input, input.columns[i].name, v) : unquote(v)));
      return [{ op: 'appendRows', rows: [values] }];
    },
  ],
];

/**
 * `local-rules-v1`: a deterministic, offline engine that reads common instructions with
 * patterns (LOCAL_SHEET_EXAMPLES); several can be joined with ";" or "then". Values are typed
 * from the named column; conditions and expressions are left to the API, which evaluates them
 * on every row.
 */
export function createLocalSheetEngine(): SheetEditEngine {
  const name = 'local-rules-v1';
  return {
    name,
    async plan(input: SheetEditInput) {
      const parts = input.instruction
        .split(/\s*(?:;|\n|,?\s+(?:and\s+)?then\s+)\s*/i)
        .map((p) =>
          p
            .trim()
            .replace(/^(?:and\s+)?then\s+/i, '')
            .replace(/[.!]+$/, '')
            .trim(),
        )
        .filter(Boolean);
      const ops: unknown[] = [];
      for (const part of parts) {
        let found: unknown[] | null = null;
        for (const [re, rule] of RULES) {
          const m = re.exec(part);
          if (!m) continue;
          found = rule(m, input);
          if (found) break;
        }
        if (!found) {
          const quoted = part.length > 60 ? `${part.slice(0, 60)}…` : part;
          throw new AppError(
            'validation_error',
            `instruction: the ${name} engine does not understand "${quoted}"; it understands instructions like: ${LOCAL_SHEET_EXAMPLES.map((e) => `"${e}"`).join(', ')} (join several with ";")`,
          );
        }
        ops.push(...found);
      }
      return { ops };
    },
  };
}
