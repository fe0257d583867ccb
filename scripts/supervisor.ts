/**
 * `npm start [api] [workers] [scheduler]`: creates the development account on first start, then
 * runs the API (API_PROCESSES processes sharing PORT), the worker pools and the scheduler as child
 * processes; naming some of them runs only those (`npm start -- api` for an API-only machine).
 * A child that dies is restarted with backoff; Ctrl-C (or SIGTERM) stops them all and waits for
 * them.
 *
 * The API processes are node:cluster workers of this process: the supervisor is the cluster
 * primary, owns the listening socket and hands each new connection to the next API process in
 * turn (round robin), so N processes answer on one port on every Node version we run (Node 20 has
 * no `reusePort`). Every child runs its TypeScript entry point under the tsx loader
 * (`node --import tsx`), one process per child.
 */
import cluster from 'node:cluster';
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadConfig, type Config } from '../platform/config';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const execArgv = ['--import', tsxLoader];
const log = (message: string) => console.error(`[supervisor] ${message}`);

const KINDS = { api: 'api/main.ts', workers: 'workers/main.ts', scheduler: 'scheduler/main.ts' } as const;
type Kind = keyof typeof KINDS;

const asked = process.argv.slice(2);
const unknown = asked.filter((a) => !(a in KINDS));
if (unknown.length) {
  log(`unknown process kind ${unknown.join(', ')}; usage: supervisor [${Object.keys(KINDS).join('] [')}]`);
  process.exit(2);
}
const kinds = (asked.length ? [...new Set(asked)] : Object.keys(KINDS)) as Kind[];

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  log((err as Error).message);
  process.exit(78); // EX_CONFIG, as the children would
}

const running = new Map<string, ChildProcess>();
let stopping = false;

cluster.setupPrimary({ exec: path.join(root, KINDS.api), execArgv, cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });

/** Start one child: an API process is a cluster worker, the others plain children. */
function fork(kind: Kind): ChildProcess {
  if (kind === 'api') return cluster.fork().process;
  return spawn(process.execPath, [...execArgv, path.join(root, KINDS[kind])], { stdio: ['ignore', 'inherit', 'inherit'], cwd: root, env: process.env });
}

function launch(name: string, kind: Kind, restarts = 0) {
  const child = fork(kind);
  running.set(name, child);
  const startedAt = Date.now();
  child.on('exit', (code, signal) => {
    running.delete(name);
    if (stopping) return;
    const n = Date.now() - startedAt > 60_000 ? 0 : restarts + 1;
    const delay = Math.min(30_000, 500 * 2 ** n);
    log(`${name} (pid ${child.pid}) exited (${signal ?? code}); restarting in ${delay} ms`);
    setTimeout(() => !stopping && launch(name, kind, n), delay);
  });
}

cluster.on('listening', (worker, address) => {
  const name = [...running].find(([, c]) => c === worker.process)?.[0] ?? 'api';
  log(`${name} (pid ${worker.process.pid}) listening on port ${address.port}`);
});

const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  log(`${signal}: stopping ${[...running.keys()].join(', ') || 'nothing'}`);
  for (const child of running.values()) child.kill('SIGTERM');
  // Workers wait up to SHUTDOWN_GRACE_MS for jobs in flight; past that and a margin, force.
  const force = setTimeout(() => {
    for (const child of running.values()) child.kill('SIGKILL');
  }, config.SHUTDOWN_GRACE_MS + 10_000);
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

const bootstrap = spawn(process.execPath, [...execArgv, path.join(root, 'scripts/bootstrap.ts')], { stdio: ['ignore', 'inherit', 'inherit'], cwd: root });
running.set('bootstrap', bootstrap);
const code = await new Promise<number | null>((resolve) => bootstrap.on('exit', (c) => resolve(c)));
running.delete('bootstrap');
if (code !== 0 && !stopping) {
  log('bootstrap failed; is the database up? (npm run services)');
  process.exit(1);
}

if (!stopping) {
  for (const kind of kinds) {
    const count = kind === 'api' ? config.API_PROCESSES : 1;
    for (let i = 1; i <= count; i++) launch(count > 1 ? `${kind}#${i}` : kind, kind);
  }
}
