/**
 * Define agents for an account (there is no public endpoint to create one; SPEC 4.9 has none).
 *
 *   npm run agents -- list --account acct_development
 *   npm run agents -- create --account acct_development --name "Launch helper" \
 *        --tools list_projects,create_notes,send_email --approve send_email --budget 50 \
 *        [--instructions "…"] [--description "…"] [--id agt_launch]
 *   npm run agents -- seed --account acct_development      # the two development agents
 *
 * --tools names chat-catalogue tools (create_notes, create_flowchart, start_research, …) and agent
 * actions (list_projects, send_email); --approve lists those that need the owner's approval before
 * each call; --budget is the credits one run may use, the run fee included. With --id an existing
 * agent of the account is updated in place.
 */
import { parseArgs } from 'node:util';
import { fromUnits } from '../platform/credits/credits';
import { createAgentsRepository } from '../platform/agents/agents.repository';
import { seedDevAgents } from '../platform/agents/seed';
import { agentToolNames } from '../platform/agents/tools';
import { loadConfig } from '../platform/infra/config';
import { createLogger } from '../platform/infra/log';
import { createRuntime } from '../platform/runtime';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    account: { type: 'string', default: 'acct_development' },
    name: { type: 'string' },
    id: { type: 'string' },
    description: { type: 'string', default: '' },
    instructions: { type: 'string' },
    tools: { type: 'string', default: '' },
    approve: { type: 'string', default: '' },
    budget: { type: 'string', default: '50' },
  },
});

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
const fail = (message: string): never => {
  console.error(`agents: ${message}`);
  process.exit(2);
};

const config = loadConfig();
const rt = await createRuntime(config, createLogger('warn', { service: 'agents-cli' }));
try {
  const accountId = values.account!;
  if (!(await rt.accounts.forAccount(accountId).get())) fail(`no account ${accountId}`);
  const mine = createAgentsRepository(rt.store).forAccount(accountId);
  const command = positionals[0] ?? 'list';
  if (command === 'create') {
    if (!values.name) fail('--name is required');
    const known = new Set(agentToolNames(rt));
    const tools = list(values.tools!);
    const approvals = list(values.approve!);
    if (!tools.length) fail(`--tools is required; one or more of ${[...known].join(', ')}`);
    for (const t of [...tools, ...approvals])
      if (!known.has(t)) fail(`unknown tool ${t}; known: ${[...known].join(', ')}`);
    for (const a of approvals) if (!tools.includes(a)) fail(`--approve ${a}: not among --tools`);
    const budget = Number(values.budget);
    const fee = fromUnits(rt.credits.millicreditsFor('agent_run'));
    if (!Number.isInteger(budget) || budget < fee) fail(`--budget must be an integer of at least the run fee (${fee})`);
    if (values.id !== undefined && !/^agt_[A-Za-z0-9_-]{1,60}$/.test(values.id))
      fail('--id must be agt_ followed by letters, digits, _ or -');
    const agent = await mine.upsert({
      id: values.id,
      name: values.name!,
      description: values.description,
      instructions: values.instructions ?? `You are ${values.name}. Use your tools to do what the owner asks.`,
      tools,
      approvals,
      creditBudget: budget,
    });
    console.log(
      JSON.stringify(
        {
          id: agent._id,
          name: agent.name,
          tools: agent.tools,
          approvals: agent.approvals,
          creditBudget: agent.creditBudget,
        },
        null,
        2,
      ),
    );
  } else if (command === 'seed') {
    for (const a of await seedDevAgents(rt.store, accountId)) console.log(`${a._id}  ${a.name}`);
  } else if (command === 'list') {
    for (const a of await mine.list()) {
      console.log(
        `${a._id}  ${a.name}  tools=${a.tools.join(',')}  approvals=${a.approvals.join(',') || '-'}  always=${a.alwaysAllowed.join(',') || '-'}  budget=${a.creditBudget}`,
      );
    }
  } else {
    fail(`unknown command ${command}: list, create or seed`);
  }
} finally {
  await rt.close();
}
