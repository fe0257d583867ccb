/**
 * The local three-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh) for the suites that need
 * one (test/broker/) and for the broker-cluster chaos run. `clusterUp()` brings it up once per
 * process, however many suites ask, and takes a lease on it for this process.
 *
 * Teardown: when this module is loaded by mocha, a root `after` hook checks that no queue or
 * exchange under this run's prefixes is left on the cluster, then releases the lease. The script
 * stops the cluster when the last live lease goes and a leased `up` had started it: a test run
 * stops what it started (the machine is shared, and three idle Erlang VMs are not free), while a
 * cluster someone brought up by hand, or one that another run is still using, is left running.
 * The nodes' data is kept, so the next run boots them without forming the cluster again (about
 * 12 s here on 2 cores, against about 19 s from nothing, as CI does from a fresh clone).
 * RMQ_CLUSTER_KEEP=1 leaves it running (for running one file again and again).
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { amqpUrls } from '../../platform/infra/amqp';
import { queuePrefixes } from './broker-hygiene';
import { projectRoot } from './worker-process';

const run = promisify(execFile);
const script = path.join(projectRoot, 'scripts/rabbitmq-cluster.sh');

export type NodeNumber = 1 | 2 | 3;

export interface QueueInfo {
  name: string;
  type: string;
  /** Node number (1-3) of the leader, or 0 when it has none. */
  leader: NodeNumber | 0;
  members: NodeNumber[];
  arguments: Record<string, unknown>;
}

export interface Cluster {
  /** The AMQP_URL value: the three nodes, comma-separated. */
  url: string;
  urls: string[];
  /** Node n's `host:port`, as a client names the node it is connected to. */
  node(n: NodeNumber): string;
  /** How long `up` took (ms). */
  bootMs: number;
  /** SIGKILL node n's VM; resolves when it is gone. */
  kill(n: NodeNumber): Promise<void>;
  /** Stop node n gracefully. */
  stop(n: NodeNumber): Promise<void>;
  /** Start node n again; resolves (with the time it took) once it answers AMQP. */
  start(n: NodeNumber): Promise<number>;
  /** rabbitmqctl against node n; its stdout. */
  ctl(n: NodeNumber, ...args: string[]): Promise<string>;
  /** Whether node n's VM runs. */
  running(n: NodeNumber): Promise<boolean>;
  /** The queues whose names start with `prefix`, as a live node sees them. */
  queues(prefix: string): Promise<QueueInfo[]>;
  /** The node that leads `queue` (0: none). */
  leaderOf(queue: string): Promise<NodeNumber | 0>;
}

