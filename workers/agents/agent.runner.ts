import { randomBytes } from 'node:crypto';
import type { ChatArtifact } from '../../contracts/conversations';
import type { CreditOperation } from '../../contracts/registry';
import { NO_TRANSPORT_NOTE } from '../../platform/agents/actions';
import {
  createRunLeases,
  createAgentsRepository,
  createThreadsRepository,
  type AgentDoc,
  type ReviewDoc,
  type RunDoc,
  type RunStepDoc,
} from '../../platform/agents/agents.repository';
import { createAgentRuns, type AgentRunMessage } from '../../platform/agents/runs.service';
import { agentTools } from '../../platform/agents/tools';
import { EngineError, type ChatEngine, type EngineMessage, type ToolCall } from '../../platform/assistant/engine';
import { errorArtifact, executeToolCall, toolSpecs, toolsFor } from '../../platform/assistant/execute';
import type { ToolDefinition } from '../../platform/assistant/tool';
import { addCredits, fromUnits, toUnits } from '../../platform/credits/credits';
import { faultPoint } from '../../platform/infra/faults';
import { stableId } from '../../platform/infra/ids';
import { instanceId } from '../../platform/infra/instance';
import type { Logger } from '../../platform/infra/log';
import type { Runtime } from '../../platform/runtime';

/**
 * One agent run, from claim to pause or end (SPEC 3.4). The run document is the state: every
 * engine step and every tool result is checkpointed in it (conditional on this worker's lease)
 * before the next, so a run claimed again after its worker died goes on from its last
 * checkpoint, and a tool call re-executed after a crash makes nothing twice (its ids derive from
 * the run and the step index). A paused run holds no worker: it is left with status paused and
 * no lease, and the approve endpoint publishes it again.
 */

/** Engine steps of one run at most; the last is offered no tools, so a run ends with a reply. */
export const AGENT_MAX_STEPS = 6;
/**
 * Claims of one run per segment at most (each after the first follows a worker that died or
 * failed unexpectedly; an approval starts a new segment); then the run fails.
 */
export const AGENT_MAX_ATTEMPTS = 3;

/** This worker no longer holds the run (its lease expired and another worker claimed it). */
class LeaseLost extends Error {}

export interface RunnerDeps {
  rt: Runtime;
  engine: ChatEngine;
  log: Logger;
  /** Runs this process is working on (a duplicate message for one of them is acked at once). */
  active: Set<string>;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(t);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', stop, { once: true });
  });

/**
 * Handle one agent-pool message: claim the run (queued, or running under an expired lease) with
 * one conditional update, then work it. Paused, finished and unknown runs are acked without work.
 *
 * A run running under another worker's lease is either a duplicate (the sweep published it again
 * while it was worked) or a message redelivered after its worker was killed. The lease tells
 * them apart within one renewal period (a third of the lease): a live holder moves `until`
 * forward, and the message is acked at once, freeing this consumer slot; a dead holder's lease
 * stands still, and this worker waits for it to expire, then claims the run.
 */
export async function handleRunMessage(deps: RunnerDeps, msg: AgentRunMessage, signal: AbortSignal): Promise<void> {
  const leases = createRunLeases(deps.rt.store).forAccount(msg.accountId);
  const leaseMs = deps.rt.config.JOB_LEASE_MS;
  const renewalMs = Math.max(50, Math.floor(leaseMs / 3));
  let seenUntil: number | undefined;
  for (;;) {
    if (signal.aborted) throw signal.reason as Error;
    if (deps.active.has(msg.runId)) return;
    const run = await leases.claim(msg.runId, instanceId, leaseMs);
    if (run) return work(deps, run, signal);
    const cur = await leases.leaseOf(msg.runId);
    if (cur?.status !== 'running' || !cur.lease) {
      if (cur?.status === 'queued') continue; // moved back meanwhile (a decision): claim it
      return;
    }
    const until = cur.lease.until.getTime();
    if (seenUntil !== undefined && until > seenUntil) return; // renewed: its holder is alive
    seenUntil = until;
    await sleep(Math.max(50, Math.min(until - Date.now() + 50, renewalMs + 100)), signal);
  }
}

