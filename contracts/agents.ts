import { z } from 'zod';
import { line, listEnvelope, listQuery, text, whenField } from './common';

/**
 * Agents (SPEC 2.18, 3.4, 4.9). An agent is defined per account (scripts/agents.ts, the
 * development seed); runs go through the agent pool (workers/agents). WARNING: field names and
 * enums here are public contract and persisted in agent_runs.
 */
export const AGENT_LIMITS = {
  /** SPEC 8: characters of an agent message (and of a run instruction). */
  messageMax: 20_000,
  /** SPEC 8: threadId 1 to 64 letters, digits, `_ . : -`. */
  threadIdPattern: '^[A-Za-z0-9_.:-]{1,64}$',
  /** SPEC 8: usage window. */
  usageDaysMin: 1,
  usageDaysMax: 90,
  /** Runs one usage answer aggregates at most; `truncated` says when the window holds more. */
  usageRunsMax: 10_000,
  /** Messages a thread keeps (user and assistant), oldest dropped first. */
  threadMessagesMax: 40,
} as const;

/** SPEC 3.4. WARNING: persisted. */
export const AGENT_RUN_STATUSES = ['queued', 'running', 'paused', 'completed', 'failed'] as const;
export type AgentRunStatus = (typeof AGENT_RUN_STATUSES)[number];

/** What started a run. WARNING: persisted. */
export const AGENT_RUN_TRIGGERS = ['message', 'run', 'completions'] as const;
export type AgentRunTrigger = (typeof AGENT_RUN_TRIGGERS)[number];

/** SPEC 2.18 approval scopes. WARNING: persisted. */
export const APPROVAL_SCOPES = ['once', 'task', 'always'] as const;
export type ApprovalScope = (typeof APPROVAL_SCOPES)[number];

const THREAD_ID = new RegExp(AGENT_LIMITS.threadIdPattern);
export const ThreadId = z
  .string({ error: 'must be a string' })
  .regex(THREAD_ID, { error: 'must be 1 to 64 letters, digits, _ . : or -' })
  .describe(
    '1 to 64 letters, digits, _ . : -; caller-chosen. Omit it to start a new thread (the answer carries the minted thr_ id).',
  );

const message = text(AGENT_LIMITS.messageMax).min(1, { error: 'must not be empty' });

/** SPEC 2.18 AgentMessageRequest. */
export const AgentMessageRequest = z
  .strictObject({
    message: message.describe(
      `The user message, up to ${AGENT_LIMITS.messageMax} characters. Appended to the thread with the reply.`,
    ),
    threadId: ThreadId.optional(),
  })
  .meta({ id: 'AgentMessageRequest' });
export type AgentMessageRequest = z.output<typeof AgentMessageRequest>;

/**
 * POST /agents/{id}/run (SPEC: "not shown"; ours): a task without a conversational message. The
 * instruction is given to the agent like a message, but only the reply is appended to the thread.
 */
export const AgentRunRequest = z
  .strictObject({
    instruction: message.describe(
      `What the agent should do, up to ${AGENT_LIMITS.messageMax} characters. Not appended to the thread as a user message; the reply is.`,
    ),
    threadId: ThreadId.optional().describe(
      'A thread whose conversation the run sees as history (and whose history gets the reply); omitted: a new thread is minted.',
    ),
  })
  .meta({ id: 'AgentRunRequest' });
export type AgentRunRequest = z.output<typeof AgentRunRequest>;

/** SPEC 2.18 AgentMessageAccepted (also the answer of POST /agents/{id}/run). */
export const AgentMessageAccepted = z
  .object({
    runId: z.string().describe('run_ followed by a random part.'),
    threadId: z.string(),
    agentId: z.string(),
    status: z.enum(['queued']),
    resultUrl: z.string().describe('Poll path: /api/v1/agents/{id}/runs/{runId}/result.'),
  })
  .meta({ id: 'AgentMessageAccepted' });

/** A run's artifact (SPEC 2.18): what it made in the workspace. */
export const AgentRunArtifact = z
  .object({
    kind: z.enum(['project', 'file']),
    title: z.string(),
    url: z.string().meta({ format: 'uri' }).describe('Absolute editor link of the project.'),
    projectId: z.string().optional(),
    fileId: z.string().optional(),
  })
  .meta({ id: 'AgentRunArtifact' });

export const AgentPlanStep = z.object({ slug: z.string(), args: z.record(z.string(), z.unknown()) });

/** SPEC 2.18 pendingApproval. */
export const AgentPendingApproval = z
  .object({
    runId: z.string().describe('The run under review (the paused segment).'),
    actionSlug: z.string().describe('The action waiting for the owner, e.g. send_email.'),
    actionArgs: z.record(z.string(), z.unknown()).describe('Its arguments as the agent planned them.'),
    plan: z.array(AgentPlanStep).describe('This action and the calls planned after it, in order.'),
    reviewToken: z
      .string()
      .regex(/^[a-f0-9]{64}$/)
      .describe('64 hex characters; send it back unchanged with the decision.'),
    availableScopes: z
      .array(z.enum(APPROVAL_SCOPES))
      .describe(
        'once: this call only; task: this action for the rest of this run; always: this action in every later run of this agent.',
      ),
    decisionRecorded: z
      .boolean()
      .describe('true once a decision for this review was recorded (the run is then resuming or done).'),
    approveUrl: z.string().describe('Path of POST /api/v1/agents/{id}/runs/{runId}/approve.'),
  })
  .meta({ id: 'AgentPendingApproval' });

