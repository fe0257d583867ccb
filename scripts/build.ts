/**
 * `npm run build`: compile every process entry point to dist/ with esbuild (ESM for Node 24, one
 * bundle per entry point, shared code split into dist/chunks/, linked source maps so stack traces
 * name the TypeScript lines). Types are checked by `tsc --noEmit` in `npm test`, not here.
 *
 * esbuild rather than tsc: tsc would need a `.js` extension on every relative import of the
 * project (Node's ESM loader does not guess extensions) and emits one file per module, which
 * Node must then resolve and read one by one at every start; esbuild takes the sources as they
 * are and builds everything in well under a second (tsc's type check alone takes about 20 s).
 *
 * Runs on Node's own TypeScript support (`node scripts/build.ts`): no loader needed.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The processes an image runs, and the scripts the supervisor or an operator starts. */
export const ENTRY_POINTS = ['api/main.ts', 'workers/main.ts', 'scheduler/main.ts', 'scripts/supervisor.ts', 'scripts/bootstrap.ts', 'scripts/console-link.ts'];

const started = performance.now();
const outdir = path.join(root, 'dist');
await rm(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: ENTRY_POINTS,
  outdir,
  outbase: root,
  bundle: true,
  // Dependencies stay in node_modules (`npm ci --omit=dev` installs them in the image): native
  // modules (sharp) and packages that read their own files at run time must not be inlined.
  packages: 'external',
  platform: 'node',
  format: 'esm',
  target: 'node24',
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: 'linked',
  // Keep class and function names: they are what a stack trace and a log's error type show.
  keepNames: true,
  metafile: true,
  logLevel: 'warning',
});
const files = Object.entries(result.metafile.outputs).filter(([f]) => f.endsWith('.js'));
const bytes = files.reduce((n, [, o]) => n + o.bytes, 0);
console.log(`[build] ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB of JavaScript in dist/ (${Math.round(performance.now() - started)} ms)`);
