import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Stack } from './stack';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A real worker process (`tsx workers/main.ts`) on the stack's database and broker. */
export function spawnWorkerProcess(stack: Stack, env: Record<string, string>): ChildProcess {
  const c = stack.config;
  return spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    cwd: projectRoot,
    stdio: 'ignore',
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      MONGODB_URL: c.MONGODB_URL,
      AMQP_URL: c.AMQP_URL,
      QUEUE_PREFIX: c.QUEUE_PREFIX,
      QUEUE_TYPE: c.QUEUE_TYPE,
      PUBLIC_BASE_URL: c.PUBLIC_BASE_URL,
      WORKER_METRICS_PORT: '0',
      ...env,
    },
  });
}
