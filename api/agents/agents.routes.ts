import { createHash } from 'node:crypto';
import { Router, type Response } from 'express';
import type { z } from 'zod';
import { AGENT_LIMITS, type AgentCompletionExtension, type AgentCompletionRequest } from '../../contracts/agents';
import { endpoints } from '../../contracts/endpoints';
import { createAgentRuns, runArtifacts, runPaths, toRunResult, toRunView } from '../../platform/agents/runs.service';
import type { RunDoc } from '../../platform/agents/agents.repository';
import { AppError } from '../../platform/infra/errors';
import { stableId } from '../../platform/infra/ids';
import type { Runtime } from '../../platform/runtime';
import type { AuthContext } from '../http/context';
import { abortWhenClientLeaves } from '../http/client-gone';
import { mount, type RouteDeps } from '../http/route';

const THREAD_ID = new RegExp(AGENT_LIMITS.threadIdPattern);

/** The thread of a completion: metadata.thread_id, else `user` (hashed when it is not a valid threadId), else none (minted). */
export function completionThread(body: AgentCompletionRequest): string | undefined {
  if (body.metadata?.thread_id) return body.metadata.thread_id;
  if (body.user === undefined || body.user === '') return undefined;
  if (THREAD_ID.test(body.user)) return body.user;
  return `user_${createHash('sha256').update(body.user).digest('hex').slice(0, 32)}`;
}

/** The content of the last user message (text parts joined), or a 400 naming messages. */
export function lastUserMessage(body: AgentCompletionRequest): string {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const m = body.messages[i]!;
    if (m.role !== 'user') continue;
    const content = typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('\n');
    if (!content.trim())
      throw new AppError('validation_error', `messages[${i}].content: the last user message is empty`);
    if (content.length > AGENT_LIMITS.messageMax)
      throw new AppError(
        'validation_error',
        `messages[${i}].content: must be at most ${AGENT_LIMITS.messageMax} characters`,
      );
    return content;
  }
  throw new AppError('validation_error', 'messages: must hold a user message (only the last one is sent to the agent)');
}

/** Idempotency-Key values: 1 to 255 visible ASCII characters, as for every other route. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * POST /chat/completions reads Idempotency-Key itself rather than through the route framework:
 * its answer may be a stream (which a stored response cannot replay) and may wait minutes. The
 * key names the run instead: a retry with the same key (streamed or not) starts nothing and is
 * not billed; it waits for the same run and answers from it.
 */
function completionKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!IDEMPOTENCY_KEY.test(raw))
    throw new AppError('validation_error', 'Idempotency-Key: must be 1 to 255 visible ASCII characters');
  return raw;
}

/** What a completion says: the reply, or for a paused run which action waits and where to approve it. */
function completionOf(run: RunDoc, model: string) {
  const paths = runPaths(run.agentId, run._id);
  const paused = run.status === 'paused' && run.review;
  const content = paused
    ? `The run paused for the owner's approval of ${run.review!.actionSlug} (approve or reject at POST ${paths.approve}; GET ${paths.result} has the reviewToken).`
    : (run.reply ?? '');
  const opencharts: z.infer<typeof AgentCompletionExtension> = {
    agentId: run.agentId,
    runId: run._id,
    threadId: run.threadId,
    status: paused ? 'paused' : 'completed',
    artifacts: runArtifacts(run),
    pendingApproval: paused ? { actionSlug: run.review!.actionSlug, approveUrl: paths.approve } : null,
    resultUrl: paths.result,
  };
  const prompt = run.usage?.inputTokens ?? 0;
  const completion = run.usage?.outputTokens ?? 0;
  return {
    id: `chatcmpl-${run._id}`,
    created: Math.floor(run.createdAt.getTime() / 1000),
    model,
    content,
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    opencharts,
  };
}

/**
 * `x-should-retry: false`: OpenAI clients retry 5xx answers on their own, and each retry would
 * start (and charge) another run, while this one goes on (504) or was refunded (502).
 */
const NO_RETRY = { 'x-should-retry': 'false' };
// Ids as separate words: error messages clip any unbroken run of more than 64 characters.
const failedRun = (run: RunDoc) =>
  new AppError(
    'agent_run_failed',
    `the agent run ${run._id} of agent ${run.agentId} failed: ${run.error ?? 'unknown error'}; ${run.feeRefunded ? 'its fee was refunded' : 'its fee stands (its tools had delivered work before it failed)'}`,
    { headers: NO_RETRY },
  );
const timedOut = (run: RunDoc, ms: number) =>
  new AppError(
    'timeout',
    `the agent run ${run._id} of agent ${run.agentId} did not complete or pause within ${ms} ms; it goes on: poll its result at GET /agents/{id}/runs/{runId}/result`,
    { headers: NO_RETRY },
  );

