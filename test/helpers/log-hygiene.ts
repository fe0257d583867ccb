import { existsSync, readFileSync, statSync } from 'node:fs';
import { testLogFile } from '../../scripts/harness/test-log';

/** What must never be in a log: an API key, a webhook signing secret, a bearer credential. */
const LEAKS: [string, RegExp][] = [
  ['API key', /\bsvc_[A-Za-z0-9_-]{20,}/g],
  ['webhook secret', /\bwhsec_[A-Za-z0-9_-]{20,}/g],
  ['bearer token', /\bBearer\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]{8,}/gi],
];

/** The leaks in a log text: what kind, and the start of each (never the whole secret). */
export function findLeaks(text: string): string[] {
  const found: string[] = [];
  for (const [what, re] of LEAKS) for (const m of text.matchAll(re)) found.push(`${what}: ${m[0].slice(0, 12)}…`);
  return found;
}

/**
 * Mocha global teardown (.mocharc.json "require"; mocha's main process, after every file): the
 * run's log (scripts/harness/test-log.ts) must hold no secret. A leak fails the run, naming what
 * leaked. The main process chose the log file before forking its workers, which inherit it.
 */
export function mochaGlobalTeardown() {
  const file = testLogFile();
  if (!existsSync(file)) return;
  const text = readFileSync(file, 'utf8');
  const leaks = findLeaks(text);
  console.log(
    `\n  log hygiene: ${text.split('\n').length - 1} lines (${(statSync(file).size / 1e6).toFixed(1)} MB) in ${file}; ${leaks.length} secrets`,
  );
  if (leaks.length)
    throw new Error(
      `the test run's log holds ${leaks.length} secrets (${[...new Set(leaks)].slice(0, 10).join('; ')}): find the line that logs it and redact it`,
    );
}
