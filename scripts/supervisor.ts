/**
 * `npm start [api] [workers] [scheduler]`: creates the development account on first start, then
 * runs the API (API_PROCESSES processes behind one port), the worker pools and the scheduler as
 * child processes; naming some of them runs only those (`npm start -- api` for an API-only
 * machine). Ctrl-C (or SIGTERM) stops them all and waits for them.
 *
 * Crash-only: a child that dies is started again at once, then with backoff (0.5 s doubling to
 * 30 s) while it keeps dying within a minute of its start. The supervisor owns the API port
 * (scripts/supervisor/front-door.ts): it hands each connection to the next ready API process
 * and holds connections while none is ready, so a crashed API process costs clients latency,
 * not refused connections. GET /metrics on METRICS_PORT (a listener of the supervisor's, kept off
 * the API port) reports every API process (scripts/supervisor/gather.ts); the API port answers it
 * too only with METRICS_ON_API_PORT.
 *
 * Built (`dist/scripts/supervisor.js`, what `npm start` runs), it starts the compiled children
 * with plain `node`; run from source (`npm run dev`, the tests) it starts the TypeScript entry
 * points under the tsx loader. Every child has an IPC channel: if the supervisor dies, its
 * children stop instead of living on as orphans.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Counter, Registry } from 'prom-client';
import { loadConfig, type Config } from '../platform/infra/config';
import { createLogger, serviceLogger } from '../platform/infra/log';
import { startMetricsServer } from '../monitoring/metrics-server';
import { HANDOFF_ENV, isMessage, type FromApi, type ToApi } from '../platform/infra/supervision';
import { FrontDoor, type Backend } from './supervisor/front-door';
import { createGatherer } from './supervisor/gather';

const here = path.dirname(fileURLToPath(import.meta.url));
const fromSource = import.meta.url.endsWith('.ts');
/** The folder the entry points are in: the repository (source) or dist/ (built). */
const root = path.resolve(here, '..');
const ext = fromSource ? '.ts' : '.js';
const runner = fromSource ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href] : [];
let log = createLogger('info', { service: 'supervisor' });

const KINDS = { api: `api/main${ext}`, workers: `workers/main${ext}`, scheduler: `scheduler/main${ext}` } as const;
type Kind = keyof typeof KINDS;

const asked = process.argv.slice(2);
const unknown = asked.filter((a) => !(a in KINDS));
if (unknown.length) {
  log.fatal(`unknown process kind ${unknown.join(', ')}; usage: supervisor [${Object.keys(KINDS).join('] [')}]`);
  process.exit(2);
}
const kinds = (asked.length ? [...new Set(asked)] : Object.keys(KINDS)) as Kind[];

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  log.fatal((err as Error).message);
  process.exit(78); // EX_CONFIG, as the children would
}
log = serviceLogger(config, 'supervisor');

process.on('uncaughtException', (err) => {
  // The children see their IPC channel close and stop on their own.
  log.fatal('uncaught exception in the supervisor; exiting', { err });
  process.exit(70);
});

const registry = new Registry();
const restarts = new Counter({
  name: 'supervisor_process_restarts_total',
  help: 'Child processes the supervisor started again after they exited, by kind (api, workers, scheduler).',
  labelNames: ['kind'],
  registers: [registry],
});
const door = kinds.includes('api')
  ? new FrontDoor({ holdMs: config.API_HOLD_MS, maxHeld: config.API_HOLD_CONNECTIONS, log, registry })
  : undefined;
const gatherer = createGatherer({ registry, log });

interface Child {
  name: string;
  kind: Kind;
  process: ChildProcess;
  backend?: Backend;
}
const running = new Map<string, Child>();
let stopping = false;
/** GET /metrics for every API process, on METRICS_PORT (started with the API port). */
let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | undefined;

/**
 * A child in a process group of its own (detached): Ctrl-C reaches only the supervisor, which
 * stops the children once, with SIGTERM, and waits for them to drain. The IPC channel tells a
 * child when the supervisor is gone (platform/infra/main.ts stops it then).
 */
function spawnChild(name: string, file: string, env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const proc = spawn(process.execPath, [...runner, path.join(root, file)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    cwd: fromSource ? root : path.resolve(root, '..'),
    env,
    detached: true,
  });
  // A write to a child that just died fails with EPIPE: say so, never crash on it.
  proc.on('error', (err) => log.warn('child process error', { child: name, err }));
  return proc;
}

