/**
 * `npm run bench [filter]`: runs every scripts/bench/*.bench.ts (or those whose name contains
 * the filter) one after another on this machine, prints each figure with its baseline and ratio,
 * and writes them to .tools/bench/latest.json.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Bench, BenchRow } from './bench';

const dir = path.dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2];
const files = readdirSync(dir).filter((f) => f.endsWith('.bench.ts') && (!filter || f.includes(filter))).sort();
const all: Record<string, BenchRow[]> = {};
console.log(`bench on ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}, ${new Date().toISOString()}`);
for (const f of files) {
  const { bench } = (await import(path.join(dir, f))) as { bench: Bench };
  console.log(`\n== ${bench.name}`);
  const rows = await bench.run();
  all[bench.name] = rows;
  for (const r of rows) {
    const base = r.baseline !== undefined ? `  baseline ${r.baseline} ${r.unit}  ratio ${r.ratio}` : '';
    console.log(`  ${r.name.padEnd(58)} ${String(r.value).padStart(10)} ${r.unit}${base}${r.note ? `  (${r.note})` : ''}`);
  }
}
const out = path.resolve(dir, '../../.tools/bench');
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, 'latest.json'), JSON.stringify({ at: new Date().toISOString(), results: all }, null, 2));
process.exit(0);
