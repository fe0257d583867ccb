/**
 * Out-of-process servers for the benchmarks: the real supervisor running only the API
 * (`supervisor.ts api`, API_PROCESSES processes on one port, no workers or scheduler, so accepted
 * jobs just queue) on a fresh database and queue prefix, and the bare baseline servers
 * (baseline-server.ts). Each helper waits until its server listens and stops it with SIGTERM.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import amqplib from 'amqplib';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { broker } from '../../contracts/registry';
import { loadConfig, type Config } from '../../platform/config';
import { dropEverything, freePort } from '../../test/helpers/stack';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A fresh database and queue prefix on the configured servers. */
export function benchConfig(env: Record<string, string> = {}): Config {
  const id = randomBytes(4).toString('hex');
  const server = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
  return loadConfig({ ...process.env, MONGODB_URL: `${server}/bench_${id}`, QUEUE_PREFIX: `bench${id}.`, ...env });
}

/**
 * Drop the run's database, queues and exchanges: dropEverything, then every registry name that
 * depends on the prefix alone, as queue and as exchange (deleting a missing one is a no-op), since
 * the API processes declared them in other processes than this one.
 */
export async function dropRun(config: Config) {
  await dropEverything(config);
  const conn = await amqplib.connect(config.AMQP_URL);
  try {
    const ch = await conn.createChannel();
    for (const name of Object.values(broker).filter((f) => f.length === 1)) {
      const n = (name as (prefix: string) => string)(config.QUEUE_PREFIX);
      await ch.deleteQueue(n);
      await ch.deleteExchange(n);
    }
    await ch.close();
  } finally {
    await conn.close();
  }
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

export interface SupervisedApi {
  url: string;
  config: Config;
  /** Stops the supervisor and its API processes, then drops the database and the queues. */
  stop(): Promise<void>;
}

/** `tsx scripts/supervisor.ts api` with API_PROCESSES=`processes`; resolves once every one listens. */
export async function startSupervisedApi(processes: number, env: Record<string, string>): Promise<SupervisedApi> {
  const port = await freePort();
  const config = benchConfig({ ...env, PORT: String(port), API_PROCESSES: String(processes), PUBLIC_BASE_URL: `http://127.0.0.1:${port}` });
  const childEnv = { ...process.env, ...env, PORT: String(port), API_PROCESSES: String(processes), PUBLIC_BASE_URL: config.PUBLIC_BASE_URL, MONGODB_URL: config.MONGODB_URL, QUEUE_PREFIX: config.QUEUE_PREFIX };
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/supervisor.ts', 'api'], { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const stop = async () => {
    await terminate(child);
    await dropRun(config);
  };
  try {
    const deadline = Date.now() + 120_000;
    while ((output.match(/\) listening on port/g) ?? []).length < processes) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`supervisor did not start ${processes} API processes:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}/api/v1`, config, stop };
}

export interface BaselineServer {
  url: string;
  stop(): Promise<void>;
}

/** One bare baseline server (see baseline-server.ts for the modes) in its own process. */
export async function startBaseline(mode: 'hello-http' | 'hello-express' | 'find' | 'insert', env: Record<string, string> = {}): Promise<BaselineServer> {
  const child = fork(path.join(root, 'scripts/bench/baseline-server.ts'), [mode], {
    cwd: root,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => Promise.reject(new Error(`baseline ${mode} exited`)))])) as [{ port: number }];
  return { url: `http://127.0.0.1:${message.port}`, stop: () => terminate(child, 5_000) };
}
