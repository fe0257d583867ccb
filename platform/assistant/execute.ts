import { z } from 'zod';
import type { ChatArtifact } from '../../contracts/conversations';
import { AppError } from '../errors';
import { formatIssues } from '../validation';
import type { ToolCall, ToolSpec } from './engine';
import type { ToolContext, ToolDefinition } from './tool';

/** An artifact of type `error` (SPEC 2.7): what a failed or refused tool call answers. */
export function errorArtifact(title: string, message: string, data: Record<string, unknown> = {}): ChatArtifact {
  return { type: 'error', title, data: { message, ...data } };
}

/** The tools as offered to an engine: JSON Schema from each tool's zod schema. */
export function toolSpecs(defs: readonly ToolDefinition[]): ToolSpec[] {
  return defs.map((d) => ({ name: d.name, description: d.description, parameters: z.toJSONSchema(d.input, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown> }));
}

/**
 * Run one tool call: an unknown tool, arguments that fail the tool's zod schema, and a tool that
 * throws all become an `error` artifact naming the tool and the problem (an AppError keeps its
 * code: `insufficient_credits` says the balance was short). The tool itself gives back what it
 * charged when it fails (its service does: paid calls release their hold, jobs refund).
 */
export async function executeToolCall(defs: readonly ToolDefinition[], call: ToolCall, ctx: ToolContext): Promise<ChatArtifact> {
  const def = defs.find((d) => d.name === call.name);
  if (!def) return errorArtifact(`Unknown tool ${call.name}`, `the tool ${call.name} is not available here`, { tool: call.name, code: 'unknown_tool' });
  const parsed = def.input.safeParse(call.args ?? {});
  if (!parsed.success) return errorArtifact(`Could not run ${def.name}`, `arguments: ${formatIssues(parsed.error.issues)}`, { tool: def.name, code: 'validation_error' });
  try {
    return await def.run(parsed.data, ctx);
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    const code = err instanceof AppError ? err.code : 'tool_failed';
    const message = err instanceof AppError ? err.message : 'the tool failed; nothing was charged for it';
    return errorArtifact(`Could not run ${def.name}`, message, { tool: def.name, code });
  }
}