async function work(deps: RunnerDeps, claimed: RunDoc, outer: AbortSignal): Promise<void> {
  const { rt } = deps;
  const leases = createRunLeases(rt.store);
  const leaseMs = rt.config.JOB_LEASE_MS;
  const lost = new AbortController();
  const signal = AbortSignal.any([outer, lost.signal]);
  deps.active.add(claimed._id);
  const renew = setInterval(
    () => {
      leases
        .renew(claimed._id, instanceId, leaseMs)
        .then((still) => {
          if (!still) lost.abort(new LeaseLost('lease lost'));
        })
        .catch((err: unknown) =>
          deps.log.warn('agent run lease not renewed', { runId: claimed._id, err: err as Error }),
        );
    },
    Math.max(50, Math.floor(leaseMs / 3)),
  );
  try {
    await new RunWork(deps, claimed, signal).drive();
  } catch (err) {
    if (err instanceof LeaseLost || lost.signal.aborted) {
      deps.log.warn('agent run taken over by another worker; this one stops', { runId: claimed._id });
      return;
    }
    // Stopping, or an unexpected failure (the database): let the run be claimed again at once.
    await leases.giveUp(claimed._id, instanceId).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(renew);
    deps.active.delete(claimed._id);
  }
}

const priceOf = (rt: Runtime, def: ToolDefinition | undefined) =>
  def ? Math.max(0, ...def.spends.map((op) => fromUnits(rt.credits.millicreditsFor(op as CreditOperation)))) : 0;

const systemPrompt = (agent: AgentDoc) =>
  [
    `You are ${agent.name}, an agent of this workspace.`,
    agent.description,
    agent.instructions,
    'Use the tools you are offered when they help; answer briefly, naming what you made.',
  ]
    .filter(Boolean)
    .join('\n\n');

/** The calls of the last assistant step that have no result yet, in order. */
function pendingCalls(transcript: EngineMessage[]): ToolCall[] {
  let i = transcript.length - 1;
  const answered = new Set<string>();
  for (; i >= 0; i--) {
    const m = transcript[i]!;
    if (m.role === 'tool') answered.add(m.toolCallId);
    else if (m.role === 'assistant') break;
  }
  const last = transcript[i];
  if (last?.role !== 'assistant' || !last.toolCalls) return [];
  return last.toolCalls.filter((c) => !answered.has(c.id));
}

const argsOf = (call: ToolCall): Record<string, unknown> =>
  call.args && typeof call.args === 'object' && !Array.isArray(call.args) ? (call.args as Record<string, unknown>) : {};

// Length: one agent run: 8 methods share the run document and its leases; the longest, drive (the step loop),
// is 122 lines.
class RunWork {
  private run: RunDoc;
  private readonly leases;

  constructor(
    private readonly deps: RunnerDeps,
    claimed: RunDoc,
    private readonly signal: AbortSignal,
  ) {
    this.run = claimed;
    this.leases = createRunLeases(deps.rt.store);
  }

  /** Store `set` on the run while this worker holds it; LeaseLost otherwise. */
  private async checkpoint(set: Partial<RunDoc>, extra: Record<string, unknown> = {}): Promise<void> {
    const now = new Date();
    if (!(await this.leases.update(this.run._id, instanceId, { ...set, updatedAt: now }, extra)))
      throw new LeaseLost('lease lost');
    this.run = { ...this.run, ...set, updatedAt: now };
  }

