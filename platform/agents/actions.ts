import { z } from 'zod';
import { line, text } from '../../contracts/common';
import { ProjectListQuery } from '../../contracts/projects';
import type { ToolDefinition } from '../assistant/tool';
import { isDuplicateKey } from '../infra/mongo';
import { createProjectsService } from '../projects/projects.service';
import type { Runtime } from '../runtime';
import { insertOutboxEmail, type OutboxDoc } from './agents.repository';

/**
 * The agent-only actions, in the ToolDefinition shape of the chat catalogue:
 * - list_projects: a harmless read of the account's projects;
 * - send_email: stores the email in agent_outbox with status `queued_no_transport`. This
 *   deployment has NO mail transport: nothing is sent, and the artifact and the run's reply say so.
 *   The development seed's outreach agent needs the owner's approval for it.
 * Agents may also use chat-catalogue tools (create_notes writes workspace content,
 * create_flowchart, start_research); see agentTools.
 */
export const SEND_EMAIL_LIMITS = { subjectMax: 200, bodyMax: 5000 } as const;

export const NO_TRANSPORT_NOTE =
  'This deployment has no mail transport: the email was stored in the agent outbox (status queued_no_transport) and was not sent.';

/** The run the actions serve: send_email records which agent and run wrote to the outbox. */
export interface ActionScope {
  agentId: string;
  runId: string;
}

export function createAgentActions(rt: Runtime, scope: ActionScope): ToolDefinition[] {
  const projects = createProjectsService(rt);

  const listProjects: ToolDefinition<{ query?: string }> = {
    name: 'list_projects',
    description:
      "List the account's projects, newest change first (up to 20), optionally those whose name contains `query`. Harmless: reads only.",
    input: z.strictObject({ query: line(100).optional() }),
    scope: 'read',
    spends: [],
    async run(args, ctx) {
      const q = ProjectListQuery.parse({ limit: 20, ...(args.query?.trim() ? { q: args.query.trim() } : {}) });
      const page = await projects.list(ctx.account._id, q);
      return {
        type: 'table',
        title: args.query ? `Projects matching "${args.query}"` : 'Projects',
        data: {
          total: page.total,
          projects: page.data.map((p) => ({
            id: p.id,
            name: p.name,
            kind: p.kind,
            projectType: p.projectType,
            openUrl: p.openUrl,
            updatedAt: p.updatedAt,
          })),
        },
      };
    },
  };

  const sendEmail: ToolDefinition<{ to: string; subject: string; body: string }> = {
    name: 'send_email',
    description:
      'Send an email on behalf of the owner (to, subject, body). In this deployment it is stored in the agent outbox and not sent: there is no mail transport.',
    input: z.strictObject({
      to: z.email({ error: 'must be an email address' }).max(254),
      subject: line(SEND_EMAIL_LIMITS.subjectMax),
      body: text(SEND_EMAIL_LIMITS.bodyMax),
    }),
    scope: 'write',
    spends: [],
    async run(args, ctx) {
      // Deterministic per (run, call): a call repeated after a crash finds the stored email.
      const doc: OutboxDoc = {
        _id: ctx.idFor('mail'),
        accountId: ctx.account._id,
        agentId: scope.agentId,
        runId: scope.runId,
        to: args.to,
        subject: args.subject,
        body: args.body,
        status: 'queued_no_transport',
        createdAt: new Date(),
      };
      try {
        await insertOutboxEmail(rt.store, doc);
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      return {
        type: 'platform_action',
        title: `Email to ${args.to}: ${args.subject}`,
        data: {
          action: 'send_email',
          outboxId: doc._id,
          to: args.to,
          subject: args.subject,
          status: 'queued_no_transport',
          sent: false,
          note: NO_TRANSPORT_NOTE,
        },
      };
    },
  };

  return [listProjects, sendEmail];
}
