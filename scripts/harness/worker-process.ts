import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Stack } from './stack';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The environment of a real process joining the stack: its database, broker, queues and links. */
export function stackEnv(stack: Stack, env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const c = stack.config;
  return {
    ...process.env,
    NODE_ENV: 'test',
    LOG_LEVEL: c.LOG_LEVEL,
    ...(c.LOG_FILE ? { LOG_FILE: c.LOG_FILE } : {}),
    MONGODB_URL: c.MONGODB_URL,
    AMQP_URL: c.AMQP_URL,
    QUEUE_PREFIX: c.QUEUE_PREFIX,
    QUEUE_TYPE: c.QUEUE_TYPE,
    PUBLIC_BASE_URL: c.PUBLIC_BASE_URL,
    ...env,
  };
}

/** A real worker process (`tsx workers/main.ts`) on the stack's database and broker. */
export function spawnWorkerProcess(
  stack: Stack,
  env: Record<string, string>,
  opts: { compiled?: boolean } = {},
): ChildProcess {
  return spawn(process.execPath, opts.compiled ? ['dist/workers/main.js'] : ['--import', 'tsx', 'workers/main.ts'], {
    cwd: projectRoot,
    stdio: 'ignore',
    env: stackEnv(stack, { WORKER_METRICS_PORT: '0', ...env }),
  });
}
