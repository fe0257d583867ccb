import type { ToolDefinition } from '../assistant/tool';
import { createAssistantTools } from '../assistant/tools/index';
import type { Runtime } from '../runtime';
import { createAgentActions, type ActionScope } from './actions';
import type { AgentDoc } from './agents.repository';

/** Every tool name an agent definition may list: the chat catalogue and the agent actions. */
export function agentToolNames(rt: Runtime): string[] {
  return [
    ...createAssistantTools(rt).map((t) => t.name),
    ...createAgentActions(rt, { agentId: '', runId: '' }).map((t) => t.name),
  ];
}

/**
 * The tools one run of `agent` may call, in the order the agent lists them. A name the build no
 * longer knows is left out (an engine asking for it gets an `unknown_tool` error artifact).
 */
export function agentTools(rt: Runtime, agent: Pick<AgentDoc, 'tools'>, scope: ActionScope): ToolDefinition[] {
  const all = new Map<string, ToolDefinition>();
  for (const t of createAssistantTools(rt)) all.set(t.name, t);
  for (const t of createAgentActions(rt, scope)) all.set(t.name, t);
  return agent.tools.map((n) => all.get(n)).filter((t): t is ToolDefinition => t !== undefined);
}
