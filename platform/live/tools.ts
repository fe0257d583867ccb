import { z } from 'zod';
import { line } from '../../contracts/common';
import type { ChatArtifact } from '../../contracts/conversations';
import { LIVE_ACTIONS, type LiveAction, type LiveClientTool } from '../../contracts/live';
import { ProjectListQuery } from '../../contracts/projects';
import type { CreditOperation } from '../../contracts/registry';
import { createAssistantTools } from '../assistant/tools';
import { executeToolCall, mayCall, notAllowedMessage } from '../assistant/execute';
import type { ToolContext, ToolDefinition } from '../assistant/tool';
import { fromUnits } from '../credits/credits';
import { AppError } from '../infra/errors';
import { COLLECTIONS } from '../infra/mongo';
import { HOLD_GRACE_MS } from '../credits/paid-call';
import { createProjectsService } from '../projects/projects.service';
import type { Runtime } from '../runtime';
import { formatIssues } from '../infra/validation';
import { createLiveMemories } from './memory.repository';

/** Live action → the chat catalogue tool it runs (the same code as POST /chat's tools). */
export const ASSISTANT_TOOL_OF: Partial<Record<LiveAction, string>> = {
  search_web: 'web_search',
  create_presentation: 'create_presentation',
  create_notes: 'create_notes',
  create_document: 'create_document',
  create_flowchart: 'create_flowchart',
  add_flowchart_steps: 'add_flowchart_steps',
  create_whiteboard: 'create_whiteboard',
  generate_image: 'generate_image',
};

/**
 * What each action makes, named before it runs: the hold's delivery record. The tool's first id
 * of `prefix` (ctx.idFor) is the document's _id, so a crash between the tool's write and the
 * capture is settled as captured when that document exists. Actions absent here make nothing
 * identifiable (search_web, list_projects, get_account, recall: reads; forget: a delete;
 * add_flowchart_steps: an update of an existing flowchart): a hold a crash left is refunded,
 * which is the safe side, since no new document shows the user got something for it.
 */
const DELIVERED_BY: Partial<Record<LiveAction, { collection: string; prefix: string }>> = {
  create_presentation: { collection: COLLECTIONS.projects, prefix: 'prj' },
  create_notes: { collection: COLLECTIONS.projects, prefix: 'prj' },
  create_document: { collection: COLLECTIONS.projects, prefix: 'prj' },
  create_flowchart: { collection: COLLECTIONS.projects, prefix: 'prj' },
  create_whiteboard: { collection: COLLECTIONS.projects, prefix: 'prj' },
  generate_image: { collection: COLLECTIONS.assistantResults, prefix: 'img' },
  remember: { collection: COLLECTIONS.liveMemories, prefix: 'mem' },
};

/** ctx.idFor whose first id of `prefix` is known before the tool runs (later ids as ctx.idFor makes them). */
function predictingIds(ctx: ToolContext, prefix: string): { id: string; ctx: ToolContext } {
  const id = ctx.idFor(prefix);
  let given = false;
  return {
    id,
    ctx: {
      ...ctx,
      idFor: (p) => {
        if (p !== prefix || given) return ctx.idFor(p);
        given = true;
        return id;
      },
    },
  };
}

/** How long a live_action hold may stay pending before the scheduler releases it. */
const ACTION_HOLD_MS = 120_000 + HOLD_GRACE_MS;

/** The sentence to speak for a tool's artifact. */
export function lineFor(_action: string, a: ChatArtifact): string {
  if (a.type === 'error')
    return `Sorry, I could not do that: ${String(a.data?.message ?? a.title)}.`.replace(/\.\.$/, '.');
  const said = a.data?.line;
  if (typeof said === 'string') return said;
  const kind = a.type === 'presentation' ? 'deck' : a.type === 'notes' ? 'notes' : a.type.replace(/_/g, ' ');
  return `Done: I made the ${kind} "${a.title}"${a.openUrl ? '; it is in your projects' : ''}.`;
}

