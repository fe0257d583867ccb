/**
 * `npm run build`: compile every process entry point to dist/ with esbuild (ESM for Node 24, one
 * bundle per entry point, shared code split into chunks, linked source maps so logged stack
 * traces name the TypeScript lines). Types are checked by `tsc --noEmit` in `npm test`, not here.
 *
 * esbuild rather than tsc: tsc would need a `.js` extension on every relative import of the
 * project (Node's ESM loader does not guess extensions) and emits one file per module, which
 * Node must then resolve and read one by one at every start; esbuild takes the sources as they
 * are and builds everything in well under a second (tsc's type check alone takes about 20 s).
 *
 * Runs on Node's own TypeScript support (`node scripts/build.ts`): no loader needed.
 */
import { cp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decode, encode } from '@jridgewell/sourcemap-codec';
import { build } from 'esbuild';
import { API_BUNDLE } from './build-options.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The processes an image runs, and the scripts the supervisor or an operator starts. */
export const ENTRY_POINTS = [
  'api/main.ts',
  'workers/main.ts',
  'scheduler/main.ts',
  'scripts/supervisor.ts',
  'scripts/bootstrap.ts',
  'scripts/console-link.ts',
];

/**
 * Folders of files a module reads beside itself (`new URL('./vendor/…', import.meta.url)`): each
 * is copied next to every output file that holds the module, so the same relative URL finds it
 * in dist/ (the image copies dist/ whole).
 */
export const ASSET_DIRS = [
  { module: 'workers/engines/code-builds/local.engine.ts', dir: 'workers/engines/code-builds/vendor' },
];

const started = performance.now();
const outdir = path.join(root, 'dist');
const common = {
  absWorkingDir: root,
  outdir,
  outbase: root,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  splitting: true,
  // Linked maps without the sources: platform/infra/stack-map.ts maps a logged stack back to the
  // TypeScript lines, reading a map only when a stack names its file.
  sourcemap: 'linked',
  sourcesContent: false,
  // Keep class and function names: they are what a stack trace and a log's error type show.
  keepNames: true,
  metafile: true,
  logLevel: 'warning',
} as const;
const results = await Promise.all([
  // Every process but the API: dependencies stay in node_modules (`npm ci --omit=dev` installs
  // them in the image), code shared between entry points in dist/chunks/.
  build({
    ...common,
    entryPoints: ENTRY_POINTS.filter((e) => e !== 'api/main.ts'),
    packages: 'external',
    chunkNames: 'chunks/[name]-[hash]',
  }),
  // The API with its dependencies bundled in: Node resolves, reads and compiles one file instead
  // of hundreds (express, mongodb, zod …), a quarter of its cold start (npm run bench startup).
  build({
    ...common,
    entryPoints: ['api/main.ts'],
    ...API_BUNDLE,
    chunkNames: 'api/chunks/[name]-[hash]',
  }),
]);
const files = results.flatMap((r) => Object.entries(r.metafile.outputs)).filter(([f]) => f.endsWith('.js'));
for (const { module, dir } of ASSET_DIRS) {
  const outputs = files
    .filter(([, o]) => module in o.inputs)
    .map(([f]) => path.join(root, path.dirname(f), path.basename(dir)));
  if (!outputs.length) throw new Error(`[build] no output holds ${module}, whose ${dir} must be copied`);
  for (const to of new Set(outputs)) await cp(path.join(root, dir), to, { recursive: true });
}

/**
 * The API bundle's maps without the mappings into node_modules: a logged stack is mapped to our
 * sources (platform/infra/stack-map.ts reads a map when a stack first names its file), and a map that
 * also covered every bundled dependency was 2.4 MB, 130 ms and 90 MB of memory to read.
 */
const outputs = results.flatMap((r) => Object.keys(r.metafile.outputs));
for (const file of outputs.filter((f) => f.startsWith('dist/api/') && f.endsWith('.js.map'))) {
  const map = JSON.parse(await readFile(path.join(root, file), 'utf8')) as { sources: string[]; mappings: string };
  const dependency = new Set(map.sources.flatMap((src, i) => (src.includes('node_modules/') ? [i] : [])));
  map.mappings = encode(
    decode(map.mappings).map((line) => line.filter((seg) => seg.length === 1 || !dependency.has(seg[1]!))),
  );
  await writeFile(path.join(root, file), JSON.stringify(map));
}

/**
 * dist/ is built in place, never emptied first: a running `npm start` keeps loading the chunks it
 * was built with (pools and the MCP SDK load on first use). Chunk names carry a content hash, so
 * a new build adds files beside the old ones; what no build wrote for an hour goes.
 */
const current = new Set(outputs.map((f) => path.join(root, f)));
const cutoff = Date.now() - 3_600_000;
for (const entry of await readdir(outdir, { recursive: true, withFileTypes: true })) {
  const file = path.join(entry.parentPath, entry.name);
  if (entry.isFile() && !current.has(file) && (await stat(file)).mtimeMs < cutoff) await rm(file, { force: true });
}

const bytes = files.reduce((n, [, o]) => n + o.bytes, 0);
console.log(
  `[build] ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB of JavaScript in dist/ (${Math.round(performance.now() - started)} ms)`,
);
