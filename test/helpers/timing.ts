import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Mocha root hooks (.mocharc.json "require"): the time each test file took, printed at the end
 * of the run and written to test-artifacts/timing.txt, slowest first. Files run one after the
 * other, so a file's time is from the end of the previous file's last test to the end of its own
 * last test: its before() hooks (stacks starting) and tests, plus the previous file's after()
 * hooks (stacks stopping), which is what a reader deciding what to speed up needs.
 */
const lastSeen = new Map<string, number>();
const tests = new Map<string, number>();
const started = Date.now();

export const mochaHooks = {
  afterEach(this: Mocha.Context) {
    const file = this.currentTest?.file;
    if (!file) return;
    lastSeen.set(file, Date.now());
    tests.set(file, (tests.get(file) ?? 0) + 1);
  },
  afterAll() {
    const root = path.resolve(import.meta.dirname, '../..');
    const rows: { file: string; ms: number; tests: number }[] = [];
    let previous = started;
    for (const [file, at] of [...lastSeen].sort((a, b) => a[1] - b[1])) {
      rows.push({ file: path.relative(root, file), ms: at - previous, tests: tests.get(file) ?? 0 });
      previous = at;
    }
    rows.sort((a, b) => b.ms - a.ms);
    const total = Date.now() - started;
    const lines = rows.map(
      (r) => `${(r.ms / 1000).toFixed(1).padStart(7)} s  ${String(r.tests).padStart(4)} tests  ${r.file}`,
    );
    const text = `time per test file, slowest first (${rows.length} files, ${(total / 1000).toFixed(0)} s in all)\n${lines.join('\n')}\n`;
    mkdirSync(path.join(root, 'test-artifacts'), { recursive: true });
    writeFileSync(path.join(root, 'test-artifacts', 'timing.txt'), text);
    console.log(`\n  ${text.split('\n').join('\n  ')}`);
  },
};