/** Agents (SPEC 4.9, 2.18, 3.4): runs, messages, approvals, usage, and POST /chat/completions. */
export function agentsRoutes(rt: Runtime, deps: RouteDeps): Router {
  const r = Router();
  const runs = createAgentRuns(rt);
  const account = (ctx: { auth: { account: { _id: string } } }) => ctx.auth.account._id;
  const keyOf = (ctx: { auth: AuthContext }) => ({
    scopes: ctx.auth.key.scopes,
    folderPins: ctx.auth.key.folderPins ?? [],
  });

  // Idempotency-Key (the route framework): the run id derives from the key's record, so a retry
  // after a lost answer or a crash finds the run the first attempt stored and is not billed again.
  const repeatable = (ctx: { req: { get(h: string): string | undefined } }) =>
    ctx.req.get('idempotency-key') !== undefined;

  /** POST /agents/{id}/messages and /agents/{id}/run: a run accepted (charged once, SPEC 4.9). */
  const startRun = async (
    ctx: Parameters<typeof account>[0] &
      Parameters<typeof keyOf>[0] &
      Parameters<typeof repeatable>[0] & {
        params: Record<string, string | undefined>;
        body: { threadId?: string };
        requestId: string;
        idFor(prefix: string): string;
        charged(millicredits: number): void;
      },
    trigger: 'message' | 'run',
    instruction: string,
  ) => {
    const {
      run: _run,
      charged,
      ...accepted
    } = await runs.accept({
      accountId: account(ctx),
      agentId: ctx.params.id!,
      trigger,
      instruction,
      threadId: ctx.body.threadId,
      requestId: ctx.requestId,
      key: keyOf(ctx),
      runId: ctx.idFor('run'),
      repeatable: repeatable(ctx),
    });
    ctx.charged(charged);
    return accepted;
  };
  mount(r, endpoints.messageAgent, (ctx) => startRun(ctx, 'message', ctx.body.message), deps);

  mount(r, endpoints.runAgent, (ctx) => startRun(ctx, 'run', ctx.body.instruction), deps);

  mount(r, endpoints.listAgentRuns, (ctx) => runs.list(account(ctx), ctx.params.id!, ctx.query), deps);
  mount(
    r,
    endpoints.getAgentRun,
    async (ctx) => toRunView(await runs.get(account(ctx), ctx.params.id!, ctx.params.runId!)),
    deps,
  );
  mount(
    r,
    endpoints.getAgentRunResult,
    async (ctx) => toRunResult(await runs.get(account(ctx), ctx.params.id!, ctx.params.runId!)),
    deps,
  );
  mount(
    r,
    endpoints.approveAgentRun,
    (ctx) => runs.approve(account(ctx), ctx.params.id!, ctx.params.runId!, ctx.body),
    deps,
  );
  mount(r, endpoints.getAgentUsage, (ctx) => runs.usage(account(ctx), ctx.params.id!, ctx.query.days), deps);

  mount(
    r,
    endpoints.chatCompletions,
    async (ctx) => {
      const body = ctx.body;
      const agentId = body.model.slice('agent:'.length);
      const instruction = lastUserMessage(body);
      const idem = completionKey(ctx.req.get('idempotency-key'));
      const accountId = account(ctx);
      const { run, charged } = await runs.accept({
        accountId,
        agentId,
        trigger: 'completions',
        instruction,
        threadId: completionThread(body),
        requestId: ctx.requestId,
        key: keyOf(ctx),
        ...(idem ? { runId: stableId('run', `completions\n${accountId}\n${idem}`), repeatable: true } : {}),
      });
      if (
        charged === 0 &&
        (run.agentId !== agentId || run.instruction !== instruction || run.trigger !== 'completions')
      ) {
        throw new AppError(
          'idempotency_key_reused',
          'Idempotency-Key: already used with a different request (another agent or last user message)',
        );
      }
      ctx.charged(charged);
      const waitMs = rt.config.AGENT_RUN_WAIT_MS;
      const done = ['completed', 'paused', 'failed'] as const;

      if (!body.stream) {
        const closed = new AbortController();
        abortWhenClientLeaves(ctx.res, closed);
        const end = await runs.waitFor(run.accountId, run._id, done, waitMs, closed.signal);
        if (!end) throw timedOut(run, waitMs);
        if (end.status === 'failed') throw failedRun(end);
        const c = completionOf(end, body.model);
        return {
          id: c.id,
          object: 'chat.completion',
          created: c.created,
          model: c.model,
          choices: [{ index: 0, message: { role: 'assistant', content: c.content }, finish_reason: 'stop' }],
          usage: c.usage,
          opencharts: c.opencharts,
        };
      }
      await streamCompletion(ctx.res, {
        waitMs,
        keepaliveMs: rt.config.CHAT_KEEPALIVE_MS,
        wait: (signal) => runs.waitFor(run.accountId, run._id, done, waitMs, signal),
        run,
        model: body.model,
      });
      return undefined;
    },
    deps,
  );
  return r;
}

/**
 * stream true: SSE with `: keepalive` comments every keepaliveMs while the agent works, then one
 * chat.completion.chunk holding the whole reply (and `opencharts`), then exactly `data: [DONE]`.
 * A failed or timed-out run sends `data: {"error": {code, message}}` (what OpenAI clients raise),
 * then [DONE]. A client that goes away stops the wait; the run goes on.
 */
async function streamCompletion(
  res: Response,
  o: {
    waitMs: number;
    keepaliveMs: number;
    wait: (signal: AbortSignal) => Promise<RunDoc | null>;
    run: RunDoc;
    model: string;
  },
) {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  const closed = new AbortController();
  abortWhenClientLeaves(res, closed);
  res.write(': keepalive\n\n');
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), o.keepaliveMs);
  let end: RunDoc | null;
  try {
    end = await o.wait(closed.signal);
  } finally {
    clearInterval(keepalive);
  }
  if (closed.signal.aborted) {
    res.end(); // a no-op on the closed socket; the audit entry is written at the end
    return;
  }
  const data = (v: unknown) => res.write(`data: ${JSON.stringify(v)}\n\n`);
  if (!end || end.status === 'failed') {
    const err = end ? failedRun(end) : timedOut(o.run, o.waitMs);
    data({ error: { code: err.code, message: err.message, type: err.code } });
  } else {
    const c = completionOf(end, o.model);
    data({
      id: c.id,
      object: 'chat.completion.chunk',
      created: c.created,
      model: c.model,
      choices: [{ index: 0, delta: { role: 'assistant', content: c.content }, finish_reason: 'stop' }],
      usage: c.usage,
      opencharts: c.opencharts,
    });
  }
  res.write('data: [DONE]\n\n');
  res.end();
}