/** Live-only server tools: projects, account and memory (artifact type platform_action, data.action names the tool). */
function liveOnlyTools(rt: Runtime): ToolDefinition[] {
  const projects = createProjectsService(rt);
  const memories = createLiveMemories(rt.store);
  const art = (action: string, title: string, lineText: string, data: Record<string, unknown>): ChatArtifact => ({
    type: 'platform_action',
    title,
    data: { action, line: lineText, ...data },
  });
  return [
    {
      name: 'list_projects',
      description: "List the user's most recently changed projects (name, type, link).",
      input: z.strictObject({
        limit: z
          .number({ error: 'must be a number' })
          .int({ error: 'must be an integer' })
          .min(1, { error: 'must be at least 1' })
          .max(20, { error: 'must be at most 20' })
          .optional(),
      }),
      scope: 'read',
      spends: [],
      async run(args: { limit?: number }, ctx) {
        const page = await projects.list(ctx.account._id, ProjectListQuery.parse({ limit: String(args.limit ?? 5) }));
        const items = page.data.map((p) => ({ id: p.id, name: p.name, type: p.projectType, openUrl: p.openUrl }));
        const names = items.map((p) => p.name);
        const said = items.length
          ? `You have ${page.total} project${page.total === 1 ? '' : 's'}; the latest ${names.length === 1 ? 'is' : 'are'} ${names.join(', ')}.`
          : 'You have no projects yet.';
        return art('list_projects', 'Your projects', said, { projects: items, total: page.total });
      },
    },
    {
      name: 'get_account',
      description: "The user's plan and credit balance.",
      input: z.strictObject({}),
      scope: 'read',
      spends: [],
      async run(_args, ctx) {
        const balance = fromUnits(await rt.credits.balance(ctx.account._id));
        return art(
          'get_account',
          'Your account',
          `You are on the ${ctx.account.plan} plan with ${Math.floor(balance * 100) / 100} credits.`,
          { plan: ctx.account.plan, balance },
        );
      },
    },
    {
      name: 'remember',
      description: 'Remember a fact the user asked to keep for later conversations.',
      input: z.strictObject({ text: line(500).trim().min(1, { error: 'must not be empty' }) }),
      scope: 'write',
      spends: [],
      async run(args: { text: string }, ctx) {
        const m = await memories.forAccount(ctx.account._id).remember(args.text, ctx.idFor('mem'));
        return art('remember', 'Remembered', `I will remember that ${args.text.replace(/[.!]+$/, '')}.`, {
          memoryId: m.id,
          text: m.text,
        });
      },
    },
    {
      name: 'recall',
      description: 'Recall what the user asked to remember, optionally matching a query.',
      input: z.strictObject({ query: line(200).trim().optional() }),
      scope: 'read',
      spends: [],
      async run(args: { query?: string }, ctx) {
        const found = await memories.forAccount(ctx.account._id).recall(args.query);
        const said = found.length
          ? `I remember: ${found.map((m) => m.text.replace(/[.!]+$/, '')).join('; ')}.`
          : args.query
            ? `I have nothing remembered about ${args.query}.`
            : 'I have nothing remembered yet.';
        return art('recall', 'Memories', said, { memories: found });
      },
    },
    {
      name: 'forget',
      description: 'Forget one remembered fact by its memory id.',
      input: z.strictObject({ memoryId: line(128).trim().min(1, { error: 'must not be empty' }) }),
      scope: 'write',
      spends: [],
      async run(args: { memoryId: string }, ctx) {
        if (!(await memories.forAccount(ctx.account._id).forget(args.memoryId)))
          throw new AppError('not_found', `memoryId: no memory ${args.memoryId.slice(0, 64)}`);
        return art('forget', 'Forgotten', 'Done, I have forgotten it.', { memoryId: args.memoryId });
      },
    },
  ];
}

export interface LiveTools {
  /** The server tools by live action name, each charged live_action through a hold (the same code for POST /live/action and the realtime engine). */
  defs: ToolDefinition[];
  /**
   * One action for POST /live/action: a key whose scopes do not cover the action's tool is refused
   * (403 forbidden, SPEC §5) before its params are read, nothing run or charged.
   */
  run(
    action: LiveAction,
    params: unknown,
    ctx: ToolContext,
  ): Promise<{ ok: boolean; line: string; artifacts: ChatArtifact[]; charged: number; code?: string }>;
  /** The actions a key with `scopes` may run, in LIVE_ACTIONS order (what a session offers its assistant). */
  allowed(scopes: readonly string[]): LiveAction[];
  /** Credits the call that answered this artifact kept (live_action plus a media tool's own price); 0 when refunded. */
  chargedFor(artifact: ChatArtifact): number;
}

