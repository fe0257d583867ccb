import { spawn, type ChildProcess } from 'node:child_process';
import type { Stack } from '../../scripts/harness/stack';
import { freePort } from '../../scripts/harness/stack';
import { projectRoot, stackEnv } from '../../scripts/harness/worker-process';

export interface ApiProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>/api/v1` */
  baseUrl: string;
  /** SIGKILL unless it already exited; resolves when it is gone. */
  kill(): Promise<void>;
}

/**
 * A real API process (`tsx api/main.ts`, or compiled: `node dist/api/main.js`, after
 * scripts/build-once.ts) on the stack's database and broker, on a free port.
 * Resolves once it answers /healthz (or rejects when it exits first or is not up in `timeoutMs`).
 */
export async function spawnApiProcess(
  stack: Stack,
  env: Record<string, string> = {},
  timeoutMs = 30_000,
  opts: { compiled?: boolean } = {},
): Promise<ApiProcess> {
  const c = stack.config;
  const port = await freePort();
  const child = spawn(process.execPath, opts.compiled ? ['dist/api/main.js'] : ['--import', 'tsx', 'api/main.ts'], {
    cwd: projectRoot,
    stdio: 'ignore',
    // No metrics listener (it would take the default METRICS_PORT): /metrics on the API port.
    env: stackEnv(stack, {
      PORT: String(port),
      METRICS_PORT: '0',
      METRICS_ON_API_PORT: 'true',
      RATE_LIMIT_MAX: String(c.RATE_LIMIT_MAX),
      RATE_LIMIT_WINDOW_SECONDS: String(c.RATE_LIMIT_WINDOW_SECONDS),
      ...env,
    }),
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`api process exited before it was up (code ${child.exitCode}, signal ${child.signalCode})`);
    const up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`api process not up after ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, baseUrl: `http://127.0.0.1:${port}/api/v1`, kill };
}
