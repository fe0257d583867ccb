import { z } from 'zod';
import type { ChatArtifact } from '../../contracts/conversations';
import { AppError } from '../infra/errors';
import { formatIssues } from '../infra/validation';
import type { ToolCall, ToolSpec } from './engine';
import type { ToolContext, ToolDefinition } from './tool';

/** Whether a key with `scopes` may call the tool (SPEC §5: its scope is one of the key's). */
export const mayCall = (def: Pick<ToolDefinition, 'scope'>, scopes: readonly string[]): boolean =>
  scopes.includes(def.scope);

/** The tools a key with `scopes` may call: what an engine is offered. */
export const toolsFor = <T extends Pick<ToolDefinition, 'scope'>>(defs: readonly T[], scopes: readonly string[]): T[] =>
  defs.filter((d) => mayCall(d, scopes));

/** Why a key may not call a tool, for the `error` artifact (chat) or the 403 (POST /live/action). */
export const notAllowedMessage = (def: Pick<ToolDefinition, 'name' | 'scope'>): string =>
  `this key may not use ${def.name}: it needs the ${def.scope} scope (SPEC §5); nothing was done and nothing was charged`;

/** An artifact of type `error` (SPEC 2.7): what a failed or refused tool call answers. */
export function errorArtifact(title: string, message: string, data: Record<string, unknown> = {}): ChatArtifact {
  return { type: 'error', title, data: { message, ...data } };
}

/** The tools as offered to an engine: JSON Schema from each tool's zod schema. */
export function toolSpecs(defs: readonly ToolDefinition[]): ToolSpec[] {
  return defs.map((d) => ({
    name: d.name,
    description: d.description,
    parameters: z.toJSONSchema(d.input, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>,
  }));
}

/**
 * Run one tool call: an unknown tool, a tool the key's scopes do not cover (code `forbidden`,
 * nothing run), arguments that fail the tool's zod schema, and a tool that
 * throws all become an `error` artifact naming the tool and the problem (an AppError keeps its
 * code: `insufficient_credits` says the balance was short). The tool itself gives back what it
 * charged when it fails (its service does: paid calls release their hold, jobs refund).
 */
export async function executeToolCall(
  defs: readonly ToolDefinition[],
  call: ToolCall,
  ctx: ToolContext,
): Promise<ChatArtifact> {
  const def = defs.find((d) => d.name === call.name);
  if (!def)
    return errorArtifact(`Unknown tool ${call.name}`, `the tool ${call.name} is not available here`, {
      tool: call.name,
      code: 'unknown_tool',
    });
  // Before validation: a call without the scope is told so whatever its arguments.
  if (!mayCall(def, ctx.key.scopes))
    return errorArtifact(`Not allowed: ${def.name}`, notAllowedMessage(def), {
      tool: def.name,
      code: 'forbidden',
      scope: def.scope,
    });
  const parsed = def.input.safeParse(call.args ?? {});
  if (!parsed.success)
    return errorArtifact(`Could not run ${def.name}`, `arguments: ${formatIssues(parsed.error.issues)}`, {
      tool: def.name,
      code: 'validation_error',
    });
  try {
    return await def.run(parsed.data, ctx);
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    const code = err instanceof AppError ? err.code : 'tool_failed';
    const message = err instanceof AppError ? err.message : 'the tool failed; nothing was charged for it';
    return errorArtifact(`Could not run ${def.name}`, message, { tool: def.name, code });
  }
}
