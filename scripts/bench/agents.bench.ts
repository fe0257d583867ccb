/**
 * Agents benchmark, against the real RabbitMQ and FerretDB on this machine:
 *  (a) baseline: the same work as one run, in this process without the agent machinery: the local
 *      engine's two steps (plan, reply) and the list_projects action in between, over the same
 *      database, C at a time. It is what a run must do anyway; (b) / (a) is what the queue, the
 *      claim with its lease, the per-step checkpoints of the run document, the thread append and
 *      the evi.* event cost on top.
 *  (b) agent runs completed per second: POST /agents/{id}/messages ("list my projects", the
 *      research assistant's harmless action) over HTTP, C clients, each run through RabbitMQ to
 *      the agent pool (this process, concurrency C) until completed; counted from the run
 *      documents.
 *  (c) the runs' latency from acceptance to completion (createdAt → completedAt), p50 and p95.
 */
import { createAgentsRepository } from '../../platform/agents/agents.repository';
import { createAgentActions } from '../../platform/agents/actions';
import { DEV_AGENTS } from '../../platform/agents/seed';
import type { EngineMessage, ToolCall } from '../../platform/assistant/engine';
import { createChatEngine } from '../../platform/assistant/engines/index';
import { executeToolCall, toolSpecs } from '../../platform/assistant/execute';
import { stableId } from '../../platform/infra/ids';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client } from '../harness/http';
import { startStack } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';
import { percentile } from './load';

const RUNS = Number(process.env.BENCH_AGENT_RUNS ?? 200);
const C = Number(process.env.BENCH_AGENT_CONCURRENCY ?? 8);
const MESSAGE = 'list my projects';

async function pool<T>(n: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await one(i);
      }
    }),
  );
  return out;
}

export const bench: Bench = {
  name: 'agents',
  async run(): Promise<BenchRow[]> {
    const stack = await startStack({
      scheduler: false,
      env: { WORKER_POOLS: 'agent', POOL_CONCURRENCY: `agent=${C}`, RATE_LIMIT_MAX: '1000000', LOG_LEVEL: 'warn' },
    });
    try {
      const { accountId, key } = await stack.createAccount({ credits: 1_000_000 });
      const { id: _id, ...def } = DEV_AGENTS[0]!;
      const agent = await createAgentsRepository(stack.rt.store).forAccount(accountId).upsert(def);
      const api = client(stack.baseUrl, key);
      for (let i = 0; i < 5; i++) await api.post('/notes', { name: `bench notes ${i}`, markdown: '# hi' });

      // (a) the run's own work, without queue, claim, checkpoints or events.
      const engine = createChatEngine(stack.config);
      const account = (await stack.rt.accounts.forAccount(accountId).get())!;
      const tools = createAgentActions(stack.rt, { agentId: agent._id, runId: 'bench' });
      const specs = toolSpecs(tools);
      const bare = async (i: number) => {
        const messages: EngineMessage[] = [
          { role: 'system', content: agent.instructions },
          { role: 'user', content: MESSAGE },
        ];
        const signal = new AbortController().signal;
        const calls: ToolCall[] = [];
        for await (const ev of engine.step({ messages, tools: specs, mode: 'fast', stepIndex: 0, signal }))
          if (ev.type === 'tool-call') calls.push(ev.call);
        messages.push({ role: 'assistant', content: '', toolCalls: calls });
        for (const call of calls) {
          const artifact = await executeToolCall(tools, call, {
            account,
            key: { scopes: ['read', 'write', 'ai'], folderPins: [] },
            requestId: 'bench',
            signal,
            idFor: (p) => stableId(p, `bench${i}`),
          });
          messages.push({ role: 'tool', toolCallId: call.id, name: call.name, artifact });
        }
        for await (const _ of engine.step({ messages, tools: specs, mode: 'fast', stepIndex: 1, signal })) void _;
      };
      await pool(20, C, bare);
      const b0 = performance.now();
      await pool(RUNS, C, bare);
      const bareRps = RUNS / ((performance.now() - b0) / 1000);

      // (b) agent runs through the API, the broker and the agent pool.
      const runs = stack.db.db.collection<any>(COLLECTIONS.agentRuns);
      const warm = await pool(10, C, () => api.post(`/agents/${agent._id}/messages`, { message: MESSAGE }));
      const settled = async (n: number) => {
        for (const deadline = Date.now() + 300_000; Date.now() < deadline; ) {
          if ((await runs.countDocuments({ accountId, status: { $in: ['completed', 'failed'] } })) >= n) return;
          await new Promise((r) => setTimeout(r, 20));
        }
        throw new Error('agent runs did not finish');
      };
      await settled(warm.length);
      const t0 = performance.now();
      const started = new Date();
      const accepted = await pool(RUNS, C, async () => {
        const r = await api.post(`/agents/${agent._id}/messages`, { message: MESSAGE });
        if (r.status !== 202) throw new Error(`agent message answered ${r.status}: ${r.text}`);
        return r.body.runId as string;
      });
      const acceptedIn = performance.now() - t0;
      await settled(warm.length + accepted.length);
      if (process.env.BENCH_AGENT_DEBUG) console.log(`accepted ${RUNS} in ${Math.round(acceptedIn)} ms`);
      const agentRps = RUNS / ((performance.now() - t0) / 1000);
      const done = await runs
        .find({ accountId, createdAt: { $gte: started } }, { projection: { status: 1, createdAt: 1, completedAt: 1 } })
        .toArray();
      const failed = done.filter((r) => r.status !== 'completed').length;
      const latencies = done.map((r) => r.completedAt.getTime() - r.createdAt.getTime());
      return [
        row(
          'agent runs completed per second (local engine, list_projects)',
          agentRps,
          'runs/s',
          bareRps,
          `${RUNS} runs, ${C} clients, agent pool concurrency ${C}, ${failed} not completed; baseline: the same engine steps and action in-process, no queue or run document`,
        ),
        row('agent run latency p50 (accepted → completed)', percentile(latencies, 50), 'ms'),
        row('agent run latency p95 (accepted → completed)', percentile(latencies, 95), 'ms'),
      ];
    } finally {
      await stack.stop();
    }
  },
};
