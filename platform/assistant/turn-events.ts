import type { ChatArtifact } from '../../contracts/conversations';
import type { EngineInfo } from './engine';

/**
 * What a turn (platform/assistant/turn.ts `runTurn`) yields, in order. POST /chat maps these one
 * to one onto AI SDK v5 UI-message chunks (api/chat); stream false assembles them; agent runs
 * store them. Text parts are opened and closed by the runner (same id for start/delta/end).
 */
export type TurnEvent =
  | { type: 'step-start' }
  | { type: 'text-start'; id: string }
  | { type: 'text-delta'; id: string; delta: string }
  | { type: 'text-end'; id: string }
  | { type: 'tool-input-start'; toolCallId: string; toolName: string }
  | { type: 'tool-input-available'; toolCallId: string; toolName: string; input: unknown }
  /** The artifact the tool produced (an `error` artifact when it failed). */
  | { type: 'tool-output-available'; toolCallId: string; toolName: string; output: ChatArtifact }
  /** A tool part that will get no output (the engine failed in the step that opened it). */
  | { type: 'tool-output-error'; toolCallId: string; toolName: string; errorText: string }
  | { type: 'step-finish' }
  /** The engine failed mid-turn (EngineError message); the turn ends after it. */
  | { type: 'error'; errorText: string; code: string }
  /** Last event of every turn that was not aborted. */
  | {
      type: 'turn-finish';
      text: string;
      artifacts: ChatArtifact[];
      engine: EngineInfo;
      usage: { inputTokens: number | null; outputTokens: number | null };
      steps: number;
    };
