/**
 * `npm run bench startup`: cold start of each process kind, compiled as `npm start` and the image
 * run it, against a bare node:http hello process spawned in the same run on the same Node:
 * spawn → ready (its ready log line: the API listens, a worker process consumes, the scheduler
 * runs its tasks), where the time went (each process's `startupMs` phases: imports, MongoDB
 * connect, indexes, RabbitMQ connect and topology, the rest), and resident memory at idle
 * (VmRSS two seconds after ready). The same API from source under tsx is measured for reference.
 * STARTUP_ROUNDS (default 7) sets the rounds; STARTUP_POOLS=0 skips the memory of each pool alone.
 * Runs alternate between the kinds (ROUNDS rounds after a warm-up round), medians are reported.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { POOL_TYPES } from '../../contracts/registry';
import { row, type Bench, type BenchRow } from './bench';
import { benchConfig, ensureBuilt } from './processes';
import { dropEverything } from '../harness/stack';
import { build } from 'esbuild';
import { API_BUNDLE } from '../build-options';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROUNDS = Number(process.env.STARTUP_ROUNDS ?? 7);
const IDLE_MS = 2000;

const HELLO_CJS =
  "require('node:http').createServer((q, s) => s.end('ok')).listen(0, () => console.log(JSON.stringify({ msg: 'hello ready' })));";

/**
 * scripts/bench/startup-floor.ts bundled as the API is (one ES module, its dependencies inside, the
 * same banner), beside node_modules so the driver's optional modules resolve as they do for dist/.
 */
async function buildFloor(): Promise<string> {
  const outfile = path.join(root, 'node_modules/.cache/startup-floor/floor.mjs');
  await build({
    absWorkingDir: root,
    entryPoints: ['scripts/bench/startup-floor.ts'],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    ...API_BUNDLE,
    logLevel: 'warning',
  });
  return outfile;
}

/** The bare baseline: an ES module, as the service's entry points are, that listens and says so. */
const HELLO =
  "import http from 'node:http';\nhttp.createServer((q, s) => s.end('ok')).listen(0, () => console.log(JSON.stringify({ msg: 'hello ready' })));\n";

