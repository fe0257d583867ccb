import { readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The whole test run logs into one file (every in-process stack and every process a test spawns
 * appends to it), at info unless TEST_LOG_LEVEL says otherwise: the access lines, warnings and
 * errors a real deployment writes. test/helpers/log-hygiene.ts reads it at the end of the run
 * and fails the run if it holds an API key, a webhook secret or a bearer token.
 */
const dir = path.join(root, 'test-artifacts', 'logs');
if (!process.env.TEST_LOG_FILE) {
  process.env.TEST_LOG_FILE = path.join(
    dir,
    `run-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}.log`,
  );
  // The logs of the last runs stay for reading; older ones go.
  try {
    const runs = readdirSync(dir)
      .filter((f) => f.startsWith('run-') && f.endsWith('.log'))
      .map((f) => path.join(dir, f));
    for (const f of runs.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs).slice(10))
      rmSync(f, { force: true });
  } catch {
    // no folder yet
  }
}

export const testLogFile = (): string => process.env.TEST_LOG_FILE!;

/** LOG_LEVEL and LOG_FILE for a stack or a process of the test run. */
export const testLogEnv = (): { LOG_LEVEL: string; LOG_FILE: string } => ({
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
  LOG_FILE: testLogFile(),
});
