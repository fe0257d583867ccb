import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { appendRecord, readRecord, testLane } from '../../scripts/harness/test-run';

/**
 * The time each test file took, printed at the end of the run and written to
 * test-artifacts/timing.txt, slowest first, per lane of `npm test` (scripts/test.ts) and in all.
 *
 * Root hooks (.mocharc.json "require") measure: under `mocha --parallel` they run in a worker
 * around each file, so a file's time is its own, from its first hook to its last. Run serially,
 * the root hooks wrap the whole run, and a file's time is from the end of the previous file's last
 * test to the end of its own (the last file's runs to the end of the run): its before() hooks
 * (stacks starting) and tests, plus the previous file's after() hooks (stacks stopping). Either
 * way the rows go to the run's folder (scripts/harness/test-run.ts), where the global teardown,
 * in mocha's main process, reads them back.
 */
const lastSeen = new Map<string, number>();
const tests = new Map<string, number>();
let started = Date.now();
const root = path.resolve(import.meta.dirname, '../..');
const FILES = 'timing.jsonl';
const LANES = 'lanes.jsonl';

interface Row {
  lane: string;
  file: string;
  ms: number;
  tests: number;
}

interface Lane {
  lane: string;
  /** When the lane's mocha process loaded this module and when it reached its global teardown (epoch ms). */
  start: number;
  end: number;
  files: number;
}

export const mochaHooks = {
  beforeAll() {
    started = Date.now();
    lastSeen.clear();
    tests.clear();
  },
  afterEach(this: Mocha.Context) {
    const file = this.currentTest?.file;
    if (!file) return;
    lastSeen.set(file, Date.now());
    tests.set(file, (tests.get(file) ?? 0) + 1);
  },
  afterAll(this: Mocha.Context) {
    // A worker's file whose tests never ran (its before() hook failed) still took its time.
    const file = this.test?.parent?.suites[0]?.file;
    if (lastSeen.size === 0 && process.env.MOCHA_WORKER_ID !== undefined && file) lastSeen.set(file, Date.now());
    const seen = [...lastSeen].sort((a, b) => a[1] - b[1]);
    let previous = started;
    seen.forEach(([file, at], i) => {
      const end = i === seen.length - 1 ? Date.now() : at;
      const row: Row = {
        lane: testLane(),
        file: path.relative(root, file),
        ms: end - previous,
        tests: tests.get(file) ?? 0,
      };
      appendRecord(FILES, JSON.stringify(row));
      previous = end;
    });
  },
};

// Loaded by mocha's main process before it runs anything: the lane's start.
const laneStarted = Date.now();

/** Mocha global teardown (main process): this lane's table, printed, and timing.txt for every lane of the run so far. */
export function mochaGlobalTeardown() {
  const lane = testLane();
  const rows = readRecord(FILES).map((l) => JSON.parse(l) as Row);
  const mine = rows.filter((r) => r.lane === lane);
  appendRecord(LANES, JSON.stringify({ lane, start: laneStarted, end: Date.now(), files: mine.length } satisfies Lane));
  const text = timingText(
    rows,
    readRecord(LANES).map((l) => JSON.parse(l) as Lane),
  );
  mkdirSync(path.join(root, 'test-artifacts'), { recursive: true });
  writeFileSync(path.join(root, 'test-artifacts', 'timing.txt'), text);
  console.log(`\n  ${table(mine, `lane ${lane}: time per test file, slowest first`).split('\n').join('\n  ')}`);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1).padStart(7)} s`;

function table(rows: Row[], title: string, withLane = false): string {
  const sorted = [...rows].sort((a, b) => b.ms - a.ms);
  const sum = rows.reduce((s, r) => s + r.ms, 0);
  const lines = sorted.map(
    (r) =>
      `${seconds(r.ms)}  ${String(r.tests).padStart(4)} tests  ${withLane ? `${r.lane.padEnd(12)} ` : ''}${r.file}`,
  );
  return `${title} (${rows.length} files, ${(sum / 1000).toFixed(0)} s of file time)\n${lines.join('\n')}\n`;
}

/** timing.txt: the lanes (wall time against the sum of their files' times), then all files, then each lane's. */
function timingText(rows: Row[], lanes: Lane[]): string {
  // Lanes may run side by side: the run's wall time is from the first start to the last end.
  const wall = Math.max(...lanes.map((l) => l.end)) - Math.min(...lanes.map((l) => l.start));
  const first = Math.min(...lanes.map((l) => l.start));
  const head = [
    `lanes, in the order they ended (${(wall / 1000).toFixed(0)} s of wall time in all; from the run's start, lanes side by side overlap):`,
    ...lanes.map((l) => {
      const sum = rows.filter((r) => r.lane === l.lane).reduce((s, r) => s + r.ms, 0);
      return `${seconds(l.end - l.start)} wall (${((l.start - first) / 1000).toFixed(0)}-${((l.end - first) / 1000).toFixed(0)} s)  ${seconds(sum)} of file time  ${String(l.files).padStart(4)} files  ${l.lane}`;
    }),
  ].join('\n');
  const each = lanes.map((l) =>
    table(
      rows.filter((r) => r.lane === l.lane),
      `lane ${l.lane}`,
    ),
  );
  return [head, table(rows, 'every file, slowest first', true), ...each].join('\n\n');
}