const sh = async (args: string[], timeoutMs = 180_000) => {
  try {
    const { stdout } = await run('bash', [script, ...args], { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(
      `scripts/rabbitmq-cluster.sh ${args.join(' ')} failed: ${(e.stderr || e.message).trim().split('\n').slice(-8).join('\n')}`,
    );
  }
};

const nodeNumber = (name: unknown): NodeNumber | 0 => {
  const m = /^svc-rmq([123])@/.exec(String(name ?? ''));
  return m ? (Number(m[1]) as NodeNumber) : 0;
};

async function status(): Promise<Record<NodeNumber, boolean>> {
  const out = await sh(['status'], 30_000);
  const up = (n: number) => new RegExp(`^svc-rmq${n}@\\S+\\s+pid \\d+`, 'm').test(out);
  return { 1: up(1), 2: up(2), 3: up(3) };
}

/** rabbitmqctl on the first node that runs (the listing is the cluster's, whichever node answers). */
async function ctlAny(...args: string[]): Promise<string> {
  const s = await status();
  const n = ([1, 2, 3] as const).find((k) => s[k]);
  if (!n) throw new Error('no node of the cluster runs');
  return sh(['ctl', String(n), ...args], 60_000);
}

function handle(url: string, bootMs: number): Cluster {
  return {
    url,
    urls: amqpUrls(url),
    node: (n) => new URL(amqpUrls(url)[n - 1]!).host,
    bootMs,
    kill: async (n) => void (await sh(['kill', String(n)], 30_000)),
    stop: async (n) => void (await sh(['stop', String(n)], 90_000)),
    async start(n) {
      const t = performance.now();
      await sh(['start', String(n)]);
      return Math.round(performance.now() - t);
    },
    ctl: (n, ...args) => sh(['ctl', String(n), ...args], 60_000),
    running: async (n) => (await status())[n],
    async queues(prefix) {
      const out = await ctlAny(
        'list_queues',
        '-q',
        'name',
        'type',
        'leader',
        'members',
        'arguments',
        '--formatter',
        'json',
      );
      const rows = JSON.parse(out.slice(out.indexOf('['))) as {
        name: string;
        type: string;
        leader?: string;
        members?: string[] | string;
        arguments?: unknown;
      }[];
      return rows
        .filter((r) => r.name.startsWith(prefix))
        .map((r) => ({
          name: r.name,
          type: r.type,
          leader: nodeNumber(r.leader),
          members: (Array.isArray(r.members) ? r.members : []).map(nodeNumber).filter((m): m is NodeNumber => m !== 0),
          arguments: argumentsOf(r.arguments),
        }));
    },
    async leaderOf(queue) {
      const out = await ctlAny('list_queues', '-q', 'name', 'leader', '--formatter', 'json');
      const rows = JSON.parse(out.slice(out.indexOf('['))) as { name: string; leader?: string }[];
      return nodeNumber(rows.find((r) => r.name === queue)?.leader);
    },
  };
}

/** rabbitmqctl (3.10, --formatter json) prints arguments as [name, AMQP type, value] triples. */
function argumentsOf(raw: unknown): Record<string, unknown> {
  if (!Array.isArray(raw)) return raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  return Object.fromEntries(
    raw.filter((t): t is unknown[] => Array.isArray(t) && t.length >= 2).map((t) => [String(t[0]), t.at(-1)]),
  );
}

let up: Promise<Cluster> | undefined;

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

/**
 * Under a test run (TEST_RUN_DIR) and unless RMQ_CLUSTER_BASE_PORT says otherwise, a port range
 * whose ports are all free and a folder of that range's own: the suites kill and restart nodes,
 * so two test runs on the machine (two worktrees, two helpers) must not share one cluster. The
 * folder stays under .tools, so a later run on the same range boots the nodes it formed.
 * RMQ_CLUSTER_KEEP=1 (a cluster left up to run one file again and again) keeps the default range.
 */
async function ownRange(): Promise<void> {
  const env = process.env;
  if (env.RMQ_CLUSTER_BASE_PORT || !env.TEST_RUN_DIR || env.RMQ_CLUSTER_KEEP === '1') return;
  for (let base = 25720; base <= 25980; base += 20) {
    const ports = [0, 1, 2, 3, 11, 12, 13].map((d) => base + d);
    if ((await Promise.all(ports.map(portFree))).every(Boolean)) {
      env.RMQ_CLUSTER_BASE_PORT = String(base);
      env.RMQ_CLUSTER_DIR = path.join(projectRoot, '.tools', `rabbitmq-cluster-${base}`);
      return;
    }
  }
}

/** The cluster, up (started if need be, once per process), with this process's lease on it. */
export function clusterUp(): Promise<Cluster> {
  up ??= (async () => {
    await ownRange();
    const t = performance.now();
    const out = await sh(['up', '--lease', String(process.pid)]);
    const url = out.trim().split('\n').at(-1) ?? '';
    if (amqpUrls(url).length !== 3)
      throw new Error(`scripts/rabbitmq-cluster.sh up printed no AMQP_URL of three nodes:\n${out}`);
    return handle(url, Math.round(performance.now() - t));
  })();
  up.catch(() => (up = undefined));
  return up;
}

/** Queues and exchanges under this process's queue prefixes still on the cluster. */
export async function clusterLeftovers(): Promise<string[]> {
  const ours = [...queuePrefixes];
  const listed = async (what: 'list_queues' | 'list_exchanges') =>
    (await ctlAny(what, '-q', 'name'))
      .split('\n')
      .map((l) => l.trim())
      .filter((n) => ours.some((p) => n.startsWith(p)));
  return [
    ...(await listed('list_queues')).map((q) => `queue ${q}`),
    ...(await listed('list_exchanges')).map((x) => `exchange ${x}`),
  ];
}

/** Give this process's lease back (the script stops the cluster if this was the last user of one a lease started). */
export async function releaseCluster(): Promise<void> {
  if (!up) return;
  up = undefined;
  if (process.env.RMQ_CLUSTER_KEEP === '1') return;
  await sh(['release', String(process.pid)]);
}

// Under mocha: one root hook for the whole run, whichever suite loaded this module first.
if (typeof after === 'function') {
  after(async function () {
    if (!up) return;
    this.timeout(180_000);
    await up.catch(() => undefined);
    let leaks: string[] = [];
    try {
      leaks = await clusterLeftovers();
    } finally {
      await releaseCluster();
    }
    if (leaks.length)
      throw new Error(
        `this run left ${leaks.length} queues and exchanges on the RabbitMQ cluster under its own prefixes:\n${leaks.map((l) => `  ${l}`).join('\n')}`,
      );
  });
}
