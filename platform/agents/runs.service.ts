import { timingSafeEqual } from 'node:crypto';
import type { z } from 'zod';
import type {
  AgentMessageAccepted,
  AgentRunApproveRequest,
  AgentRunResult,
  AgentRunStatus,
  AgentRunTrigger,
  AgentRunView,
  AgentUsage,
} from '../../contracts/agents';
import { AGENT_LIMITS } from '../../contracts/agents';
import type { Scope } from '../../contracts/registry';
import { fromUnits, toUnits } from '../credits/credits';
import { AppError, notFound } from '../infra/errors';
import { emitEvent } from '../events/events';
import { newId } from '../infra/ids';
import { mapPage } from '../infra/lists';
import { COLLECTIONS, isDuplicateKey } from '../infra/mongo';
import type { Runtime } from '../runtime';
import { createAgentsRepository, ensureAgentIndexes, type RunDoc } from './agents.repository';
import { createRunsRepository } from './runs.repository';

/**
 * Agent runs as the API sees them (SPEC 2.18, 3.4, 4.9): accept (fee, run document, publish to
 * the agent pool), read, list, approve, usage. The agent pool (workers/agents) moves runs through
 * queued → running → paused | completed | failed with conditional updates.
 */

/** The agent pool message. WARNING: read by agent workers of other versions; add fields only. */
export interface AgentRunMessage {
  runId: string;
  accountId: string;
}

const API = '/api/v1';
export const runPaths = (agentId: string, runId: string) => ({
  result: `${API}/agents/${agentId}/runs/${runId}/result`,
  approve: `${API}/agents/${agentId}/runs/${runId}/approve`,
});

/**
 * A queued run whose last publish is this old (or a running one whose lease expired this long
 * ago) is published again by the sweep; each further republish of the same run waits twice as
 * long (up to 16×), so a backlog (no agent worker for a while) is not multiplied in the queue.
 */
export const AGENT_RUN_SWEEP_GRACE_MS = 30_000;
const REPUBLISH_BACKOFF_MAX = 4;
/** Completions waits: the first read of the run after 100 ms, doubling to one read a second. */
const WAIT_FIRST_MS = 100;
const WAIT_MAX_MS = 1000;
/** How long the run fee's hold may wait for the run document (settled by the scheduler after). */
const FEE_HOLD_TTL_MS = 60_000;

type ApproveAnswer = { runId: string; decision: 'approve' | 'reject'; status: 'resuming' | 'already_recorded' };

/** The projects a run made, as SPEC 2.18 artifacts. */
export function runArtifacts(run: Pick<RunDoc, 'steps'>): z.infer<typeof AgentRunResult>['artifacts'] {
  const out: z.infer<typeof AgentRunResult>['artifacts'] = [];
  for (const s of run.steps) {
    const a = s.artifact;
    if (s.status !== 'done' || !a.projectId || !a.openUrl) continue;
    if (out.some((o) => o.projectId === a.projectId)) continue;
    out.push({ kind: 'project', title: a.title, url: a.openUrl, projectId: a.projectId });
  }
  return out;
}

/** pendingApproval as shown: while paused, and after its decision until the run ends. */
function reviewOf(run: RunDoc) {
  const r = run.review;
  if (!r) return null;
  if (run.status === 'completed' || run.status === 'failed') return null;
  return r;
}

export function toRunView(run: RunDoc): z.infer<typeof AgentRunView> {
  const r = reviewOf(run);
  const paths = runPaths(run.agentId, run._id);
  return {
    runId: run._id,
    agentId: run.agentId,
    threadId: run.threadId,
    trigger: run.trigger,
    status: run.status,
    creditsUsed: Math.round(run.creditsUsed),
    pendingApproval: r
      ? { actionSlug: r.actionSlug, approveUrl: paths.approve, decisionRecorded: r.decision !== null }
      : null,
    error: run.error,
    createdAt: run.createdAt.toISOString(),
    startedAt: run.startedAt?.toISOString() ?? null,
    completedAt: run.completedAt?.toISOString() ?? null,
    resultUrl: paths.result,
  };
}

