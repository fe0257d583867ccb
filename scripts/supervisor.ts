/**
 * `npm start`: creates the development account on first start, then runs the API, the worker
 * pools and the scheduler as child processes. A child that dies is restarted with backoff;
 * Ctrl-C (or SIGTERM) stops them all and waits for them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');

const run = (file: string, args: string[] = []) =>
  new Promise<number>((resolve) => {
    const p = spawn(tsx, [path.join(root, file), ...args], { stdio: 'inherit', cwd: root });
    p.on('exit', (code) => resolve(code ?? 1));
  });

if ((await run('scripts/bootstrap.ts')) !== 0) {
  console.error('[supervisor] bootstrap failed; is the database up? (npm run services)');
  process.exit(1);
}

const CHILDREN = [
  { name: 'api', file: 'api/main.ts' },
  { name: 'workers', file: 'workers/main.ts' },
  { name: 'scheduler', file: 'scheduler/main.ts' },
];
const running = new Map<string, ChildProcess>();
let stopping = false;

function launch(name: string, file: string, restarts = 0) {
  const child = spawn(tsx, [path.join(root, file)], { stdio: ['ignore', 'inherit', 'inherit'], cwd: root, env: process.env });
  running.set(name, child);
  const startedAt = Date.now();
  child.on('exit', (code, signal) => {
    running.delete(name);
    if (stopping) return;
    const n = Date.now() - startedAt > 60_000 ? 0 : restarts + 1;
    const delay = Math.min(30_000, 500 * 2 ** n);
    console.error(`[supervisor] ${name} exited (${signal ?? code}); restarting in ${delay} ms`);
    setTimeout(() => !stopping && launch(name, file, n), delay);
  });
}

for (const c of CHILDREN) launch(c.name, c.file);

const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  console.error(`[supervisor] ${signal}: stopping ${[...running.keys()].join(', ')}`);
  for (const child of running.values()) child.kill('SIGTERM');
  const force = setTimeout(() => {
    for (const child of running.values()) child.kill('SIGKILL');
  }, 40_000);
  const wait = setInterval(() => {
    if (running.size === 0) {
      clearInterval(wait);
      clearTimeout(force);
      process.exit(0);
    }
  }, 100);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
