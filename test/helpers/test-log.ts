import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The whole test run logs into one file (every in-process stack and every process a test spawns
 * appends to it), at info unless TEST_LOG_LEVEL says otherwise: the access lines, warnings and
 * errors a real deployment writes. test/helpers/log-hygiene.ts reads it at the end of the run
 * and fails the run if it holds an API key, a webhook secret or a bearer token.
 */
process.env.TEST_LOG_FILE ??= path.join(root, 'test-artifacts', 'logs', `run-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}.log`);

export const testLogFile = (): string => process.env.TEST_LOG_FILE!;

/** LOG_LEVEL and LOG_FILE for a stack or a process of the test run. */
export const testLogEnv = (): { LOG_LEVEL: string; LOG_FILE: string } => ({ LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info', LOG_FILE: testLogFile() });
