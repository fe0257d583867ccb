/**
 * The test suite in lanes (scripts/harness/lanes.ts): `npm test` runs it after lint, services and
 * the type check. Each lane is one mocha process (.mocharc.json); the steps of lanes.ts run one
 * after the other, the lanes of a step side by side. The parallel lanes run TEST_JOBS files at
 * once. Default 1: with 2 at once the suite took 10 minutes instead of 16 on this 2-core machine,
 * but three full runs each failed one or two different timing-bound tests (a live session's turn
 * limits, a lease's written-behind spend, a cluster node's restart), and a red CI lands nothing;
 * TEST_JOBS=2 is the fast run (see docs/testing.md for the measurements).
 *
 *   tsx scripts/test.ts                   every lane
 *   tsx scripts/test.ts --lane unit       some lanes (unit, integration, cluster, serial; may repeat)
 *   TEST_JOBS=4 tsx scripts/test.ts       files at once in the parallel lanes
 *
 * Every lane runs even when one fails; the exit status is 1 when any failed. The closing lines give
 * each lane's mocha counts ("[test] lane <name>: N passed, N failed, ...", which .ci/run sums) and
 * their sums; the time per file is printed and written to test-artifacts/timing.txt.
 */
import { spawn } from 'node:child_process';
import { existsSync, globSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './build-once';
import { lanesOf, type Lane } from './harness/lanes';
import { testLogFile } from './harness/test-log';
import { testRunDir } from './harness/test-run';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const jobs = Number(process.env.TEST_JOBS ?? 1);
if (!Number.isInteger(jobs) || jobs < 1)
  throw new Error(`TEST_JOBS must be a whole number from 1, not '${process.env.TEST_JOBS}'`);

const only = process.argv.flatMap((a, i, all) => (all[i - 1] === '--lane' ? [a] : []));
const files = globSync('test/**/*.test.ts', { cwd: root }).sort();
const steps = lanesOf(files)
  .map((step) => step.filter((l) => only.length === 0 || only.includes(l.name)))
  .filter((step) => step.length > 0);

// One folder and one log for every lane of the run; the lanes' mocha processes (and their workers) inherit both.
const runDir = testRunDir();
const logFile = testLogFile();
const timing = path.join(root, 'test-artifacts', 'timing.txt');
const previous = previousTimes();

interface Result {
  lane: Lane;
  code: number;
  ms: number;
  passing: number;
  failing: number;
  pending: number;
}

/** The last run's time per file (timing.txt, before this run overwrites it): the slowest start first. */
function previousTimes(): Map<string, number> {
  const times = new Map<string, number>();
  if (!existsSync(timing)) return times;
  for (const m of readFileSync(timing, 'utf8').matchAll(/^\s*([\d.]+) s\s+\d+ tests\s+(?:\S+\s+)?(test\/\S+)$/gm))
    if (!times.has(m[2]!)) times.set(m[2]!, Number(m[1]));
  return times;
}

/**
 * One lane's mocha. `stream`: its output goes out line by line as it comes; otherwise it is held
 * and printed in one piece at its end (a lane that runs beside the streamed one).
 */
function runLane(lane: Lane, stream: boolean): Promise<Result> {
  // One file at a time is plain mocha in one process, the files in name order (mocha's parallel
  // mode with one job loads files in another way, and some of them then load a module twice).
  const parallel = lane.parallel && jobs > 1;
  // A worker takes the next file when it is free: the longest files first keep one of them from starting last.
  const ordered = parallel
    ? [...lane.files].sort((a, b) => (previous.get(b) ?? 0) - (previous.get(a) ?? 0))
    : lane.files;
  const args = [
    path.join(root, 'node_modules/mocha/bin/mocha.js'),
    ...(parallel ? ['--parallel', '--jobs', String(jobs)] : []),
    ...ordered,
  ];
  const title = `[test] lane ${lane.name} (${lane.files.length} files${parallel ? `, ${jobs} at once` : ', one at a time'})`;
  console.log(`\n${title}${stream ? '' : ': its output follows when it ends'}`);
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, TEST_LANE: lane.name },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let sent = 0;
    const flush = (all: boolean) => {
      const end = all ? out.length : out.lastIndexOf('\n') + 1;
      if (end > sent) process.stdout.write(out.slice(sent, end));
      sent = Math.max(sent, end);
    };
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (stream) flush(false);
    });
    // Errors (a global teardown's failure among them) go to stderr as they come.
    child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (!stream) console.log(`\n${title}, ended:`);
      flush(true);
      // Mocha's summary lines (the spec reporter's epilogue, the last of its kind in the output).
      const count = (word: string) =>
        Number([...out.matchAll(new RegExp(`^\\s*(\\d+) ${word}\\b`, 'gm'))].at(-1)?.[1] ?? 0);
      resolve({
        lane,
        code: code ?? (signal ? 1 : 0),
        ms: Date.now() - t0,
        passing: count('passing'),
        failing: count('failing'),
        pending: count('pending'),
      });
    });
  });
}

const t0 = Date.now();
// dist/ once for the whole run (the tests of the compiled service read it), before any worker starts.
await ensureBuilt();
process.env.TEST_DIST_BUILT = '1';
const results: Result[] = [];
for (const step of steps) results.push(...(await Promise.all(step.map((lane, i) => runLane(lane, i === 0)))));

const sum = (k: 'passing' | 'failing' | 'pending') => results.reduce((s, r) => s + r[k], 0);
const failed = results.filter((r) => r.code !== 0);
if (existsSync(timing)) {
  // The lanes' wall times and the slowest files; the whole table is in the file.
  const text = readFileSync(timing, 'utf8');
  const [head = '', all = ''] = text.split('\n\n');
  console.log(`\n${head}\n\n${all.split('\n').slice(0, 16).join('\n')}\n  … (${path.relative(root, timing)})`);
}
console.log(`\n[test] run folder ${path.relative(root, runDir)}, log ${path.relative(root, logFile)}`);
for (const r of results)
  console.log(
    `[test] lane ${r.lane.name}: ${r.passing} passed, ${r.failing} failed, ${r.pending} pending in ${(r.ms / 1000).toFixed(0)} s${r.code === 0 ? '' : ` (exit ${r.code})`}`,
  );
console.log(
  `[test] all lanes: ${sum('passing')} passed, ${sum('failing')} failed, ${sum('pending')} pending in ${((Date.now() - t0) / 1000).toFixed(0)} s${failed.length ? `; failed lanes: ${failed.map((r) => r.lane.name).join(', ')}` : ''}`,
);
process.exitCode = failed.length ? 1 : 0;
