/**
 * Tests and benches delete the queues and exchanges they declare. This checks it: the broker's
 * queues and exchanges are listed before and after the run, and whatever appeared during the run
 * under a queue prefix this process invented (recordQueuePrefix) and is still there is a leak.
 * Other runs on the machine declare their own prefixes meanwhile, so only ours count; the total
 * queue count before and after is printed for the record.
 *
 * Listing goes through `rabbitmqctl list_queues` (the management API may not be enabled), which
 * needs the local node and root (or the rabbitmq user); when it cannot list, the check is skipped
 * with a note. Registered for mocha in .mocharc.json (global setup and teardown, in mocha's main
 * process); scripts/bench/run.ts and scripts/chaos.ts take a `brokerSnapshot` first and print
 * `hygieneReport` at the end.
 *
 * Under `mocha --parallel` the prefixes are invented in worker processes: each is also written to
 * the run's folder (scripts/harness/test-run.ts), where the main process reads them at the end.
 */
import { execFile } from 'node:child_process';
import { appendRecord, readRecord, testLane, testRunDir } from './test-run';

const KEY = Symbol.for('svc-workspace.test.queuePrefixes');
const registry = globalThis as Record<symbol, unknown>;
registry[KEY] ??= new Set<string>();
/** Every QUEUE_PREFIX this process invented for a test or bench (one set per process, however this module is loaded). */
export const queuePrefixes: Set<string> = registry[KEY] as Set<string>;

/** Records a QUEUE_PREFIX this process invented, so the check at the end looks for its names; returns it. */
export function recordQueuePrefix(prefix: string): string {
  queuePrefixes.add(prefix);
  appendRecord(prefixesRecord(), prefix);
  return prefix;
}

/** One record per lane: lanes that run side by side each check only their own names. */
const prefixesRecord = () => `queue-prefixes.${testLane()}.txt`;

export interface BrokerNames {
  queues: Set<string>;
  exchanges: Set<string>;
}

const rabbitmqctl = (args: string[]) =>
  new Promise<string[]>((resolve, reject) =>
    execFile('rabbitmqctl', ['-s', ...args], { timeout: 30_000 }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`rabbitmqctl ${args[0]}: ${(stderr || err.message).trim().split('\n')[0]}`))
        : resolve(stdout.split('\n').filter((n) => n !== '')),
    ),
  );

/** The broker's queue and exchange names, or why they cannot be listed. */
export async function brokerSnapshot(
  amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
): Promise<BrokerNames | string> {
  const url = new URL(amqpUrl);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname))
    return `the broker (${url.host}) is not local, rabbitmqctl cannot list it`;
  const vhost = url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : '/';
  try {
    const [queues, exchanges] = await Promise.all([
      rabbitmqctl(['list_queues', '-p', vhost, 'name']),
      rabbitmqctl(['list_exchanges', '-p', vhost, 'name']),
    ]);
    return { queues: new Set(queues), exchanges: new Set(exchanges) };
  } catch (err) {
    return (err as Error).message;
  }
}

/** Names in `after` that were not in `before` and start with one of `prefixes`. */
export function leftovers(before: BrokerNames, after: BrokerNames, prefixes: Iterable<string> = queuePrefixes) {
  const ours = [...prefixes];
  const fresh = (now: Set<string>, then: Set<string>) =>
    [...now].filter((n) => !then.has(n) && ours.some((p) => n.startsWith(p))).sort();
  return { queues: fresh(after.queues, before.queues), exchanges: fresh(after.exchanges, before.exchanges) };
}

/**
 * Lists the broker again and compares with `before`: a summary line (the queue counts, or why there
 * is no check) and the leaks, one line each ("queue <name>", "exchange <name>").
 */
export async function hygieneReport(
  before: BrokerNames | string,
  prefixes: Set<string> = queuePrefixes,
): Promise<{ summary: string; leaks: string[] }> {
  const after = typeof before === 'string' ? before : await brokerSnapshot();
  if (typeof before === 'string' || typeof after === 'string')
    return { summary: `broker hygiene: not checked (${typeof after === 'string' ? after : before})`, leaks: [] };
  const left = leftovers(before, after, prefixes);
  return {
    summary: `broker hygiene: ${before.queues.size} queues before the run, ${after.queues.size} after (other runs on this machine count too); ${prefixes.size} queue prefixes used by this run`,
    leaks: [...left.queues.map((q) => `queue ${q}`), ...left.exchanges.map((x) => `exchange ${x}`)],
  };
}

let before: BrokerNames | string = 'not listed';

/** Mocha global setup (main process, before any worker starts): the run's folder, then the broker's names. */
export async function mochaGlobalSetup() {
  testRunDir();
  before = await brokerSnapshot();
}

/**
 * Mocha global teardown (main process, after every file): the prefixes of this process and of its
 * workers (the lane's record), checked against what the broker held at the lane's start.
 */
export async function mochaGlobalTeardown() {
  const prefixes = new Set([...queuePrefixes, ...readRecord(prefixesRecord())]);
  const { summary, leaks } = await hygieneReport(before, prefixes);
  console.log(`\n  ${summary}`);
  if (leaks.length > 0) {
    throw new Error(
      `this run left ${leaks.length} queues and exchanges on the broker under its own prefixes (a suite declared them and did not delete them):\n${leaks.map((l) => `  ${l}`).join('\n')}`,
    );
  }
}
