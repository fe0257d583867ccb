import { SheetRpcRequest, type SheetRpcReply } from '../../contracts/sheets';
import type { Config } from '../../platform/infra/config';
import type { Runtime } from '../../platform/runtime';
import { createLocalSheetEngine } from '../engines/sheets/local.engine';
import { createOpenAiSheetEngine } from '../engines/sheets/openai.engine';
import type { SheetEditEngine } from '../engines/sheets/sheet.engine';
import type { ResponderDefinition } from '../pool/responder';

export function sheetEngineFrom(config: Config): SheetEditEngine {
  return config.SHEET_ENGINE === 'openai'
    ? createOpenAiSheetEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.OPENAI_MODEL,
        timeoutMs: config.SHEET_RPC_TIMEOUT_MS,
      })
    : createLocalSheetEngine();
}

/**
 * The sheet pool (request/reply, POST /sheets/{id}/edit): turns an instruction plus the sheet's
 * columns and a sample of its rows into ops. It never reads or writes the grid: the API validates
 * and applies the ops, so a sheet changes only through one code path.
 */
export function sheetResponder(
  rt: Runtime,
  engine: SheetEditEngine = sheetEngineFrom(rt.config),
): ResponderDefinition<SheetRpcRequest, SheetRpcReply> {
  return {
    pool: 'sheet',
    input: SheetRpcRequest,
    async handle(req, ctx) {
      const out = await engine.plan(
        { instruction: req.instruction, columns: req.columns, sample: req.sample, rowCount: req.rowCount },
        { signal: ctx.signal },
      );
      return { engine: engine.name, ops: out.ops, ...(out.summary ? { summary: out.summary } : {}) };
    },
  };
}