interface Kind {
  name: string;
  args: string[];
  ready: string;
  env?: Record<string, string>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

/** Spawn, wait for the ready line, read the memory after IDLE_MS, stop. */
async function once_(
  kind: Kind,
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; rss: number; phases: Record<string, number> }> {
  const started = performance.now();
  const child = spawn(process.execPath, kind.args, {
    cwd: root,
    env: { ...env, ...kind.env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buf = '';
  const line = await new Promise<Record<string, any>>((resolve, reject) => {
    child.once('error', reject);
    const timer = setTimeout(
      () => reject(new Error(`${kind.name}: not ready after 60 s:\n${buf.slice(-2000)}`)),
      60_000,
    );
    child.once('exit', (code) =>
      reject(new Error(`${kind.name} exited (${code}) before it was ready:\n${buf.slice(-2000)}`)),
    );
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (const l of buf.split('\n')) {
        if (!l.includes(kind.ready)) continue;
        clearTimeout(timer);
        resolve(JSON.parse(l) as Record<string, any>);
      }
    });
  }).catch((err: unknown) => {
    child.kill('SIGKILL'); // not ready: nothing of it may outlive the bench
    throw err;
  });
  const ms = performance.now() - started;
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const rss = rssMb(child.pid!);
  child.removeAllListeners('exit');
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(force);
  return { ms, rss, phases: (line.startupMs as Record<string, number>) ?? {} };
}

export const bench: Bench = {
  name: 'startup',
  async run(): Promise<BenchRow[]> {
    await ensureBuilt();
    const helloDir = mkdtempSync(path.join(tmpdir(), 'startup-bench-'));
    const hello = path.join(helloDir, 'hello.mjs');
    writeFileSync(hello, HELLO);
    const floor = await buildFloor();
    const config = benchConfig();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      MONGODB_URL: config.MONGODB_URL,
      AMQP_URL: config.AMQP_URL,
      QUEUE_PREFIX: config.QUEUE_PREFIX,
      QUEUE_TYPE: config.QUEUE_TYPE,
      PORT: '0',
      WORKER_METRICS_PORT: '0',
      SCHEDULER_METRICS_PORT: '0',
      LOG_FILE: '',
    };
    delete env.LOG_FILE;
    const kinds: Kind[] = [
      { name: 'bare node:http hello', args: [hello], ready: 'hello ready' },
      // For reference: the same as a CommonJS script, which skips the ES module loader's start.
      { name: 'bare node:http hello, CommonJS (node -e)', args: ['-e', HELLO_CJS], ready: 'hello ready' },
      // The floor: the API's libraries loaded, without and with its two connections; none of our code.
      {
        name: 'floor: the API libraries, no connection',
        args: [floor],
        ready: '"msg":"floor ready"',
        env: { FLOOR_CONNECT: '0' },
      },
      { name: 'floor: the API libraries + MongoDB + RabbitMQ', args: [floor], ready: '"msg":"floor ready"' },
      { name: 'API', args: ['dist/api/main.js'], ready: '"msg":"api ready"' },
      {
        name: 'worker process, every pool',
        args: ['dist/workers/main.js'],
        ready: '"msg":"workers ready"',
        env: { WORKER_POOLS: 'all' },
      },
      {
        name: 'worker process, code pool only',
        args: ['dist/workers/main.js'],
        ready: '"msg":"workers ready"',
        env: { WORKER_POOLS: 'code' },
      },
      { name: 'scheduler', args: ['dist/scheduler/main.js'], ready: '"msg":"scheduler started"' },
      {
        name: 'API from source (tsx, development)',
        args: ['--import', 'tsx', 'api/main.ts'],
        ready: '"msg":"api ready"',
      },
    ];
    const results = new Map<string, { ms: number; rss: number; phases: Record<string, number> }[]>(
      kinds.map((k) => [k.name, []]),
    );
    // Memory of a worker process running one pool, as the Kubernetes manifests deploy them.
    const perPool = new Map<string, number>();
    let supervisorRss = NaN;
    try {
      for (const k of kinds) await once_(k, env); // warm-up: the page cache, the topology declared once
      for (let r = 0; r < ROUNDS; r++) for (const k of kinds) results.get(k.name)!.push(await once_(k, env));
      // The supervisor's own memory (its API child runs beside it; only the supervisor is read).
      supervisorRss = (
        await once_(
          { name: 'supervisor', args: ['dist/scripts/supervisor.js', 'api'], ready: '"msg":"api process ready"' },
          env,
        )
      ).rss;
      if (process.env.STARTUP_POOLS !== '0')
        for (const pool of POOL_TYPES)
          perPool.set(
            pool,
            (
              await once_(
                {
                  name: `worker ${pool}`,
                  args: ['dist/workers/main.js'],
                  ready: '"msg":"workers ready"',
                  env: { WORKER_POOLS: pool },
                },
                env,
              )
            ).rss,
          );
    } finally {
      await dropEverything(config);
      rmSync(helloDir, { recursive: true, force: true });
    }
    const bare = median(results.get(kinds[0]!.name)!.map((x) => x.ms));
    const rows: BenchRow[] = [];
    for (const k of kinds) {
      const rs = results.get(k.name)!;
      const phaseNames = [...new Set(rs.flatMap((x) => Object.keys(x.phases)))].filter((p) => p !== 'total');
      const phases = phaseNames.map((p) => `${p} ${median(rs.map((x) => x.phases[p] ?? 0))}`).join(', ');
      const isBare = k === kinds[0];
      const ms = rs.map((x) => x.ms).sort((a, b) => a - b);
      const spread = `min ${Math.round(ms[0]!)}, max ${Math.round(ms.at(-1)!)} of ${ms.length}`;
      rows.push({
        ...row(
          `${k.name}: spawn → ready`,
          median(ms),
          'ms',
          isBare ? undefined : bare,
          `${spread}${phases ? `; median phases ms: ${phases}` : ''}`,
          k.name === 'API' ? 3 : undefined,
        ),
        ...(isBare ? {} : { better: 'lower' as const }),
      });
    }
    for (const k of kinds)
      rows.push(row(`${k.name}: resident memory at idle`, median(results.get(k.name)!.map((x) => x.rss)), 'MB'));
    rows.push(row('supervisor (npm start): resident memory at idle', supervisorRss, 'MB', undefined, 'one run'));
    for (const [pool, rss] of perPool)
      rows.push(row(`worker process, ${pool} pool alone: resident memory at idle`, rss, 'MB', undefined, 'one run'));
    return rows;
  },
};
