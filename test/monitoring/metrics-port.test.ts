import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'chai';
import { loadConfig } from '../../platform/infra/config';
import { waitForApiProcesses } from '../../scripts/supervisor/ready';
import { spawnApiProcess, type ApiProcess } from '../helpers/api-process';
import { client } from '../../scripts/harness/http';
import { dropEverything, freePort, startStack, type Stack } from '../../scripts/harness/stack';
import { supervisorEnv } from '../helpers/supervised';
import { projectRoot } from '../../scripts/harness/worker-process';

/** A counter's value in Prometheus text, summed over the series whose labels include all of `labels`. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.split(' ').at(-1));
  }
  return total;
}

/** GET /metrics on the API port: 404 in the Error shape, like any unknown path. */
async function expectNoMetricsOnApiPort(port: number) {
  const r = await client(`http://127.0.0.1:${port}`).get('/metrics', { connection: 'close' });
  expect(r.status, r.text).to.equal(404);
  expect(r.body.error.code).to.equal('not_found');
  expect(r.body.error.message).to.be.a('string');
  expect(r.body.error.requestId).to.match(/^req_/);
  expect(r.text).not.to.include('process_cpu_seconds_total');
}

/**
 * Defaults (no METRICS_ON_API_PORT): whoever reaches the API cannot read the metrics; Prometheus
 * scrapes them on METRICS_PORT, from the process that gathers every API process's figures.
 */
describe('metrics port (METRICS_PORT)', () => {
  const started: { supervisor: ChildProcess; env: Record<string, string> }[] = [];

  /** The real supervisor from source, API processes only, on a fresh database, with a free METRICS_PORT. */
  async function startSupervisedApi(processes: number) {
    const { env, port, metricsPort } = await supervisorEnv({ API_PROCESSES: String(processes) });
    const supervisor = spawn(process.execPath, ['--import', 'tsx', 'scripts/supervisor.ts', 'api'], {
      cwd: projectRoot,
      env: { ...process.env, ...env, LOG_FILE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push({ supervisor, env });
    let output = '';
    supervisor.stdout!.on('data', (d) => (output += d));
    supervisor.stderr!.on('data', (d) => (output += d));
    await waitForApiProcesses(metricsPort, processes, 90_000, () => supervisor.exitCode === null).catch(
      (err: Error) => {
        throw new Error(`${err.message}; output:\n${output}`);
      },
    );
    return { supervisor, port, metricsPort, output: () => output };
  }

  /** `n` GET /healthz over new connections (handed to the API processes in turn): the pids that answered. */
  async function healthz(port: number, n: number) {
    const pids = new Set<number>();
    for (let i = 0; i < n; i++) {
      const r = await client(`http://127.0.0.1:${port}`).get('/healthz', { connection: 'close' });
      expect(r.status, r.text).to.equal(200);
      pids.add(Number(r.headers.get('x-served-by')));
    }
    return pids;
  }

  const scrape = async (metricsPort: number) => {
    const r = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^text\/plain/);
    return r.text();
  };

  after(async () => {
    for (const { supervisor, env } of started) {
      if (supervisor.exitCode === null && supervisor.signalCode === null) {
        supervisor.kill('SIGTERM');
        await once(supervisor, 'exit');
      }
      await dropEverything(loadConfig(env));
    }
  });

  for (const processes of [2, 1]) {
    it(`when the API runs under the supervisor with API_PROCESSES=${processes}, then GET /metrics on the API port is a 404 and the metrics port answers with every API process's series`, async function () {
      this.timeout(120_000);
      const { supervisor, port, metricsPort } = await startSupervisedApi(processes);

      await expectNoMetricsOnApiPort(port);

      const series = { method: 'GET', route: '/healthz', status: '200' };
      const before = sample(await scrape(metricsPort), 'http_request_duration_seconds_count', series);
      const pids = await healthz(port, 10);
      expect(pids.size, `pids ${[...pids]}`).to.equal(processes);
      for (let i = 0; i < 3; i++) {
        const text = await scrape(metricsPort);
        // What every API process served, counted once each, and the supervisor's own series.
        expect(sample(text, 'http_request_duration_seconds_count', series) - before).to.equal(10);
        expect(sample(text, 'supervisor_api_processes_ready', {})).to.equal(processes);
        expect(text).to.include('supervisor_process_restarts_total');
        expect(text).to.include('process_cpu_seconds_total');
      }

      // The metrics port serves /metrics only.
      const other = await fetch(`http://127.0.0.1:${metricsPort}/api/v1/account`);
      expect(other.status).to.equal(404);
      expect(((await other.json()) as { error: { code: string } }).error.code).to.equal('not_found');

      supervisor.kill('SIGTERM');
      const [code] = await once(supervisor, 'exit');
      expect(code).to.equal(0);
    });
  }

  describe('an API process run alone (as the container image runs it)', () => {
    let stack: Stack;
    let api: ApiProcess | undefined;
    before(async function () {
      this.timeout(60_000);
      stack = await startStack({ workers: false, scheduler: false });
    });
    after(async () => {
      await api?.kill();
      await stack.stop();
    });

    it('when METRICS_PORT is set and METRICS_ON_API_PORT is not, then its own metrics are on the metrics port and GET /metrics on the API port is a 404', async function () {
      this.timeout(60_000);
      const metricsPort = await freePort();
      api = await spawnApiProcess(stack, { METRICS_PORT: String(metricsPort), METRICS_ON_API_PORT: 'false' });
      const port = Number(new URL(api.baseUrl).port);

      await expectNoMetricsOnApiPort(port);
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(r.status).to.equal(200);
      const text = await scrape(metricsPort);
      expect(
        sample(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/healthz', status: '200' }),
      ).to.be.at.least(1);
      expect(text).to.include('process_cpu_seconds_total');
      expect(text).not.to.include('supervisor_api_processes_ready');
    });
  });
});