  async drive(): Promise<void> {
    const { rt } = this.deps;
    const run = this.run;
    if (run.attempts > AGENT_MAX_ATTEMPTS)
      return this.fail(`the run stopped its worker ${run.attempts - 1} times; given up`);
    const agent = await createAgentsRepository(rt.store).forAccount(run.accountId).get(run.agentId);
    if (!agent) return this.fail('the agent was deleted');
    const account = await rt.accounts.forAccount(run.accountId).get();
    if (!account) return this.fail('the account is gone');
    // One write for both (FerretDB serialises the updates of a collection: fewer is faster).
    const first: Partial<RunDoc> = run.startedAt ? {} : { startedAt: new Date() };
    if (run.history === null) {
      const messages = await createThreadsRepository(rt.store)
        .forAccount(run.accountId)
        .history(run.agentId, run.threadId);
      first.history = messages.map((m) => ({ role: m.role, content: m.content }));
    }
    if (Object.keys(first).length) await this.checkpoint(first);
    const tools = agentTools(rt, agent, { agentId: agent._id, runId: run._id });
    // Offered only what the dispatcher's key may call (SPEC §5); executeToolCall refuses the rest.
    const specs = toolSpecs(toolsFor(tools, this.run.key.scopes));
    const base: EngineMessage[] = [
      { role: 'system', content: systemPrompt(agent) },
      ...(this.run.history ?? []),
      { role: 'user', content: run.instruction },
    ];
    const { millicredits: _c, chargedRefs: _r, refundedJobs: _j, ...authAccount } = account;

    for (;;) {
      this.signal.throwIfAborted();
      const transcript = this.run.transcript;
      const pending = pendingCalls(transcript);
      if (pending.length === 0) {
        const stepIndex = transcript.filter((m) => m.role === 'assistant').length;
        const last = transcript[transcript.length - 1];
        if (stepIndex >= AGENT_MAX_STEPS) return this.complete(last?.role === 'assistant' ? last.content : '');
        const lastStep = stepIndex === AGENT_MAX_STEPS - 1;
        let text = '';
        const calls: ToolCall[] = [];
        const usage = { ...this.run.usage };
        try {
          for await (const ev of this.deps.engine.step({
            messages: [...base, ...transcript],
            tools: lastStep ? [] : specs,
            mode: 'fast',
            stepIndex,
            signal: this.signal,
          })) {
            if (ev.type === 'text-delta') text += ev.delta;
            else if (ev.type === 'tool-call') calls.push(ev.call);
            else if (ev.type === 'usage') {
              usage.inputTokens += ev.inputTokens ?? 0;
              usage.outputTokens += ev.outputTokens ?? 0;
            }
          }
        } catch (err) {
          if (this.signal.aborted) throw err;
          if (err instanceof EngineError) return this.fail(`the engine failed: ${err.message}`);
          throw err;
        }
        const step: EngineMessage = {
          role: 'assistant',
          content: text,
          ...(calls.length && !lastStep ? { toolCalls: calls } : {}),
        };
        // The reply step is stored by the final update itself.
        if (!calls.length || lastStep) return this.complete(text, { transcript: [...transcript, step], usage });
        await this.checkpoint({ transcript: [...transcript, step], usage });
        continue;
      }

      for (let i = 0; i < pending.length; i++) {
        const call = pending[i]!;
        const def = tools.find((t) => t.name === call.name);
        const review = this.run.review;
        const decided =
          review && review.callId === call.id && review.stepIndex === this.run.steps.length ? review.decision : null;
        const granted = agent.alwaysAllowed.includes(call.name) || this.run.taskGrants.includes(call.name);
        if (def && agent.approvals.includes(call.name) && !granted && !decided)
          return this.pause(call, pending.slice(i));

        const stepIndex = this.run.steps.length;
        let artifact: ChatArtifact;
        let status: RunStepDoc['status'];
        let charged = 0;
        if (decided?.decision === 'reject') {
          artifact = errorArtifact(`${call.name} declined`, `the owner declined ${call.name}; it was not done`, {
            tool: call.name,
            code: 'rejected_by_owner',
          });
          status = 'rejected';
        } else {
          const price = priceOf(rt, def);
          if (price > 0 && addCredits(this.run.creditsUsed, price) > agent.creditBudget) {
            const message = `credit budget of ${agent.creditBudget} credits reached`;
            artifact = errorArtifact(`Could not run ${call.name}`, `${message}: ${call.name} costs ${price}`, {
              tool: call.name,
              code: 'credit_budget_reached',
            });
            await this.record(call, artifact, 'failed', 0);
            return this.fail(message);
          }
          const counts = new Map<string, number>();
          artifact = await executeToolCall(tools, call, {
            account: authAccount,
            key: this.run.key,
            requestId: `agent:${this.run._id}`,
            signal: this.signal,
            // Stable per (run, step): a step re-executed after a crash names what it made before.
            idFor: (prefix) => {
              const n = counts.get(prefix) ?? 0;
              counts.set(prefix, n + 1);
              return stableId(prefix, `${this.run._id}\n${stepIndex}${n ? `\n${n}` : ''}`);
            },
          });
          // TESTS ONLY (FAULT_POINT): the worker dies after the tool made something, before the checkpoint.
          faultPoint('agent.after-tool');
          status = artifact.type === 'error' ? 'failed' : 'done';
          if (status === 'done') charged = price;
        }
        await this.record(call, artifact, status, charged);
      }
    }
  }

