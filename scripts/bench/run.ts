/**
 * `npm run bench [filter]`: runs every scripts/bench/*.bench.ts (or those whose name contains
 * the filter) one after another on this machine, prints each figure with its baseline and ratio
 * as it comes and a Markdown table at the end, and writes them to .tools/bench/latest.json.
 * The load average before and after is printed too: on a shared machine, figures taken under
 * other load are only provisional. At the end it checks that the benches deleted the queues and
 * exchanges they declared (a warning line lists any left under this run's prefixes).
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brokerSnapshot, hygieneReport } from '../harness/broker-hygiene';
import type { Bench, BenchRow } from './bench';

const dir = path.dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2];
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts') && (!filter || f.includes(filter)))
  .sort();
const all: Record<string, BenchRow[]> = {};
const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const startedAt = Date.now();
const brokerBefore = await brokerSnapshot();
console.log(
  `bench on ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}, ${new Date().toISOString()}, load average ${loadavg()}`,
);
for (const f of files) {
  const { bench } = (await import(path.join(dir, f))) as { bench: Bench };
  console.log(`\n== ${bench.name}`);
  const rows = await bench.run();
  all[bench.name] = rows;
  for (const r of rows) {
    const base =
      r.baseline !== undefined
        ? `  baseline ${r.baseline} ${r.unit}  ratio ${r.ratio}${r.target !== undefined ? ` (target ${r.target})` : ''}`
        : '';
    console.log(
      `  ${r.name.padEnd(58)} ${String(r.value).padStart(10)} ${r.unit}${base}${r.note ? `  (${r.note})` : ''}`,
    );
  }
}

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: n >= 100 ? 0 : 2 });
console.log(`\n| Figure | Value | Baseline (same run) | Ratio | Target | Notes |\n|---|---|---|---|---|---|`);
for (const rows of Object.values(all)) {
  for (const r of rows) {
    const lower = r.better === 'lower';
    const met = r.ratio !== undefined && r.target !== undefined && (lower ? r.ratio <= r.target : r.ratio >= r.target);
    const target =
      r.target === undefined || r.ratio === undefined
        ? ''
        : `${lower ? '≤' : '≥'} ${r.target} ${met ? 'met' : 'missed'}`;
    console.log(
      `| ${r.name} | ${fmt(r.value)} ${r.unit} | ${r.baseline !== undefined ? `${fmt(r.baseline)} ${r.unit}` : ''} | ${r.ratio ?? ''} | ${target} | ${r.note ?? ''} |`,
    );
  }
}
console.log(`\n${Math.round((Date.now() - startedAt) / 1000)} s; load average now ${loadavg()}`);

const hygiene = await hygieneReport(brokerBefore);
console.log(hygiene.summary);
if (hygiene.leaks.length > 0)
  console.log(`WARNING: the benches left these on the broker under their own prefixes: ${hygiene.leaks.join(', ')}`);

const out = path.resolve(dir, '../../.tools/bench');
mkdirSync(out, { recursive: true });
writeFileSync(
  path.join(out, 'latest.json'),
  JSON.stringify({ at: new Date().toISOString(), loadavg: os.loadavg(), results: all }, null, 2),
);
process.exit(0);
