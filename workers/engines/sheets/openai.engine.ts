import { SHEET_OP_NAMES } from '../../../contracts/sheets';
import { AppError } from '../../../platform/infra/errors';
import { RetryLaterError, UnrecoverableError } from '../../pool/errors';
import { chatComplete } from '../openai-chat';
import type { SheetEditEngine } from './sheet.engine';

const SYSTEM = `You edit spreadsheets by writing JSON ops. Answer with JSON only: {"ops":[...]} (or {"ops":[],"error":"why"} when the instruction cannot be done).
Rows are numbered from 1 (the first data row; the header is not a row). Columns are named by header name (or letter A, B, …). Cell values: string, number, boolean, "YYYY-MM-DD" for dates, or null.
Ops (field "op" is one of ${SHEET_OP_NAMES.join(', ')}):
{"op":"set","cell":"B3","value":1} or {"op":"set","row":3,"column":"Qty","value":1}
{"op":"update","where":{"column":"Status","cmp":"eq","value":"done"},"set":[{"column":"Qty","value":0}]} (cmp: eq, ne, lt, lte, gt, gte, contains, empty, notEmpty; "where" optional; a set entry may give "expression" instead of "value")
{"op":"insertRows","at":2,"rows":[["a",1]]} {"op":"appendRows","rows":[["a",1]]} {"op":"deleteRows","rows":[2,5]} or {"op":"deleteRows","where":{...}}
{"op":"insertColumn","name":"Total","type":"number","expression":"Price * Qty"} (type: string, number, boolean, date; optional "before":"C", "value")
{"op":"deleteColumn","column":"Notes"} {"op":"renameColumn","column":"B","name":"Owner"} {"op":"retypeColumn","column":"Qty","type":"number"} {"op":"sort","column":"Date","direction":"desc"}
Expressions use number columns, numbers, + - * / and parentheses; write [Column Name] for names with spaces. Use conditions and expressions rather than listing rows: you only see a sample.`;

/**
 * `openai-compatible:<model>`: asks an OpenAI-compatible chat-completions API (JSON mode) for
 * `{"ops":[…]}`. The ops are returned unchecked; the API validates them like a user's. A model
 * that says it cannot do the instruction is a 400; provider failures are 503.
 */
export function createOpenAiSheetEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
}): SheetEditEngine {
  const name = `openai-compatible:${opts.model}`;
  return {
    name,
    async plan(input, ctx) {
      const user = [
        `Columns: ${JSON.stringify(input.columns.map((c) => ({ letter: c.letter, name: c.name, type: c.type })))}`,
        `Rows: ${input.rowCount} in all; the first ${input.sample.length}: ${JSON.stringify(input.sample)}`,
        `Instruction: ${input.instruction}`,
      ].join('\n');
      let content: string;
      try {
        ({ content } = await chatComplete(
          { ...opts, label: 'sheet provider' },
          [
            { role: 'system', content: SYSTEM },
            { role: 'user', content: user },
          ],
          { signal: ctx.signal, json: true },
        ));
      } catch (err) {
        if (err instanceof RetryLaterError || err instanceof UnrecoverableError)
          throw new AppError('service_unavailable', err.message, { cause: err });
        throw err;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(content.replace(/^```(?:json)?\s*|```\s*$/g, ''));
      } catch {
        throw new AppError('service_unavailable', 'sheet provider did not answer JSON ops');
      }
      const body = parsed as { ops?: unknown; error?: unknown; summary?: unknown };
      if (!parsed || typeof parsed !== 'object' || !Array.isArray(body.ops))
        throw new AppError('service_unavailable', 'sheet provider did not answer {"ops":[…]}');
      if (body.ops.length === 0) {
        const why = typeof body.error === 'string' && body.error.trim() ? `: ${body.error.trim().slice(0, 200)}` : '';
        throw new AppError('validation_error', `instruction: the ${name} engine found no change to make${why}`);
      }
      return { ops: body.ops, ...(typeof body.summary === 'string' ? { summary: body.summary } : {}) };
    },
  };
}