export function toRunResult(run: RunDoc): z.infer<typeof AgentRunResult> {
  const r = reviewOf(run);
  const paths = runPaths(run.agentId, run._id);
  return {
    runId: run._id,
    agentId: run.agentId,
    threadId: run.threadId,
    status: run.status,
    reply: run.reply,
    artifacts: runArtifacts(run),
    pendingApproval: r
      ? {
          runId: run._id,
          actionSlug: r.actionSlug,
          actionArgs: r.actionArgs,
          plan: r.plan,
          reviewToken: r.reviewToken,
          availableScopes: r.availableScopes,
          decisionRecorded: r.decision !== null,
          approveUrl: paths.approve,
        }
      : null,
    error: run.error,
    creditsUsed: Math.round(run.creditsUsed),
    startedAt: run.startedAt?.toISOString() ?? null,
    completedAt: run.completedAt?.toISOString() ?? null,
    pollUrl: paths.result,
    trigger: run.trigger,
    steps: run.steps.map((s) => ({
      slug: s.slug,
      args: s.args,
      status: s.status,
      artifact: s.artifact as Record<string, unknown>,
    })),
  };
}

/** Constant-time comparison of two 64-hex tokens. */
const sameToken = (a: string, b: string) =>
  a.length === 64 && b.length === 64 && timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));

