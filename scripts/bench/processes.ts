/**
 * Out-of-process servers for the benchmarks: the real supervisor running only the API
 * (`supervisor.ts api`, API_PROCESSES processes on one port, no workers or scheduler, so accepted
 * jobs just queue) on a fresh database and queue prefix, and the bare baseline servers
 * (baseline-server.ts, or a bench module forked as its own baseline: forkBaseline and
 * serveBaselineWhen). Each helper waits until its server listens and stops it with SIGTERM.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { broker } from '../../contracts/registry';
import { loadConfig, type Config } from '../../platform/infra/config';
import { dropEverything, freePort, recordQueuePrefix } from '../harness/stack';
import { ensureBuilt } from '../build-once';
import { waitForApiProcesses } from '../supervisor/ready';

export { ensureBuilt };

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A fresh database and queue prefix on the configured servers. */
export function benchConfig(env: Record<string, string> = {}): Config {
  const id = randomBytes(4).toString('hex');
  const server = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
  return loadConfig({
    ...process.env,
    MONGODB_URL: `${server}/bench_${id}`,
    QUEUE_PREFIX: recordQueuePrefix(`bench${id}.`),
    ...env,
  });
}

/** SIGTERM, then SIGKILL if the process has not left after `graceMs`. */
async function terminate(child: ChildProcess, graceMs = 30_000) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** The compiled supervisor running `kinds`; `output()` is the tail of what it printed. */
function spawnSupervisor(kinds: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ['dist/scripts/supervisor.js', ...kinds], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, output: () => output };
}

export interface SupervisedApi {
  url: string;
  /** The supervisor's monitoring server: GET /metrics gathers every API process's. */
  metricsUrl: string;
  /** The supervisor's process id (its children are the API, worker and scheduler processes). */
  pid: number;
  config: Config;
  /** Stops the supervisor and its API processes, then drops the database and the queues. */
  stop(): Promise<void>;
}

/**
 * The supervisor on a fresh database and queue prefix, API_PROCESSES=`processes`; resolves once
 * every API process is ready. `'api'` runs API processes only; `'all'` runs the whole service as
 * `npm start` does (API, every pool, the scheduler on the same cores); a list names the process
 * kinds (`['api', 'scheduler']` for an API group whose workers `startSupervisedWorkers` runs).
 */
export async function startSupervisedApi(
  processes: number,
  env: Record<string, string>,
  kinds: 'api' | 'all' | readonly ('api' | 'scheduler')[] = 'api',
): Promise<SupervisedApi> {
  await ensureBuilt();
  const port = await freePort();
  const metricsPort = await freePort();
  const config = benchConfig({
    ...env,
    PORT: String(port),
    API_PROCESSES: String(processes),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
  });
  const childEnv = {
    ...process.env,
    ...env,
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    API_PROCESSES: String(processes),
    PUBLIC_BASE_URL: config.PUBLIC_BASE_URL,
    MONGODB_URL: config.MONGODB_URL,
    QUEUE_PREFIX: config.QUEUE_PREFIX,
  };
  const { child, output } = spawnSupervisor(kinds === 'all' ? [] : kinds === 'api' ? ['api'] : [...kinds], childEnv);
  const stop = async () => {
    await terminate(child);
    await dropEverything(config); // also the names the API processes declared
  };
  try {
    await waitForApiProcesses(metricsPort, processes, 120_000, () => child.exitCode === null);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}; supervisor output:\n${output()}`);
  }
  return {
    url: `http://127.0.0.1:${port}/api/v1`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    pid: child.pid!,
    config,
    stop,
  };
}

/**
 * A second supervisor running worker processes only (`supervisor.js workers`, as production runs
 * them on machines of their own) for the service `api` started: same database and queue prefix.
 * Resolves once the code pool consumes; `stop()` stops it (the API side drops the names).
 */
