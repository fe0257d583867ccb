import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const runs = path.join(root, 'test-artifacts', 'runs');

/**
 * One folder per test run (TEST_RUN_DIR) where every process of the run leaves what the end of
 * the run reads: the queue prefixes it invented, the time of each file it ran. Under
 * `mocha --parallel` the files run in worker processes while the checks at the end run in the
 * main one, and `npm test` runs several mocha processes (scripts/test.ts, one per lane); the
 * folder is what they share. The first caller without TEST_RUN_DIR (the runner, or mocha's main
 * process in its global setup, before any worker is forked) creates it and sets the variable,
 * which every worker and child process inherits.
 */
export function testRunDir(): string {
  let dir = process.env.TEST_RUN_DIR;
  if (!dir) {
    dir = path.join(runs, `run-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`);
    process.env.TEST_RUN_DIR = dir;
    // The folders of the last runs stay for reading; older ones go.
    try {
      const old = readdirSync(runs)
        .map((f) => path.join(runs, f))
        .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)
        .slice(9);
      for (const f of old) rmSync(f, { recursive: true, force: true });
    } catch {
      // no folder yet
    }
  }
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Appends one line to a record of the run (lines are short, and appends of a few hundred bytes
 * from several processes do not interleave), or does nothing outside a test run (benches and the
 * chaos run use the same harness without one).
 */
export function appendRecord(name: string, line: string): void {
  const dir = process.env.TEST_RUN_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  appendFileSync(path.join(dir, name), `${line}\n`);
}

/** The lines of a record of this run (none when there is no run or no such record). */
export function readRecord(name: string): string[] {
  const dir = process.env.TEST_RUN_DIR;
  const file = dir && path.join(dir, name);
  if (!file || !existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
}

/** The lane this mocha process runs (scripts/test.ts sets TEST_LANE), or `mocha` when it runs alone. */
export const testLane = (): string => process.env.TEST_LANE ?? 'mocha';
