import type { AgentRunStatus, AgentRunTrigger, ApprovalScope } from '../../contracts/agents';
import { AGENT_LIMITS } from '../../contracts/agents';
import type { ChatArtifact } from '../../contracts/conversations';
import type { Scope } from '../../contracts/registry';
import type { EngineMessage } from '../assistant/engine';
import { newId } from '../infra/ids';
import { COLLECTIONS, isDuplicateKey, type Database, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';

/**
 * Agent definitions, runs, threads and the send_email outbox. Every read and write
 * names the account. WARNING: these documents are persisted; add fields, never rename.
 */
export interface AgentDoc {
  /** `agt_…` (the development seed uses the stable agt_research and agt_outreach). */
  _id: string;
  accountId: string;
  name: string;
  description: string;
  /** The system prompt of every run. */
  instructions: string;
  /** Tool names the agent may call: chat-catalogue tools and agent actions (platform/agents/actions.ts). */
  tools: string[];
  /** Tools that need the owner's approval before each call (unless granted, see alwaysAllowed and a run's taskGrants). */
  approvals: string[];
  /** `default`: the deployment's CHAT_ENGINE. */
  engine: 'default';
  /** Credits one run may use, the run fee included; a paid call past it fails the run. */
  creditBudget: number;
  /** Actions the owner approved with scope `always`: later runs do not ask. */
  alwaysAllowed: string[];
  createdAt: Date;
  updatedAt: Date;
}

export interface RunStepDoc {
  /** The engine's tool-call id. */
  callId: string;
  slug: string;
  args: Record<string, unknown>;
  status: 'done' | 'rejected' | 'failed';
  artifact: ChatArtifact;
  credits: number;
  at: Date;
}

export interface ReviewDoc {
  /** The tool call under review. */
  callId: string;
  actionSlug: string;
  actionArgs: Record<string, unknown>;
  plan: { slug: string; args: Record<string, unknown> }[];
  /** 64 hex characters, crypto random; compared in constant time. */
  reviewToken: string;
  availableScopes: ApprovalScope[];
  decision: { decision: 'approve' | 'reject'; scope: ApprovalScope; at: Date } | null;
  /** The run's segment while this review was open. */
  segment: number;
  /** Steps of the run before the call under review: the decision applies to that call at that place only. */
  stepIndex: number;
  at: Date;
}

export interface RunDoc {
  /** `run_…`. */
  _id: string;
  accountId: string;
  agentId: string;
  threadId: string;
  trigger: AgentRunTrigger;
  /** The user message or the instruction. */
  instruction: string;
  /** The dispatching key's scopes and Drive pins: the run's tools act with them. */
  key: { scopes: Scope[]; folderPins: string[] };
  status: AgentRunStatus;
  /** The thread's messages when the run first started (its history; fixed for the run's life). */
  history: { role: 'user' | 'assistant'; content: string }[] | null;
  /** Engine messages of this run so far (assistant steps and tool results), for resuming. */
  transcript: EngineMessage[];
  steps: RunStepDoc[];
  /** The latest review (an action waiting for, or decided by, the owner). */
  review: ReviewDoc | null;
  /** Reviews decided before the latest (their tokens), so a repeated decision still answers already_recorded. */
  pastReviews: { reviewToken: string; decision: 'approve' | 'reject'; scope: ApprovalScope }[];
  /** Actions approved with scope `task`: this run repeats them without asking. */
  taskGrants: string[];
  reply: string | null;
  error: string | null;
  /** The run fee (unless refunded) plus tool charges. */
  creditsUsed: number;
  fee: number;
  feeRefunded: boolean;
  lease: { owner: string; until: Date } | null;
  /**
   * Claims of the run by a worker in its current segment (a killed worker's run is claimed
   * again). The owner's decision resets it: a run that pauses N times is not a run that crashed.
   */
  attempts: number;
  /**
   * When the run was last handed to the agent pool (set with the queued state, before the
   * publish; null when a publish failed). The sweep publishes a queued run again only when this
   * is stale, backing off by `republishes`, so a backlog of queued runs is not multiplied.
   * Absent on runs stored before this field (read as their updatedAt).
   */
  publishedAt?: Date | null;
  /** Times the sweep published the run again (its backoff). */
  republishes?: number;
  /** +1 at each decision: a paused run resumes in a new segment. */
  segment: number;
  usage: { inputTokens: number; outputTokens: number };
  /** The evi.* event of the final state, once emitted (the sweep emits it otherwise). */
  eventId: string | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  updatedAt: Date;
}

export interface ThreadDoc {
  /** `${agentId}:${threadId}`. */
  _id: string;
  accountId: string;
  agentId: string;
  threadId: string;
  messages: { role: 'user' | 'assistant'; content: string; runId: string; at: Date }[];
  /** Runs whose messages were appended (the last 100): an append repeated after a crash adds nothing. */
  appendedRuns: string[];
  createdAt: Date;
  updatedAt: Date;
}

/** What send_email stores: this deployment has no mail transport, so nothing leaves. */
export interface OutboxDoc {
  _id: string;
  accountId: string;
  agentId: string;
  runId: string;
  to: string;
  subject: string;
  body: string;
  status: 'queued_no_transport';
  createdAt: Date;
}

const indexed = new WeakSet<Database>();

export function agentCollections(store: Store) {
  const db = openStore(store);
  return {
    agents: db.db.collection<AgentDoc>(COLLECTIONS.agents),
    runs: db.db.collection<RunDoc>(COLLECTIONS.agentRuns),
    threads: db.db.collection<ThreadDoc>(COLLECTIONS.agentThreads),
    outbox: db.db.collection<OutboxDoc>(COLLECTIONS.agentOutbox),
  };
}

/** Stores an email of the send_email action in the agent outbox. */
export async function insertOutboxEmail(store: Store, doc: OutboxDoc): Promise<void> {
  await agentCollections(store).outbox.insertOne(doc);
}

/** The indexes of the agent collections, made once per process (idempotent). */
export async function ensureAgentIndexes(store: Store): Promise<void> {
  const db = openStore(store);
  if (indexed.has(db)) return;
  const c = agentCollections(store);
  await Promise.all([
    c.agents.createIndex({ accountId: 1, createdAt: -1 }),
    c.runs.createIndex({ accountId: 1, agentId: 1, createdAt: -1 }),
    c.runs.createIndex({ status: 1, updatedAt: 1 }),
    c.outbox.createIndex({ accountId: 1, createdAt: -1 }),
  ]);
  indexed.add(db);
}

export interface AgentDefinition {
  id?: string;
  name: string;
  description?: string;
  instructions: string;
  tools: string[];
  approvals?: string[];
  creditBudget: number;
}

/** Agents: `forAccount(accountId)` reads and writes one account's; another account's agent is not found. */
export function createAgentsRepository(store: Store) {
  const c = agentCollections(store);
  return {
    forAccount(accountId: string) {
      const agents = accountSlice(c.agents, accountId);
      return {
        get: (id: string) => agents.findOne({ _id: id }),

        list: () => agents.find().sort({ createdAt: -1, _id: -1 }).limit(1000).toArray(),

        /** Create an agent; with a stable `id` an existing one of the account is updated instead (seeds are idempotent). */
        async upsert(def: AgentDefinition): Promise<AgentDoc> {
          await ensureAgentIndexes(store);
          const now = new Date();
          const fields = {
            name: def.name,
            description: def.description ?? '',
            instructions: def.instructions,
            tools: [...new Set(def.tools)],
            approvals: [...new Set(def.approvals ?? [])],
            creditBudget: def.creditBudget,
            engine: 'default' as const,
          };
          if (def.id) {
            const found = await agents.findOneAndUpdate(
              { _id: def.id },
              { $set: { ...fields, updatedAt: now } },
              { returnDocument: 'after' },
            );
            if (found) return found;
          }
          const doc: AgentDoc = {
            _id: def.id ?? newId('agt'),
            accountId,
            ...fields,
            alwaysAllowed: [],
            createdAt: now,
            updatedAt: now,
          };
          try {
            await agents.insertOne(doc);
          } catch (err) {
            if (!isDuplicateKey(err)) throw err;
            // Taken by another account, or made meanwhile by a concurrent seed of this one.
            const again = await agents.findOne({ _id: doc._id });
            if (!again) throw new Error(`agent id ${doc._id} belongs to another account`);
            return again;
          }
          return doc;
        },

        /** Remember an action approved with scope `always`. */
        async allowAlways(id: string, action: string): Promise<void> {
          await agents.updateOne(
            { _id: id },
            { $addToSet: { alwaysAllowed: action }, $set: { updatedAt: new Date() } },
          );
        },
      };
    },
  };
}

/** Threads: a run reads the history at its start and appends its messages at its end. */
export function createThreadsRepository(store: Store) {
  const c = agentCollections(store);
  return {
    forAccount(accountId: string) {
      const threads = accountSlice(c.threads, accountId);
      return {
        async history(agentId: string, threadId: string): Promise<ThreadDoc['messages']> {
          const t = await threads.findOne({ _id: `${agentId}:${threadId}` });
          return t?.messages ?? [];
        },

        /** Append a run's messages once (a repeat after a crash finds the run in appendedRuns). */
        async append(
          agentId: string,
          threadId: string,
          runId: string,
          messages: { role: 'user' | 'assistant'; content: string }[],
        ): Promise<void> {
          const at = new Date();
          try {
            // The upsert's insert takes _id and accountId from the filter.
            await threads.updateOne(
              { _id: `${agentId}:${threadId}`, appendedRuns: { $ne: runId } },
              {
                $push: {
                  messages: {
                    $each: messages.map((m) => ({ ...m, runId, at })),
                    $slice: -AGENT_LIMITS.threadMessagesMax,
                  },
                  appendedRuns: { $each: [runId], $slice: -100 },
                },
                $set: { updatedAt: at },
                $setOnInsert: { agentId, threadId, createdAt: at },
              },
              { upsert: true },
            );
          } catch (err) {
            // The thread exists with this run appended already: the upsert's insert collides.
            if (!isDuplicateKey(err)) throw err;
          }
        },
      };
    },
  };
}

/**
 * A run's lease, as the agent pool holds it: one worker works a run at a time. Every write after
 * the claim is conditional on `owner` still holding the run, so a worker that lost it (taken over
 * after its lease ran out) learns it from a write that matched nothing (false or null) and stops.
 */
export function createRunLeases(store: Store) {
  const runs = agentCollections(store).runs;
  const held = (runId: string, owner: string) => ({ _id: runId, status: 'running' as const, 'lease.owner': owner });
  return {
    /** The claims of the worker that took the run's message (which names the run's account). */
    forAccount(accountId: string) {
      const mine = accountSlice(runs, accountId);
      return {
        /** Takes a queued run, or a running one whose lease ran out, for `owner`; null when neither. */
        claim(runId: string, owner: string, leaseMs: number): Promise<RunDoc | null> {
          const now = new Date();
          return mine.findOneAndUpdate(
            { _id: runId, $or: [{ status: 'queued' }, { status: 'running', 'lease.until': { $lt: now } }] },
            {
              $set: { status: 'running', lease: { owner, until: new Date(now.getTime() + leaseMs) }, updatedAt: now },
              $inc: { attempts: 1 },
            },
            { returnDocument: 'after' },
          );
        },

        /** The run's status and lease, to tell a live holder from a dead one. */
        leaseOf: (runId: string) => mine.findOne({ _id: runId }, { projection: { status: 1, lease: 1 } }),
      };
    },

    /** Moves the lease's end `leaseMs` from now; false when `owner` no longer holds the run. */
    async renew(runId: string, owner: string, leaseMs: number): Promise<boolean> {
      const r = await runs.updateOne(held(runId, owner), { $set: { 'lease.until': new Date(Date.now() + leaseMs) } });
      return r.matchedCount === 1;
    },

    /** Ends the lease now (a stopping worker): the next delivery claims the run at once. */
    async giveUp(runId: string, owner: string): Promise<void> {
      await runs.updateOne(held(runId, owner), { $set: { 'lease.until': new Date(0) } });
    },

    /** Stores `set` (and `extra` operators) while `owner` holds the run; false when it does not. */
    async update(
      runId: string,
      owner: string,
      set: Partial<RunDoc>,
      extra: Record<string, unknown> = {},
    ): Promise<boolean> {
      const r = await runs.updateOne(held(runId, owner), { $set: set, ...extra });
      return r.matchedCount === 1;
    },

    /** Stores `set` and lets the run go (paused or finished); the run as stored, or null when `owner` did not hold it. */
    release: (runId: string, owner: string, set: Partial<RunDoc>) =>
      runs.findOneAndUpdate(held(runId, owner), { $set: { ...set, lease: null } }, { returnDocument: 'after' }),
  };
}