/** One tool call of a run (ours, beyond SPEC 2.18). */
export const AgentRunStep = z
  .object({
    slug: z.string(),
    args: z.record(z.string(), z.unknown()),
    status: z
      .enum(['done', 'rejected', 'failed'])
      .describe('rejected: the owner declined it and it was not done; failed: it answered an error artifact.'),
    artifact: z
      .record(z.string(), z.unknown())
      .describe('The ChatArtifact it produced (type error when it failed or was declined).'),
  })
  .meta({ id: 'AgentRunStep' });

/** SPEC 2.18 AgentRunResult. */
export const AgentRunResult = z
  .object({
    runId: z.string(),
    agentId: z.string(),
    threadId: z.string().nullable(),
    status: z.enum(AGENT_RUN_STATUSES),
    reply: z.string().nullable().describe('Markdown reply once completed.'),
    artifacts: z.array(AgentRunArtifact).describe('Projects the run made.'),
    pendingApproval: AgentPendingApproval.nullable().describe(
      'The latest review of the run: present while paused, and after its decision until the run ends; null otherwise.',
    ),
    error: z.string().nullable(),
    creditsUsed: z.number().int().describe('The run fee (unless refunded) plus what its paid tools charged.'),
    startedAt: z.string().nullable(),
    completedAt: z.string().nullable(),
    pollUrl: z.string().describe('This result: /api/v1/agents/{id}/runs/{runId}/result.'),
    trigger: z.enum(AGENT_RUN_TRIGGERS),
    steps: z.array(AgentRunStep).describe('Every tool call so far, in order.'),
  })
  .meta({ id: 'AgentRunResult' });

/** GET /agents/{id}/runs/{runId} and the items of the runs list. */
export const AgentRunView = z
  .object({
    runId: z.string(),
    agentId: z.string(),
    threadId: z.string(),
    trigger: z.enum(AGENT_RUN_TRIGGERS),
    status: z.enum(AGENT_RUN_STATUSES),
    creditsUsed: z.number().int(),
    pendingApproval: z
      .object({ actionSlug: z.string(), approveUrl: z.string(), decisionRecorded: z.boolean() })
      .nullable()
      .describe('Summary of the review (GET …/result has the reviewToken); null when there is none.'),
    error: z.string().nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    completedAt: z.string().nullable(),
    resultUrl: z.string(),
  })
  .meta({ id: 'AgentRun' });

export const AgentRunList = listEnvelope(AgentRunView).meta({ id: 'AgentRunList' });
export const AgentRunListQuery = listQuery({
  status: z
    .enum(AGENT_RUN_STATUSES, { error: `must be one of ${AGENT_RUN_STATUSES.join(', ')}` })
    .optional()
    .describe('Only runs in this state.'),
});

/** SPEC 2.18 AgentRunApproveRequest. */
export const AgentRunApproveRequest = z
  .strictObject({
    decision: z.enum(['approve', 'reject'], { error: 'must be approve or reject' }),
    reviewToken: z
      .string({ error: 'must be a string' })
      .regex(/^[a-f0-9]{64}$/, { error: 'must be 64 lowercase hex characters, as returned in pendingApproval' })
      .describe('pendingApproval.reviewToken, unchanged.'),
    scope: z
      .enum(APPROVAL_SCOPES, { error: `must be one of ${APPROVAL_SCOPES.join(', ')}` })
      .default('once')
      .describe('Default once; only a scope in availableScopes. A reject always uses once.'),
  })
  .refine((b) => b.decision === 'approve' || b.scope === 'once', {
    error: 'scope: a reject always uses once',
    path: ['scope'],
  })
  .meta({
    id: 'AgentRunApproveRequest',
    ...whenField('decision', 'reject', { properties: { scope: { const: 'once' } } }),
  }); // the refinement above
export type AgentRunApproveRequest = z.output<typeof AgentRunApproveRequest>;

/** SPEC 2.18 AgentRunApproveAccepted. */
export const AgentRunApproveAccepted = z
  .object({
    runId: z.string(),
    decision: z.enum(['approve', 'reject']),
    status: z.enum(['resuming', 'already_recorded']),
  })
  .meta({ id: 'AgentRunApproveAccepted' });

