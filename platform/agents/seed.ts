import type { Store } from '../infra/mongo';
import { createAgentsRepository, type AgentDefinition, type AgentDoc } from './agents.repository';

/**
 * The two agents of the development account (scripts/bootstrap.ts). Stable ids, so the README's
 * curl examples work on every development database; seeding again updates them in place (the
 * owner's `always` grants are kept).
 */
export const DEV_AGENTS: readonly (AgentDefinition & { id: string })[] = [
  {
    id: 'agt_research',
    name: 'Research assistant',
    description: 'Researches a question and keeps notes in the workspace.',
    instructions:
      'Start research jobs for questions worth a report, write notes that summarise what you found or planned, and look up existing projects before making new ones.',
    tools: ['start_research', 'create_notes', 'list_projects'],
    approvals: [],
    creditBudget: 50,
  },
  {
    id: 'agt_outreach',
    name: 'Outreach agent',
    description: 'Drafts and sends outreach emails about workspace projects.',
    instructions:
      "Write short, friendly emails about the projects the owner names. Every email needs the owner's approval before it is sent. Keep notes of what you sent.",
    tools: ['list_projects', 'create_notes', 'send_email'],
    approvals: ['send_email'],
    creditBudget: 20,
  },
];

export async function seedDevAgents(store: Store, accountId: string): Promise<AgentDoc[]> {
  const mine = createAgentsRepository(store).forAccount(accountId);
  const out: AgentDoc[] = [];
  for (const def of DEV_AGENTS) out.push(await mine.upsert(def));
  return out;
}
