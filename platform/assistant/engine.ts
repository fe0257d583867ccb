import type { ChatArtifact, ChatMode, MessageEngine } from '../../contracts/conversations';

/**
 * The chat-engine interface: one model step at a time. The turn runner
 * (platform/assistant/turn.ts) calls `step` with the history so far and the tools on offer,
 * runs the tool calls the step asked for, appends their results, and calls `step` again until a
 * step asks for no tool (or the mode's step limit is reached). Two implementations:
 * `engines/local.ts` (offline planner, deterministic) and `engines/openai.ts` (any
 * OpenAI-compatible chat-completions provider, streamed). Used by POST /chat (API process) and
 * by agent runs (agent pool).
 */

/** Who answered (SPEC 2.7 message.engine). Null in responses for white-label accounts. */
export type EngineInfo = MessageEngine;

export interface ToolCall {
  /** Unique within the turn (the provider's id, or one the local engine makes). */
  id: string;
  name: string;
  /** Parsed JSON arguments, not yet validated (the turn runner validates with the tool's zod schema). */
  args: unknown;
}

export type EngineMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  /** `artifacts`: what earlier turns made (from the conversation), so "that flowchart" resolves. */
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[]; artifacts?: ChatArtifact[] }
  /** A tool's result as the engine sees it: the artifact as JSON (or an error artifact). */
  | { role: 'tool'; toolCallId: string; name: string; artifact: ChatArtifact };

/** A tool as offered to an engine: its JSON Schema comes from the tool's zod schema. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export type EngineEvent =
  | { type: 'text-delta'; delta: string }
  /** A tool call began (its name is known; arguments still streaming). Optional before `tool-call`. */
  | { type: 'tool-call-start'; id: string; name: string }
  /** A complete tool call. */
  | { type: 'tool-call'; call: ToolCall }
  | { type: 'usage'; inputTokens: number | null; outputTokens: number | null };

export interface StepInput {
  messages: EngineMessage[];
  tools: ToolSpec[];
  mode: ChatMode;
  /** 0 for the first step of the turn. */
  stepIndex: number;
  /** Aborted when the client went away or the deadline passed: stop at once. */
  signal: AbortSignal;
}

/** A provider failure or timeout, with a message fit to show the user (no secrets). */
export class EngineError extends Error {
  constructor(
    message: string,
    readonly code: 'engine_unavailable' | 'engine_timeout' | 'engine_error' = 'engine_error',
  ) {
    super(message);
  }
}

export interface ChatEngine {
  readonly info: EngineInfo;
  /** One model step. Throws EngineError on a provider error or timeout; never hangs past the signal. */
  step(input: StepInput): AsyncIterable<EngineEvent>;
}