// Length: a factory whose 11 operations share the runs and agents repositories; the longest, accept, is
// 103 lines.
export function createAgentRuns(rt: Runtime) {
  const runs = createRunsRepository(rt.store);
  const agents = createAgentsRepository(rt.store);

  const mustAgent = async (accountId: string, agentId: string) => {
    const a = await agents.forAccount(accountId).get(agentId);
    if (!a) throw notFound('agent');
    return a;
  };
  const mustRun = async (accountId: string, agentId: string, runId: string) => {
    const r = await runs.forAccount(accountId).ofAgent(agentId, runId);
    if (!r) throw notFound('run');
    return r;
  };

  /**
   * Hand a run to the agent pool. The caller stored publishedAt before; a failed publish clears
   * it, and the sweep publishes the run (still queued) after the grace.
   */
  const publish = async (run: Pick<RunDoc, '_id' | 'accountId'>) => {
    try {
      await rt.amqp.publishToPool('agent', { runId: run._id, accountId: run.accountId } satisfies AgentRunMessage);
      return true;
    } catch (err) {
      rt.log.warn('agent run not published; the sweep will publish it', { runId: run._id, err: err as Error });
      await runs.clearPublished(run._id).catch(() => undefined);
      return false;
    }
  };

  const api = {
    mustAgent,
    publish,

    /**
     * Accept a run: the fee (agent_run) is held first (402 before anything is stored when the
     * balance is short), the run is inserted, the hold captured, the run published. The hold
     * names the run (deliveredBy): a crash between the insert and the capture is captured by the
     * scheduler because the run exists; a crash before the insert is given back.
     *
     * `runId` derived from an Idempotency-Key (`repeatable`): a retry finds the run the first
     * attempt stored and answers it, charging nothing (`charged` 0); a retry racing the first
     * attempt's insert gives its own hold back.
     */
    async accept(input: {
      accountId: string;
      agentId: string;
      trigger: AgentRunTrigger;
      instruction: string;
      threadId?: string;
      requestId: string;
      key: { scopes: Scope[]; folderPins?: string[] };
      runId?: string;
      repeatable?: boolean;
    }): Promise<z.infer<typeof AgentMessageAccepted> & { run: RunDoc; charged: number }> {
      await ensureAgentIndexes(rt.store);
      const mine = runs.forAccount(input.accountId);
      const agent = await mustAgent(input.accountId, input.agentId);
      const runId = input.runId ?? newId('run');
      const found = (r: RunDoc) => ({
        runId: r._id,
        threadId: r.threadId,
        agentId: r.agentId,
        status: 'queued' as const,
        resultUrl: runPaths(r.agentId, r._id).result,
        run: r,
        charged: 0,
      });
      if (input.repeatable) {
        const earlier = await mine.get(runId);
        if (earlier) return found(earlier);
      }
      const threadId = input.threadId ?? newId('thr');
      // The run keeps its figures in credits (AgentRunView.creditsUsed), the hold in millicredits.
      const feeUnits = rt.credits.millicreditsFor('agent_run');
      const fee = fromUnits(feeUnits);
      const hold = await rt.credits.hold({
        accountId: input.accountId,
        operation: 'agent_run',
        millicredits: feeUnits,
        requestId: input.requestId,
        ttlMs: FEE_HOLD_TTL_MS,
        id: runId,
        deliveredBy: { collection: COLLECTIONS.agentRuns, id: runId },
      });
      const now = new Date();
      const run: RunDoc = {
        _id: runId,
        accountId: input.accountId,
        agentId: agent._id,
        threadId,
        trigger: input.trigger,
        instruction: input.instruction,
        key: { scopes: input.key.scopes, folderPins: input.key.folderPins ?? [] },
        status: 'queued',
        history: null,
        transcript: [],
        steps: [],
        review: null,
        pastReviews: [],
        taskGrants: [],
        reply: null,
        error: null,
        creditsUsed: fee,
        fee,
        feeRefunded: false,
        lease: null,
        attempts: 0,
        publishedAt: now,
        republishes: 0,
        segment: 0,
        usage: { inputTokens: 0, outputTokens: 0 },
        eventId: null,
        createdAt: now,
        startedAt: null,
        completedAt: null,
        updatedAt: now,
      };
      try {
        await mine.insert(run);
      } catch (err) {
        await rt.credits.release(hold);
        const earlier = input.repeatable && isDuplicateKey(err) ? await mine.get(runId) : null;
        if (earlier) return found(earlier);
        throw err;
      }
      try {
        await rt.credits.capture(hold);
      } catch (err) {
        rt.log.warn('agent run fee hold not captured; the scheduler captures it (the run exists)', {
          runId,
          err: err as Error,
        });
      }
      await publish(run);
      return {
        runId,
        threadId,
        agentId: agent._id,
        status: 'queued',
        resultUrl: runPaths(agent._id, runId).result,
        run,
        charged: feeUnits,
      };
    },

    async get(accountId: string, agentId: string, runId: string) {
      return mustRun(accountId, agentId, runId);
    },

    async list(accountId: string, agentId: string, q: { limit: number; cursor?: string; status?: AgentRunStatus }) {
      await mustAgent(accountId, agentId);
      const page = await runs.forAccount(accountId).page(agentId, q);
      return mapPage(page, toRunView);
    },

    /**
     * Record the owner's decision on the run's review (SPEC 2.18, 3.4). The token is compared in
     * constant time with the current review's and the earlier decided ones'. One conditional
     * update moves paused → queued with the decision, so two racing decisions record one.
     */
    async approve(
      accountId: string,
      agentId: string,
      runId: string,
      body: AgentRunApproveRequest,
      retried = false,
    ): Promise<ApproveAnswer> {
      const run = await mustRun(accountId, agentId, runId);
      const review = run.review;
      const current = review && sameToken(review.reviewToken, body.reviewToken) ? review : null;
      const past = current ? undefined : run.pastReviews.find((p) => sameToken(p.reviewToken, body.reviewToken));
      if (!current && !past) {
        if (!review)
          throw new AppError('run_not_paused', `the run is ${run.status} and has no action waiting for approval`);
        throw new AppError(
          'invalid_review_token',
          'reviewToken: does not match the review of this run; send pendingApproval.reviewToken unchanged',
        );
      }
      const recorded = current ? current.decision : past!;
      if (recorded) {
        if (recorded.decision === body.decision) return { runId, decision: body.decision, status: 'already_recorded' };
        throw new AppError(
          'run_not_paused',
          `a different decision (${recorded.decision}) was recorded for this review`,
        );
      }
      if (run.status !== 'paused') throw new AppError('run_not_paused', `the run is ${run.status}, not paused`);
      if (!current!.availableScopes.includes(body.scope))
        throw new AppError(
          'validation_error',
          `scope: must be one of ${current!.availableScopes.join(', ')} for this review`,
        );
      // The grant first (idempotent): a crash after the decision is stored cannot lose it. A
      // decision that then loses the race below leaves a grant its owner asked for anyway.
      if (body.decision === 'approve' && body.scope === 'always')
        await agents.forAccount(accountId).allowAlways(agentId, current!.actionSlug);
      const at = new Date();
      const moved = await runs.forAccount(accountId).resume(runId, current!.reviewToken, body, current!.actionSlug, at);
      if (moved === 0) {
        // Someone decided meanwhile: answer from what was recorded.
        if (retried) throw new AppError('run_not_paused', 'the run changed while the decision was recorded');
        return api.approve(accountId, agentId, runId, body, true);
      }
      await publish(run);
      return { runId, decision: body.decision, status: 'resuming' };
    },

    /** Runs of the agent created in the last `days` days (at most AGENT_LIMITS.usageRunsMax read). */
    async usage(
      accountId: string,
      agentId: string,
      days: number,
      now = new Date(),
    ): Promise<z.infer<typeof AgentUsage>> {
      await mustAgent(accountId, agentId);
      const since = new Date(now.getTime() - days * 86_400_000);
      const rows = await runs.forAccount(accountId).createdSince(agentId, since, AGENT_LIMITS.usageRunsMax + 1);
      const truncated = rows.length > AGENT_LIMITS.usageRunsMax;
      const read = rows.slice(0, AGENT_LIMITS.usageRunsMax);
      const byStatus: Record<string, number> = {};
      const byTrigger: Record<string, number> = {};
      let credits = 0;
      let durations = 0;
      let timed = 0;
      for (const r of read) {
        byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
        byTrigger[r.trigger] = (byTrigger[r.trigger] ?? 0) + 1;
        credits += toUnits(r.creditsUsed ?? 0); // summed exactly, in millicredits
        if ((r.status === 'completed' || r.status === 'failed') && r.startedAt && r.completedAt) {
          durations += r.completedAt.getTime() - r.startedAt.getTime();
          timed++;
        }
      }
      return {
        agentId,
        days,
        since: since.toISOString(),
        runs: read.length,
        creditsUsed: Math.round(fromUnits(credits)),
        byStatus,
        byTrigger,
        avgDurationMs: timed ? Math.round(durations / timed) : null,
        lastRunAt: read[0]?.createdAt.toISOString() ?? null,
        truncated,
      };
    },

    /**
     * Wait until the run is in one of `statuses`, or null after `timeoutMs` or when `signal`
     * aborts. Polls the run document by _id with a backoff: after 100 ms, then doubling to one
     * read a second (a 120 s wait reads about 125 times; a run that ends within a second is seen
     * within 100 to 400 ms of its end). A run-state notification over the broker would answer
     * sooner, at the cost of an exchange and a consumer per API process; the poll was chosen.
     */
    async waitFor(
      accountId: string,
      runId: string,
      statuses: readonly AgentRunStatus[],
      timeoutMs: number,
      signal?: AbortSignal,
    ): Promise<RunDoc | null> {
      const deadline = Date.now() + timeoutMs;
      let delay = WAIT_FIRST_MS;
      const mine = runs.forAccount(accountId);
      for (;;) {
        const run = await mine.get(runId);
        if (run && statuses.includes(run.status)) return run;
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) return null;
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, Math.min(delay, left));
          function done() {
            clearTimeout(t);
            signal?.removeEventListener('abort', done);
            resolve();
          }
          signal?.addEventListener('abort', done, { once: true });
        });
        delay = Math.min(WAIT_MAX_MS, delay * 2);
      }
    },

    /**
     * The scheduler's sweep: publish again runs that are queued with a stale publish (one that
     * failed, a lost message) or running under a lease that expired more than `graceMs` ago (a
     * worker died and its message is gone), at most once per backoff period of each run (graceMs
     * doubling per republish, up to 16×); and emit the evi.* event of finished runs whose event
     * was not emitted (the worker died between the final update and the event).
     */
    async sweep(
      graceMs = AGENT_RUN_SWEEP_GRACE_MS,
      now = new Date(),
    ): Promise<{ republished: number; events: number }> {
      const before = new Date(now.getTime() - graceMs);
      const stuck = await runs.stuck(before);
      let republished = 0;
      for (const r of stuck) {
        const last = r.publishedAt ?? r.updatedAt;
        const wait = graceMs * 2 ** Math.min(r.republishes ?? 0, REPUBLISH_BACKOFF_MAX);
        if (now.getTime() - last.getTime() < wait) continue;
        // Stamped before the publish, as accept does; a failed publish clears it again.
        await runs.stampRepublish(r._id, now);
        if (await publish(r)) republished++;
      }
      const unannounced = await runs.unannounced(before);
      for (const r of unannounced) await api.announce(r);
      return { republished, events: unannounced.length };
    },

    /** Emit evi.run_completed / evi.run_failed for a finished run, once it is stored as such. */
    async announce(run: RunDoc): Promise<void> {
      if (run.status !== 'completed' && run.status !== 'failed') return;
      const { eventId } = await emitEvent(
        rt,
        run.accountId,
        run.status === 'completed' ? 'evi.run_completed' : 'evi.run_failed',
        {
          runId: run._id,
          agentId: run.agentId,
          threadId: run.threadId,
          status: run.status,
          resultUrl: `${rt.config.PUBLIC_BASE_URL}${runPaths(run.agentId, run._id).result}`,
          creditsUsed: Math.round(run.creditsUsed),
          error: run.error,
        },
      );
      await runs.markAnnounced(run._id, eventId);
    },
  };
  return api;
}
