import { expect } from 'chai';
import { createAgentsRepository, type RunDoc } from '../../platform/agents/agents.repository';
import { createAgentRuns, AGENT_RUN_SWEEP_GRACE_MS } from '../../platform/agents/runs.service';
import { DEV_AGENTS } from '../../platform/agents/seed';
import { createChatEngine } from '../../platform/assistant/engines/index';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { handleRunMessage } from '../../workers/agents/agent.runner';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/**
 * The agent run sweep and duplicate messages, with no agent pool consuming (the test hands
 * messages to the runner itself): a queued run is published again only when its publish is
 * stale, backing off; a duplicate message for a run another worker holds alive is acked at once.
 */
describe('agents: sweep republishes and duplicate messages', function () {
  this.timeout(60_000);
  const LEASE_MS = 1500;
  let stack: Stack;
  let api: Client;
  let agentId: string;
  let accountId: string;

  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'research', JOB_LEASE_MS: String(LEASE_MS) } });
    const a = await stack.createAccount({ credits: 1000 });
    accountId = a.accountId;
    api = client(stack.baseUrl, a.key);
    const { id: _id, ...def } = DEV_AGENTS[0]!;
    agentId = (await createAgentsRepository(stack.rt.store).forAccount(accountId).upsert(def))._id;
  });
  after(async () => {
    await stack?.stop();
  });

  const runs = () => stack.db.db.collection<RunDoc>(COLLECTIONS.agentRuns);
  const post = async (message: string) => {
    const r = await api.post(`/agents/${agentId}/messages`, { message });
    expect(r.status, r.text).to.equal(202);
    return r.body.runId as string;
  };

  it('when a queued run waits for a worker, then the sweep publishes it again only after the grace, and each further time after twice as long', async () => {
    const runId = await post('write notes about waiting');
    const run = (await runs().findOne({ _id: runId }))!;
    expect(run.publishedAt).to.be.instanceOf(Date);
    const t0 = run.publishedAt!.getTime();
    const sweepAt = async (ms: number) => {
      await createAgentRuns(stack.rt).sweep(AGENT_RUN_SWEEP_GRACE_MS, new Date(t0 + ms));
      return (await runs().findOne({ _id: runId }))!.republishes ?? 0;
    };
    const g = AGENT_RUN_SWEEP_GRACE_MS;
    expect(await sweepAt(g / 3)).to.equal(0);
    expect(await sweepAt(g + 1000)).to.equal(1);
    expect(await sweepAt(g + 1000 + g)).to.equal(1); // next after 2g
    expect(await sweepAt(g + 1000 + 2 * g + 1000)).to.equal(2);
    expect(await sweepAt(g + 1000 + 2 * g + 1000 + 2 * g)).to.equal(2); // next after 4g
    expect(await sweepAt(g + 1000 + 2 * g + 1000 + 4 * g + 1000)).to.equal(3);
  });

  it('when a message arrives for a run another worker holds and renews, then it is acked at once; once that worker stops renewing, a message claims the run after the lease and completes it', async () => {
    const runId = await post('write notes about duplicates');
    const until = () => new Date(Date.now() + LEASE_MS);
    await runs().updateOne(
      { _id: runId },
      { $set: { status: 'running', lease: { owner: 'another-worker', until: until() } } },
    );
    const renew = setInterval(
      () =>
        void runs().updateOne({ _id: runId, 'lease.owner': 'another-worker' }, { $set: { 'lease.until': until() } }),
      LEASE_MS / 3,
    );
    const deps = { rt: stack.rt, engine: createChatEngine(stack.config), log: stack.rt.log, active: new Set<string>() };
    const signal = new AbortController().signal;
    try {
      const started = Date.now();
      await handleRunMessage(deps, { runId, accountId }, signal);
      const took = Date.now() - started;
      expect(took).to.be.below(LEASE_MS);
      const held = (await runs().findOne({ _id: runId }))!;
      expect(held.status).to.equal('running');
      expect(held.lease?.owner).to.equal('another-worker');
    } finally {
      clearInterval(renew);
    }
    // The holder died: its lease stands still, and the next message takes the run over after it.
    await handleRunMessage(deps, { runId, accountId }, signal);
    const done = (await runs().findOne({ _id: runId }))!;
    expect(done.status, JSON.stringify(done.error)).to.equal('completed');
    expect(done.attempts).to.equal(1); // the test's stand-in holder claimed nothing
  });
});
