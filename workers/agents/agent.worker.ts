import { z } from 'zod';
import type { AgentRunMessage } from '../../platform/agents/runs.service';
import type { ChatEngine } from '../../platform/assistant/engine';
import { createChatEngine } from '../../platform/assistant/engines/index';
import type { Runtime } from '../../platform/runtime';
import type { ConsumerDefinition } from '../pool/consumer';
import { handleRunMessage } from './agent.runner';

/** The agent pool message (platform/agents/runs.service.ts). */
export const AgentRunMessageSchema = z.object({
  runId: z.string().min(1).max(128),
  accountId: z.string().min(1).max(128),
});

/**
 * The agent pool: runs agents with leases (workers/agents/agent.runner.ts). `engine`
 * replaces the deployment's CHAT_ENGINE (tests script one).
 */
export function agentWorker(rt: Runtime, opts: { engine?: ChatEngine } = {}): ConsumerDefinition<AgentRunMessage> {
  const engine = opts.engine ?? createChatEngine(rt.config);
  const active = new Set<string>();
  return {
    pool: 'agent',
    input: AgentRunMessageSchema,
    handle: (msg, ctx) => handleRunMessage({ rt, engine, log: ctx.log, active }, msg, ctx.signal),
  };
}