export async function startSupervisedWorkers(
  api: SupervisedApi,
  env: Record<string, string>,
): Promise<{ pid: number; stop(): Promise<void> }> {
  const childEnv = {
    ...process.env,
    ...env,
    METRICS_PORT: String(await freePort()),
    MONGODB_URL: api.config.MONGODB_URL,
    QUEUE_PREFIX: api.config.QUEUE_PREFIX,
    PUBLIC_BASE_URL: api.config.PUBLIC_BASE_URL,
  };
  const { child, output } = spawnSupervisor(['workers'], childEnv);
  const stop = () => terminate(child);
  const amqp = await (await import('amqplib')).default.connect(api.config.AMQP_URL.split(',')[0]!);
  try {
    const queue = broker.poolQueue(api.config.QUEUE_PREFIX, 'code');
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ch = await amqp.createChannel();
      const { consumerCount } = await ch.checkQueue(queue).finally(() => ch.close().catch(() => {}));
      if (consumerCount > 0) break;
      if (child.exitCode !== null) throw new Error('the worker supervisor exited before the code pool consumed');
      if (Date.now() > deadline) throw new Error('the code pool did not consume within 120 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}; worker supervisor output:\n${output()}`);
  } finally {
    await amqp.close().catch(() => {});
  }
  return { pid: child.pid!, stop };
}

export interface BaselineServer {
  url: string;
  stop(): Promise<void>;
}

/** `tsx file ...args` forked with an IPC channel; resolves once it reports `{ port }` (see serveBaselineWhen). */
async function forkServer(
  file: string,
  name: string,
  opts: { args?: string[]; cwd?: string; env: Record<string, string> },
): Promise<BaselineServer> {
  const child = fork(file, opts.args ?? [], {
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(() => Promise.reject(new Error(`baseline ${name} exited`))),
  ])) as [{ port: number }];
  return { url: `http://127.0.0.1:${message.port}`, stop: () => terminate(child, 5_000) };
}

/** One bare baseline server (see baseline-server.ts for the modes) in its own process. */
export function startBaseline(
  mode: 'hello-http' | 'hello-express' | 'find' | 'insert',
  env: Record<string, string> = {},
): Promise<BaselineServer> {
  return forkServer(path.join(root, 'scripts/bench/baseline-server.ts'), mode, { args: [mode], cwd: root, env });
}

/**
 * A bench module's own baseline server: the module (`import.meta.url`) forked with `flag=mode`
 * in its environment, where its top-level serveBaselineWhen(flag, …) serves. `url` has no path.
 */
export function forkBaseline(
  moduleUrl: string,
  flag: string,
  mode: string,
  env: Record<string, string>,
): Promise<BaselineServer> {
  return forkServer(fileURLToPath(moduleUrl), `${flag}=${mode}`, { env: { ...env, [flag]: mode } });
}

/**
 * The child side of forkBaseline, at the top level of the bench module: when `flag` is set, a
 * MongoClient on MONGODB_URL (pool of `maxPoolSize`, default 20) is handed to `serve`, whose
 * handler is served by node:http on a free port of 127.0.0.1 (keep-alive 65 s); the port goes to
 * the parent over IPC. SIGTERM closes the connections, the server and the client, and exits.
 */
export async function serveBaselineWhen(
  flag: string,
  serve: (mode: string, mongo: MongoClient) => http.RequestListener | Promise<http.RequestListener>,
  { maxPoolSize = 20 } = {},
) {
  const mode = process.env[flag];
  if (!mode) return;
  const mongo = await new MongoClient(process.env.MONGODB_URL!, { maxPoolSize }).connect();
  const server = http.createServer(await serve(mode, mongo));
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void mongo.close().finally(() => process.exit(0)));
  });
}

/**
 * Start one compiled worker process running only the request/reply pool `pool` (concurrency
 * `concurrency`) on `config`'s database and queue prefix; resolves once its responder serves.
 */
export async function spawnResponderWorker(
  config: Config,
  pool: 'image' | 'speech',
  concurrency: number,
): Promise<ChildProcess> {
  await ensureBuilt();
  const c = config;
  const child = spawn(process.execPath, [path.join(root, 'dist/workers/main.js')], {
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      MONGODB_URL: c.MONGODB_URL,
      AMQP_URL: c.AMQP_URL,
      QUEUE_PREFIX: c.QUEUE_PREFIX,
      QUEUE_TYPE: c.QUEUE_TYPE,
      PUBLIC_BASE_URL: c.PUBLIC_BASE_URL,
      WORKER_POOLS: pool,
      POOL_CONCURRENCY: `${pool}=${concurrency}`,
      WORKER_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return await new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      if (out.includes('responder started')) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${pool} worker exited with ${code} before serving`)));
  });
}