const DAYS_ERROR = `must be an integer between ${AGENT_LIMITS.usageDaysMin} and ${AGENT_LIMITS.usageDaysMax}`;
export const AgentUsageQuery = z.object({
  days: z.coerce
    .number({ error: DAYS_ERROR })
    .int({ error: DAYS_ERROR })
    .min(AGENT_LIMITS.usageDaysMin, { error: DAYS_ERROR })
    .max(AGENT_LIMITS.usageDaysMax, { error: DAYS_ERROR })
    .default(7)
    .describe('Window in days, 1 to 90; default 7.'),
});

/** SPEC 2.18 AgentUsage. */
export const AgentUsage = z
  .object({
    agentId: z.string(),
    days: z.number().int(),
    since: z.string().describe('Start of the window (now minus days).'),
    runs: z.number().int().describe('Runs created in the window (at most 10,000 read; see truncated).'),
    creditsUsed: z.number().int(),
    byStatus: z.record(z.string(), z.number().int()),
    byTrigger: z.record(z.string(), z.number().int()),
    avgDurationMs: z
      .number()
      .int()
      .nullable()
      .describe('Mean of completedAt - startedAt over completed and failed runs; null when none.'),
    lastRunAt: z.string().nullable().describe('createdAt of the newest run in the window.'),
    truncated: z.boolean().describe('true when the window holds more runs than the 10,000 aggregated.'),
  })
  .meta({ id: 'AgentUsage' });

const MODEL = /^agent:[A-Za-z0-9_-]{1,64}$/;
const TextPart = z.object({ type: z.literal('text', { error: 'must be text' }), text: text(AGENT_LIMITS.messageMax) });

/** SPEC 2.18 AgentCompletionRequest. Extra OpenAI fields (temperature, …) are accepted and ignored. */
export const AgentCompletionRequest = z
  .object({
    model: z
      .string({ error: 'must be a string' })
      .regex(MODEL, { error: 'must be agent:<agentId> (letters, digits, _ and -, up to 64)' })
      .describe('agent:<agentId>.'),
    messages: z
      .array(
        z.object({
          role: z.enum(['system', 'user', 'assistant'], { error: 'must be system, user or assistant' }),
          content: z.union([text(AGENT_LIMITS.messageMax), z.array(TextPart).max(100)], {
            error: `must be a string or an array of text parts, up to ${AGENT_LIMITS.messageMax} characters`,
          }),
        }),
        { error: 'must be an array of messages' },
      )
      .min(1, { error: 'must hold at least one message' })
      .max(100, { error: 'must hold at most 100 messages' })
      .describe(
        'Only the last user message is sent to the agent; the agent remembers earlier turns through its thread.',
      ),
    stream: z
      .boolean({ error: 'must be a boolean' })
      .default(false)
      .describe(
        'true: SSE with `: keepalive` comments while the agent works, one chat.completion.chunk with the whole reply, then data: [DONE].',
      ),
    user: line(256)
      .optional()
      .describe(
        'End-user id; doubles as the thread when metadata.thread_id is absent (used as is when it is a valid threadId, else as user_<hash>).',
      ),
    metadata: z.looseObject({ thread_id: ThreadId.optional() }).optional(),
  })
  .meta({ id: 'AgentCompletionRequest' });
export type AgentCompletionRequest = z.output<typeof AgentCompletionRequest>;

/** The `opencharts` extension of a completion (SPEC 2.18; the member keeps that literal name). */
export const AgentCompletionExtension = z.object({
  agentId: z.string(),
  runId: z.string(),
  threadId: z.string(),
  status: z.enum(['completed', 'paused']),
  artifacts: z.array(AgentRunArtifact),
  pendingApproval: z.object({ actionSlug: z.string(), approveUrl: z.string() }).nullable(),
  resultUrl: z.string(),
});

/** What POST /chat/completions answers with stream true (api/agents/agents.routes.ts streamCompletion). */
export const AGENT_COMPLETION_STREAM_DESCRIPTION =
  'stream true: server-sent events (content-type text/event-stream; charset=utf-8, cache-control no-cache, x-accel-buffering no), no `event:` lines. ' +
  '`: keepalive` comment lines at once and every CHAT_KEEPALIVE_MS while the agent works; then one `data: <json>` line, a chat.completion.chunk ' +
  '{id, object: chat.completion.chunk, created, model, choices: [{index: 0, delta: {role: assistant, content}, finish_reason: stop}], usage, opencharts} holding the whole reply; ' +
  'a failed or timed-out run sends `data: {"error": {code, message, type}}` instead (agent_run_failed or timeout); then exactly `data: [DONE]`. ' +
  'stream false: AgentCompletionResponse as application/json.';

/** SPEC 2.18 AgentCompletionResponse (stream false). */
export const AgentCompletionResponse = z
  .object({
    id: z.string().describe('chatcmpl-<runId>.'),
    object: z.literal('chat.completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({ role: z.literal('assistant'), content: z.string() }),
        finish_reason: z.literal('stop'),
      }),
    ),
    usage: z
      .object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() })
      .describe('Raw engine tokens (0 with the local engine); credits are billed separately.'),
    opencharts: AgentCompletionExtension,
  })
  .meta({ id: 'AgentCompletionResponse' });
