import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { stringify } from 'yaml';
import { POOL_TYPES } from '../../contracts/registry';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { freePort, startStack, type Stack } from '../../scripts/harness/stack';
import { dashboardQueries } from './dashboard';
import { deployDir, tool } from './deploy-files';

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
interface QueryAnswer {
  status: 'success' | 'error';
  error?: string;
  data?: { resultType: string; result: Sample[] };
}

/** The panels that must show data once the service has had traffic and run jobs. */
const CORE_PANELS = [
  'Requests per second by route',
  'p99 latency by route',
  'Jobs completed per second by type',
  'Queue depth by pool',
  'Credits charged per second by operation',
  'Processes ready',
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('deploy/grafana dashboard against a live Prometheus scraping the running service', function () {
  this.timeout(120_000);
  let stack: Stack | undefined;
  let prometheus: ChildProcess | undefined;
  let dir: string | undefined;
  let promUrl = '';
  let prometheusLog = '';

  const query = async (expr: string): Promise<QueryAnswer> => {
    const res = await fetch(`${promUrl}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    return (await res.json()) as QueryAnswer;
  };
  /** Poll until `check` passes; the deadline only bounds a broken run, nothing here is timed. */
  const until = async (
    what: string,
    check: () => Promise<boolean>,
    whileWaiting: () => Promise<unknown> = async () => {},
  ) => {
    const deadline = Date.now() + 60_000;
    while (!(await check())) {
      if (Date.now() > deadline)
        throw new Error(`gave up waiting for ${what}; prometheus said:\n${prometheusLog.slice(-2000)}`);
      await whileWaiting();
      await sleep(500);
    }
  };

  before(async function () {
    const bin = tool('prometheus');
    if (!bin) {
      console.log('      prometheus is not installed (scripts/services.sh installs Debian prometheus): skipped');
      this.skip();
    }
    stack = await startStack();
    const apiPort = new URL(stack.baseUrl).port;
    dir = mkdtempSync(path.join(tmpdir(), 'svc-prometheus-'));
    // The rules under test, and a scrape config like deploy/prometheus/prometheus.yml with the
    // stack's ports as static targets (the same job names) and a 1 s interval.
    for (const f of ['recording.yml', 'alerts.yml'])
      copyFileSync(path.join(deployDir, 'prometheus', f), path.join(dir, f));
    const target = (job: string, port: number | string) => ({
      job_name: job,
      static_configs: [{ targets: [`127.0.0.1:${port}`] }],
    });
    writeFileSync(
      path.join(dir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: [path.join(dir, 'recording.yml'), path.join(dir, 'alerts.yml')],
        scrape_configs: [
          target('svc-api', apiPort),
          target('svc-worker', stack.workers!.monitoringPort!),
          target('svc-scheduler', stack.scheduler!.monitoringPort!),
        ],
      }),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      bin,
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    prometheus.stderr!.on('data', (chunk: Buffer) => (prometheusLog = (prometheusLog + chunk.toString()).slice(-8000)));
    await until('Prometheus to be ready', () =>
      fetch(`${promUrl}/-/ready`).then(
        (r) => r.ok,
        () => false,
      ),
    );
  });

  after(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    await stack?.stop();
  });

  it('when the service has had requests, jobs and an error, then every dashboard query runs, the core panels show data and every rule evaluates', async () => {
    const { key } = await stack!.createAccount({ credits: 10_000 });
    const api: Client = client(stack!.baseUrl, key);
    const jobs: string[] = [];
    // Traffic while Prometheus scrapes: reads, a 404, a 400 and a code build per round, so the
    // counters move between scrapes (a counter first seen at its final value has a rate of 0).
    const traffic = async () => {
      expect((await api.get('/account')).status).to.equal(200);
      expect((await api.get('/jobs/code_missing')).status).to.equal(404);
      expect((await api.post('/code-builds', { prompt: 42 })).status).to.equal(400);
      if (jobs.length < 40) {
        const r = await api.post('/code-builds', { prompt: 'a counter' });
        expect(r.status).to.equal(202);
        jobs.push(r.body.jobId);
      }
    };
    await traffic();
    expect((await waitForJob(api, jobs[0]!)).status).to.equal('complete');

    const hasData = async (expr: string) => {
      const a = await query(expr);
      return a.status === 'success' && (a.data?.result.length ?? 0) > 0;
    };
    await until(
      'every scrape target up',
      async () => (await query('sum(up{job=~"svc-.*"})')).data?.result[0]?.value[1] === '3',
      traffic,
    );
    // The recording rules have data once two scrapes after a change were evaluated.
    await until(
      'the recorded job and request rates',
      async () =>
        (await hasData('type:jobs_completed:rate5m{type="code"} > 0')) &&
        (await hasData('operation:credits_charged:rate5m{operation="code_build"} > 0')) &&
        (await hasData('route:http_requests:rate5m{route="/api/v1/account"} > 0')),
      traffic,
    );

    for (const id of jobs) expect((await waitForJob(api, id)).status, id).to.equal('complete');

    const queries = dashboardQueries();
    expect(queries.length).to.be.greaterThan(30);
    const empty: string[] = [];
    for (const q of queries) {
      const a = await query(q.expr);
      expect(a.status, `${q.panel}: ${q.expr}: ${a.error}`).to.equal('success');
      if (!a.data!.result.length) empty.push(q.panel);
    }
    for (const panel of CORE_PANELS) {
      expect(
        queries.some((q) => q.panel === panel),
        panel,
      ).to.equal(true);
      expect(empty, `core panel "${panel}" has no data`).to.not.include(panel);
    }

    // What the core panels say is what happened.
    const value = async (expr: string) => Number((await query(expr)).data!.result[0]?.value[1]);
    expect(await value('route:http_requests:rate5m{route="/api/v1/code-builds"}')).to.be.greaterThan(0);
    expect(
      await value('sum(route_status:http_requests:rate5m{route="/api/v1/jobs/:id", status="404"})'),
    ).to.be.greaterThan(0);
    expect(await value('route:http_request_duration_seconds:p99_5m{route="/api/v1/account"}')).to.be.within(0, 10);
    expect(await value('operation:credits_charged:rate5m{operation="code_build"}')).to.be.greaterThan(0);
    // This stack's queues (the process registry also keeps those of stacks earlier suites ran).
    const prefix = stack!.config.QUEUE_PREFIX.replaceAll('.', '\\\\.');
    expect(await value(`count(pool:queue_depth:max{queue=~"${prefix}.*"})`)).to.equal(POOL_TYPES.length);
    // Readiness itself is tested in readiness.test.ts; here all three processes share one registry
    // with every runtime earlier suites left in this mocha process, so only its presence is checked.
    expect(await value('count(process_ready)')).to.equal(3);

    // Every alert and recording rule evaluated against real series without an error.
    const rules = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
    };
    const all = rules.data.groups.flatMap((g) => g.rules);
    expect(all.length).to.be.greaterThan(25);
    for (const r of all) expect(r.health, `${r.name}: ${r.lastError ?? ''}`).to.equal('ok');
    console.log(
      `      ${queries.length} dashboard queries ran; without data in this short run: ${empty.length ? [...new Set(empty)].join('; ') : 'none'}`,
    );
  });
});
