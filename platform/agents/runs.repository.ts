import type { AgentRunApproveRequest, AgentRunStatus } from '../../contracts/agents';
import { keysetPage } from '../infra/lists';
import type { Store } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { agentCollections, type RunDoc } from './agents.repository';

/**
 * The queries of agent runs as the API and the scheduler's sweep make them
 * (platform/agents/runs.service.ts holds the logic; the agent pool's writes are createRunLeases).
 */
export function createRunsRepository(store: Store) {
  const runs = agentCollections(store).runs;
  return {
    /** One account's runs: another account's run is not found. */
    forAccount(accountId: string) {
      const mine = accountSlice(runs, accountId);
      return {
        /** The run of the account's agent. */
        ofAgent: (agentId: string, runId: string) => mine.findOne({ _id: runId, agentId }),

        /** The run of the account. */
        get: (runId: string) => mine.findOne({ _id: runId }),

        insert: (run: RunDoc) => mine.insertOne(run),

        page: (agentId: string, q: { limit: number; cursor?: string; status?: AgentRunStatus }) => {
          const filter = { agentId, ...(q.status ? { status: q.status } : {}) };
          return keysetPage(mine, filter, {
            tag: `agent-runs:${q.status ?? 'all'}:createdAt:desc`,
            field: 'createdAt',
            direction: -1,
            limit: q.limit,
            cursor: q.cursor,
            projection: { transcript: 0, history: 0, steps: 0, instruction: 0 },
          });
        },

        /**
         * Records the decision on the paused run's current review and queues it again (a new segment);
         * how many runs it moved (0 when someone decided meanwhile).
         */
        async resume(
          runId: string,
          reviewToken: string,
          body: AgentRunApproveRequest,
          actionSlug: string,
          at: Date,
        ): Promise<number> {
          // attempts: claims are counted per segment, so only crashes (not pauses) use them up.
          const moved = await mine.updateOne(
            { _id: runId, status: 'paused', 'review.reviewToken': reviewToken, 'review.decision': null },
            {
              $set: {
                status: 'queued',
                'review.decision': { decision: body.decision, scope: body.scope, at },
                attempts: 0,
                publishedAt: at,
                republishes: 0,
                updatedAt: at,
              },
              $inc: { segment: 1 },
              ...(body.decision === 'approve' && body.scope === 'task'
                ? { $addToSet: { taskGrants: actionSlug } }
                : {}),
            },
          );
          return moved.modifiedCount;
        },

        /** Runs of the agent created since `since`, newest first, at most `limit`. */
        createdSince: (agentId: string, since: Date, limit: number) =>
          mine
            .find(
              { agentId, createdAt: { $gte: since } },
              { projection: { status: 1, trigger: 1, creditsUsed: 1, startedAt: 1, completedAt: 1, createdAt: 1 } },
            )
            .sort({ createdAt: -1, _id: -1 })
            .limit(limit)
            .toArray(),
      };
    },

    /** A failed publish: the sweep publishes the run after the grace. */
    clearPublished: (runId: string) => runs.updateOne({ _id: runId }, { $set: { publishedAt: null } }),

    /** Queued runs with a publish older than `before` (or none and no change since), running runs whose lease ended before it. */
    stuck: (before: Date) =>
      runs
        .find(
          {
            $or: [
              { status: 'queued', publishedAt: { $lt: before } },
              { status: 'queued', publishedAt: null, updatedAt: { $lt: before } },
              { status: 'running', 'lease.until': { $lt: before } },
            ],
          },
          { projection: { _id: 1, accountId: 1, publishedAt: 1, republishes: 1, updatedAt: 1 } },
        )
        .limit(200)
        .toArray(),

    stampRepublish: (runId: string, now: Date) =>
      runs.updateOne(
        { _id: runId, status: { $in: ['queued', 'running'] } },
        { $set: { publishedAt: now }, $inc: { republishes: 1 } },
      ),

    /** Finished runs (before `before`) whose event was not emitted. */
    unannounced: (before: Date) =>
      runs
        .find({ status: { $in: ['completed', 'failed'] }, eventId: null, completedAt: { $lt: before } })
        .limit(200)
        .toArray(),

    markAnnounced: (runId: string, eventId: string) =>
      runs.updateOne({ _id: runId, eventId: null }, { $set: { eventId } }),
  };
}
