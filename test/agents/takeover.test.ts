import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { createAgentsRepository } from '../../platform/agents/agents.repository';
import { DEV_AGENTS } from '../../platform/agents/seed';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { spawnWorkerProcess } from '../../scripts/harness/worker-process';
import { waitForRun } from './helpers';

/**
 * A real agent worker process dies (SIGKILL, at the test-only fault point agent.after-tool: the
 * notes project is made, the step not yet checkpointed). The broker redelivers the run's message
 * to another worker process, which waits for the dead worker's lease to run out, claims the run,
 * re-executes the step with the same ids, and completes: the notes project exists once.
 */
describe('agents: a worker process killed mid-run (real processes, SIGKILL)', function () {
  this.timeout(90_000);
  const LEASE_MS = 3000;
  let stack: Stack;
  const workers: ChildProcess[] = [];

  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'research', JOB_LEASE_MS: String(LEASE_MS) } });
  });
  after(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await stack?.stop();
  });

  it('when the worker holding a run dies after a tool made its project, then another worker completes the run and the project exists once', async () => {
    const { accountId, key } = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, key);
    const { id: _id, ...def } = DEV_AGENTS[0]!;
    const agent = await createAgentsRepository(stack.rt.store).forAccount(accountId).upsert(def);
    const doomed = spawnWorkerProcess(stack, {
      WORKER_POOLS: 'agent',
      FAULT_POINT: 'agent.after-tool',
      JOB_LEASE_MS: String(LEASE_MS),
    });
    workers.push(doomed);
    const died = new Promise<string | null>((resolve) =>
      doomed.once('exit', (code, signal) => resolve(signal ?? `code ${code}`)),
    );

    const posted = await api.post(`/agents/${agent._id}/messages`, { message: 'write notes about surviving a crash' });
    expect(posted.status, posted.text).to.equal(202);
    const runId = posted.body.runId as string;
    expect(await died).to.equal('SIGKILL');

    const runs = stack.db.db.collection<any>(COLLECTIONS.agentRuns);
    const projects = stack.db.db.collection<any>(COLLECTIONS.projects);
    const orphan = await runs.findOne({ _id: runId });
    expect(orphan.status).to.equal('running');
    expect(orphan.steps).to.deep.equal([]);
    expect(await projects.countDocuments({ accountId, kind: 'notes' })).to.equal(1);

    workers.push(spawnWorkerProcess(stack, { WORKER_POOLS: 'agent', JOB_LEASE_MS: String(LEASE_MS) }));
    const done = await waitForRun(api, agent._id, runId, ['completed', 'failed'], 30_000);
    expect(done.status, JSON.stringify(done)).to.equal('completed');
    const stored = await runs.findOne({ _id: runId });
    expect(stored.attempts).to.equal(2);
    expect(stored.lease).to.equal(null);
    expect(await projects.countDocuments({ accountId, kind: 'notes' })).to.equal(1);
    const project = await projects.findOne({ accountId, kind: 'notes' });
    expect(done.artifacts.map((a: any) => a.projectId)).to.deep.equal([project._id]);
    expect(done.creditsUsed).to.equal(5);
    await eventually(
      async () => (await stack.db.ledger.countDocuments({ accountId, kind: 'charge' })) === 1,
      5000,
      'one charge',
    );
  });
});