/**
 * The live server tools: the chat catalogue's tools under their live names plus the live-only
 * ones, each wrapped so that it is charged live_action only when it succeeds: a hold before the
 * tool runs (402 refuses before anything runs), captured when it answers a non-error artifact,
 * released otherwise. Media tools charge their own price on top (generate_image: image).
 */
export function createLiveTools(rt: Runtime): LiveTools {
  const chat = new Map(createAssistantTools(rt).map((d) => [d.name, d]));
  const own = new Map(liveOnlyTools(rt).map((d) => [d.name, d]));
  const base = LIVE_ACTIONS.map((action): ToolDefinition => {
    const d = own.get(action) ?? chat.get(ASSISTANT_TOOL_OF[action] ?? '');
    if (!d) throw new Error(`live action ${action} has no tool`);
    return { ...d, name: action };
  });
  const charged = new WeakMap<ChatArtifact, number>();
  const defs = base.map(
    (d): ToolDefinition => ({
      ...d,
      async run(args, callCtx) {
        const amount = rt.credits.millicreditsFor('live_action');
        const made = DELIVERED_BY[d.name as LiveAction];
        const predicted = made ? predictingIds(callCtx, made.prefix) : null;
        const ctx = predicted?.ctx ?? callCtx;
        const deliveredBy = made && predicted ? { collection: made.collection, id: predicted.id } : undefined;
        const hold = await rt.credits.hold({
          accountId: ctx.account._id,
          operation: 'live_action',
          millicredits: amount,
          requestId: ctx.requestId,
          ttlMs: ACTION_HOLD_MS,
          deliveredBy,
        });
        let artifact: ChatArtifact;
        try {
          artifact = await d.run(args, ctx);
        } catch (err) {
          await rt.credits.settle(hold);
          throw err;
        }
        if (artifact.type === 'error') {
          // Settled like a crash: kept only if the tool made its document before it failed.
          if ((await rt.credits.settle(hold)) === 'captured') charged.set(artifact, amount);
          return artifact;
        }
        await rt.credits.capture(hold);
        const own = d.spends.reduce((n, op) => n + rt.credits.millicreditsFor(op as CreditOperation), 0);
        charged.set(artifact, amount + own);
        return artifact;
      },
    }),
  );

  return {
    defs,
    chargedFor: (artifact) => charged.get(artifact) ?? 0,
    allowed: (scopes) => LIVE_ACTIONS.filter((a) => mayCall(defs.find((d) => d.name === a)!, scopes)),
    async run(action, params, ctx) {
      const def = defs.find((d) => d.name === action)!;
      if (!mayCall(def, ctx.key.scopes)) throw new AppError('forbidden', `action: ${notAllowedMessage(def)}`);
      const parsed = def.input.safeParse(params ?? {});
      if (!parsed.success)
        throw new AppError(
          'validation_error',
          formatIssues(parsed.error.issues.map((i) => ({ ...i, path: ['params', ...i.path] }))),
        );
      const artifact = await executeToolCall(defs, { id: 'action', name: action, args: parsed.data }, ctx);
      const code = artifact.type === 'error' ? String(artifact.data?.code ?? 'tool_failed') : undefined;
      if (code === 'insufficient_credits')
        throw new AppError(
          'insufficient_credits',
          String(artifact.data?.message ?? 'the balance cannot cover this action; nothing was run'),
        );
      return {
        ok: artifact.type !== 'error',
        line: lineFor(action, artifact),
        artifacts: [artifact],
        charged: charged.get(artifact) ?? 0,
        ...(code ? { code } : {}),
      };
    },
  };
}

/** Client-run tools: what the assistant is told about each (the client answers tool_result). */
export const CLIENT_TOOL_SPECS: Record<LiveClientTool, { description: string; input: z.ZodType }> = {
  get_device_status: {
    description: 'Ask the robot for its own status (battery, volume, connectivity); the robot answers.',
    input: z.strictObject({}),
  },
  set_volume: {
    description: "Set the robot's speaker volume (0 to 100).",
    input: z.strictObject({ level: z.number().int().min(0).max(100) }),
  },
};
