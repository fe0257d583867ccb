import type { Runtime } from '../../runtime';
import type { ToolDefinition } from '../tool';
import { mediaTools } from './media.tools';
import { miscTools } from './misc.tools';
import { projectTools } from './projects.tools';
import { workspaceTools } from './workspace.tools';

/**
 * The chat catalogue: every tool the assistant may call in POST /chat, and that
 * agents may be given. Each calls the same platform services as the HTTP routes (never HTTP),
 * with the contracts' validation, and makes its ids with ctx.idFor so that a call repeated after
 * a crash finds what it made. Paid tools are charged by their services (402 insufficient_credits
 * is thrown; executeToolCall turns it into an `error` artifact, nothing charged).
 */
export function createAssistantTools(rt: Runtime): ToolDefinition[] {
  return [...projectTools(rt), ...workspaceTools(rt), ...mediaTools(rt), ...miscTools(rt)];
}

/** Names of the chat catalogue, in order (the README table lists them). */
export const ASSISTANT_TOOL_NAMES = [
  'create_flowchart',
  'add_flowchart_steps',
  'create_whiteboard',
  'create_notes',
  'create_document',
  'create_presentation',
  'create_sheet',
  'create_board',
  'generate_image',
  'generate_video',
  'compose_song',
  'build_code',
  'start_research',
  'web_search',
  'brand_theme',
  'platform_action',
] as const;
