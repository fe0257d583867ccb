import type { z } from 'zod';
import type { ChatArtifact } from '../../contracts/conversations';
import type { AuthAccount } from '../accounts/accounts';
import type { ApiKeyDoc } from '../infra/mongo';

/**
 * The scope a key needs to call a tool (SPEC §5): `read` for a tool that reads workspace data,
 * `write` for one that changes or deletes an existing resource (or stores what the user said),
 * `ai` for one whose product is new (made by the AI call itself, whose endpoint already needs
 * `ai`). The dispatcher (executeToolCall) refuses a call the key's scopes do not cover, and
 * engines are offered only the tools the key may call (toolsFor).
 */
export type ToolScope = 'read' | 'write' | 'ai';

/**
 * A tool the assistant or an agent may call. Tools call the same services the HTTP
 * routes call (platform/*), never HTTP. Each returns a ChatArtifact (SPEC 2.7); a tool that fails
 * returns (or the runner turns its throw into) an artifact of type `error`, after giving back
 * whatever it charged.
 */
export interface ToolContext {
  account: AuthAccount;
  /** The calling key's scopes and Drive pins (an agent run carries its dispatcher's). */
  key: Pick<ApiKeyDoc, 'scopes' | 'folderPins'>;
  requestId: string;
  signal: AbortSignal;
  /**
   * Ids for what the call creates, deterministic per (turn or run, call): a call repeated after a
   * crash makes the same ids, so it finds what it made instead of making it twice.
   */
  idFor(prefix: string): string;
  /** Human progress text while a long tool runs (agent runs store it; chat may ignore it). */
  progress?(message: string): void;
}

// biome-ignore lint/suspicious/noExplicitAny: a tool list mixes tools of different inputs (unknown would refuse them: `run` takes I); each tool's input is checked by its zod schema
export interface ToolDefinition<I = any> {
  name: string;
  /** What the tool does, for engines choosing tools. */
  description: string;
  input: z.ZodType<I>;
  /** The scope the calling key needs (the table of every tool: docs/api-guide.md, "Tools and scopes"). */
  scope: ToolScope;
  /** Credit operations the tool may spend (its own services charge them); empty for free tools. */
  spends: readonly string[];
  run(args: I, ctx: ToolContext): Promise<ChatArtifact>;
}
