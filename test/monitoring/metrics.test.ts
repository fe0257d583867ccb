import { expect } from 'chai';
import { client, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('monitoring', () => {
  let stack: Stack;
  let origin: string;
  before(async () => {
    stack = await startStack();
    origin = stack.baseUrl.replace('/api/v1', '');
  });
  after(() => stack.stop());

  it('when jobs ran, then /metrics on the API and on the workers answers the dashboard questions', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const r = await api.post('/code-builds', { prompt: 'a counter' });
    await waitForJob(api, r.body.jobId);
    await api.get('/jobs/code_missing');
    const text = await (await fetch(`${origin}/metrics`)).text();
    expect(text).to.match(
      /http_request_duration_seconds_count\{method="POST",route="\/api\/v1\/code-builds",status="202"\} \d+/,
    );
    expect(text).to.match(
      /http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/jobs\/:id",status="404"\} \d+/,
    );
    expect(text).to.match(/jobs_dispatched_total\{type="code"\} [1-9]/);
    expect(text).to.match(/jobs_completed_total\{type="code"\} [1-9]/);
    expect(text).to.match(/job_duration_seconds_count\{type="code",status="complete"\} [1-9]/);
    expect(text).to.match(/credits_charged_total\{operation="code_build"\} [1-9]/);
    expect(text).to.match(
      new RegExp(`queue_depth\\{queue="${stack.config.QUEUE_PREFIX.replace('.', '\\.')}svc\\.pool\\.code"\\} 0`),
    );
    expect(text).to.include('process_cpu_seconds_total');
    // Database latency by command and collection, and broker publish-confirm latency by kind.
    expect(text).to.match(/db_command_duration_seconds_count\{command="insert",collection="jobs",outcome="ok"\} [1-9]/);
    expect(text).to.match(
      /db_command_duration_seconds_count\{command="findAndModify",collection="jobs",outcome="ok"\} [1-9]/,
    );
    expect(text).to.match(
      /db_command_duration_seconds_bucket\{le="0\.005",command="update",collection="accounts",outcome="ok"\} \d+/,
    );
    expect(text).to.match(/amqp_publish_confirm_duration_seconds_count\{exchange="pool",outcome="confirmed"\} [1-9]/);
    expect(text).to.match(/amqp_publish_confirm_duration_seconds_count\{exchange="events",outcome="confirmed"\} [1-9]/);
    expect(text).to.match(
      /amqp_publish_confirm_duration_seconds_count\{exchange="job_changes",outcome="confirmed"\} [1-9]/,
    );
    // (audit entries reach the broker only when the database is away: test/gateway/audit.test.ts.)
    for (const m of text.matchAll(/amqp_publish_confirm_duration_seconds_count\{exchange="([^"]+)"/g))
      expect(m[1]).to.be.oneOf(['pool', 'events', 'webhooks', 'audit', 'auth', 'job_changes', 'other']);
    // Bounded labels: no ids, and only known collection names.
    for (const m of text.matchAll(/collection="([^"]+)"/g))
      expect(m[1]).to.match(/^(?:[a-z_]+(?:\.files|\.chunks)?|other|-)$/);
    const workerText = await (await fetch(`http://127.0.0.1:${stack.workers!.monitoringPort}/metrics`)).text();
    expect(workerText).to.include('pool_jobs_in_flight');
    // Queue wait is observed even when the worker starts the job before its dispatch mark is written.
    expect(workerText).to.match(/job_queue_wait_seconds_count\{type="code"\} [1-9]/);
    const schedText = await (await fetch(`http://127.0.0.1:${stack.scheduler!.monitoringPort}/metrics`)).text();
    expect(schedText).to.include('scheduler_runs_total');
  });

  it('when every dependency answers, then /healthz and /readyz are 200 on every process', async () => {
    for (const base of [
      origin,
      `http://127.0.0.1:${stack.workers!.monitoringPort}`,
      `http://127.0.0.1:${stack.scheduler!.monitoringPort}`,
    ]) {
      expect((await fetch(`${base}/healthz`)).status).to.equal(200);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status, base).to.equal(200);
    }
  });

  it('when MongoDB is unreachable, then /readyz fails and /healthz still answers', async () => {
    const other = await startStack({ workers: false, scheduler: false });
    const base = other.baseUrl.replace('/api/v1', '');
    try {
      await other.db.client.close(true);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).to.equal(503);
      expect(((await ready.json()) as { failures: string[] }).failures.join()).to.include('mongodb');
      expect((await fetch(`${base}/healthz`)).status).to.equal(200);
    } finally {
      await other.stop().catch(() => {});
    }
  });
});