/** A message to a child, if it can still take one (its death is handled by its exit). */
function tell(child: ChildProcess, m: ToApi): void {
  if (!child.connected) return;
  child.send(m, undefined, {}, (err) => err && log.debug('message to a child not delivered', { pid: child.pid, err }));
}

function launch(name: string, kind: Kind, crashes = 0) {
  const proc = spawnChild(
    name,
    KINDS[kind],
    kind === 'api' && door ? { ...process.env, [HANDOFF_ENV]: '1' } : process.env,
  );
  const child: Child = { name, kind, process: proc };
  running.set(name, child);
  const startedAt = Date.now();
  log.info('started', { child: name, pid: proc.pid });
  if (kind === 'api' && door) {
    const backend: Backend = {
      name,
      send: (m, socket, done) => {
        if (!proc.connected) return done(new Error(`${name} has no IPC channel`));
        proc.send(m, socket, { keepOpen: true }, (err) => done(err ?? null));
      },
      tell: (m) => tell(proc, m),
    };
    child.backend = backend;
    proc.on('message', (m: unknown) => {
      if (!isMessage<FromApi>(m)) return;
      if (m.t === 'ready') {
        door.add(backend);
        log.info('api process ready', { child: name, pid: proc.pid });
      } else if (m.t === 'took') {
        door.took(m.seq, backend);
      } else if (m.t === 'draining') {
        door.remove(backend);
      } else if (m.t === 'collected') {
        gatherer.collected(m.id, name, m.metrics);
      } else if (m.t === 'metrics?') {
        gatherer.gather(door.backends()).then(
          ({ text, contentType }) => tell(proc, { t: 'metrics', id: m.id, text, contentType }),
          (err) => log.error('metrics gathering failed', { err }),
        );
      }
    });
    // 'close' comes after the process exited and its IPC channel was read to the end (a late
    // `took` among the messages): only then are the connections it never acknowledged given to
    // another process. ('disconnect' is not emitted when it dies with a handle in flight.)
    proc.on('close', () => door.remove(backend, { dead: true }));
  }
  proc.on('exit', (code, signal) => {
    running.delete(name);
    if (stopping) return;
    // Crash-only: at once the first time; with backoff while it keeps dying soon after starting.
    const n = Date.now() - startedAt > 60_000 ? 0 : crashes + 1;
    const delay = n <= 1 ? 0 : Math.min(30_000, 500 * 2 ** (n - 2));
    restarts.inc({ kind });
    log.warn('child exited; restarting', { child: name, pid: proc.pid, exit: signal ?? code, delayMs: delay });
    setTimeout(() => !stopping && launch(name, kind, n), delay);
  });
}

const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  log.info('stopping', { signal, children: [...running.keys()] });
  void door?.close();
  void metricsServer?.close();
  for (const c of running.values()) c.process.kill('SIGTERM');
  // Workers wait up to SHUTDOWN_GRACE_MS for jobs in flight; past that and a margin, force.
  const force = setTimeout(() => {
    for (const c of running.values()) c.process.kill('SIGKILL');
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

// The port accepts from the first moment: connections made while the API starts are held.
if (door) {
  const port = await door.listen(config.PORT);
  log.info('listening', { port, apiProcesses: config.API_PROCESSES, holdMs: config.API_HOLD_MS });
}
// Every API process's metrics, for Prometheus, on a port of their own (0: none).
if (door && config.METRICS_PORT !== 0) {
  metricsServer = await startMetricsServer({
    port: config.METRICS_PORT,
    host: config.METRICS_HOST,
    metrics: () => gatherer.gather(door.backends()),
  }).catch((err: Error) => {
    log.fatal(
      `the metrics port ${config.METRICS_HOST}:${config.METRICS_PORT} cannot be opened (METRICS_PORT; 0 turns it off)`,
      { err },
    );
    process.exit(1);
  });
  log.info('metrics listening', { port: metricsServer.port, host: config.METRICS_HOST });
}

const bootstrap = spawnChild('bootstrap', `scripts/bootstrap${ext}`);
running.set('bootstrap', { name: 'bootstrap', kind: 'api', process: bootstrap });
const code = await new Promise<number | null>((resolve) => bootstrap.on('exit', (c) => resolve(c)));
running.delete('bootstrap');
if (code !== 0 && !stopping) {
  log.fatal('bootstrap failed; is the database up? (npm run services)');
  process.exit(1);
}

if (!stopping) {
  for (const kind of kinds) {
    const count = kind === 'api' ? config.API_PROCESSES : 1;
    for (let i = 1; i <= count; i++) launch(count > 1 ? `${kind}#${i}` : kind, kind);
  }
}