  private async record(
    call: ToolCall,
    artifact: ChatArtifact,
    status: RunStepDoc['status'],
    charged: number,
  ): Promise<void> {
    const step: RunStepDoc = {
      callId: call.id,
      slug: call.name,
      args: argsOf(call),
      status,
      artifact,
      credits: charged,
      at: new Date(),
    };
    await this.checkpoint({
      transcript: [...this.run.transcript, { role: 'tool', toolCallId: call.id, name: call.name, artifact }],
      steps: [...this.run.steps, step],
      creditsUsed: addCredits(this.run.creditsUsed, charged),
    });
  }

  /** Stop at an action that needs the owner: paused, no lease, the message acked (no worker held). */
  private async pause(call: ToolCall, rest: ToolCall[]): Promise<void> {
    const old = this.run.review;
    const review: ReviewDoc = {
      callId: call.id,
      actionSlug: call.name,
      actionArgs: argsOf(call),
      plan: rest.map((c) => ({ slug: c.name, args: argsOf(c) })),
      reviewToken: randomBytes(32).toString('hex'),
      availableScopes: ['once', 'task', 'always'],
      decision: null,
      segment: this.run.segment,
      stepIndex: this.run.steps.length,
      at: new Date(),
    };
    const pastReviews = old?.decision
      ? [
          ...this.run.pastReviews,
          { reviewToken: old.reviewToken, decision: old.decision.decision, scope: old.decision.scope },
        ].slice(-20)
      : this.run.pastReviews;
    const paused = await this.leases.update(this.run._id, instanceId, {
      status: 'paused',
      review,
      pastReviews,
      lease: null,
      updatedAt: new Date(),
    });
    if (!paused) throw new LeaseLost('lease lost');
    this.deps.log.info('agent run paused for approval', { runId: this.run._id, action: call.name });
  }

  private async complete(text: string, last: Partial<RunDoc> = {}): Promise<void> {
    const { rt } = this.deps;
    const run = this.run;
    const notes: string[] = [];
    for (const s of run.steps) {
      if (s.status === 'rejected')
        notes.push(
          `Not done: the owner declined ${s.slug}${s.slug === 'send_email' && typeof s.args.to === 'string' ? ` to ${s.args.to}` : ''}, so that action was not taken.`,
        );
    }
    if (run.steps.some((s) => s.slug === 'send_email' && s.status === 'done') && !/mail transport/i.test(text))
      notes.push(NO_TRANSPORT_NOTE);
    const reply = [text.trim() || 'Done.', ...notes].join('\n\n');
    const messages =
      run.trigger === 'run'
        ? [{ role: 'assistant' as const, content: reply }]
        : [
            { role: 'user' as const, content: run.instruction },
            { role: 'assistant' as const, content: reply },
          ];
    await createThreadsRepository(rt.store)
      .forAccount(run.accountId)
      .append(run.agentId, run.threadId, run._id, messages);
    await this.finish({ ...last, status: 'completed', reply });
  }

  /**
   * The run fails. Its fee is refunded only when no tool call delivered work (no step done): a
   * run that made something before it failed was worked for, and its fee stands (the tools'
   * own charges stand in any case: each delivered what it charged for).
   */
  private async fail(error: string): Promise<void> {
    const { rt } = this.deps;
    const run = this.run;
    if (run.feeRefunded || run.steps.some((s) => s.status === 'done')) return this.finish({ status: 'failed', error });
    // Refund first (idempotent per run), then the state: a crash between refunds nothing twice.
    await rt.credits.refund({
      accountId: run.accountId,
      operation: 'agent_run',
      millicredits: toUnits(run.fee),
      jobId: run._id,
    });
    await this.finish({
      status: 'failed',
      error,
      feeRefunded: true,
      creditsUsed: addCredits(run.creditsUsed, -run.fee),
    });
  }

  private async finish(set: Partial<RunDoc>): Promise<void> {
    const now = new Date();
    const r = await this.leases.release(this.run._id, instanceId, { ...set, completedAt: now, updatedAt: now });
    if (!r) throw new LeaseLost('lease lost');
    this.deps.log.info('agent run finished', { runId: r._id, status: r.status, steps: r.steps.length });
    try {
      await createAgentRuns(this.deps.rt).announce(r);
    } catch (err) {
      this.deps.log.warn('agent run event not emitted; the sweep emits it', { runId: r._id, err: err as Error });
    }
  }
}
