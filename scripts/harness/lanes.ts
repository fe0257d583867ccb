/**
 * The lanes of `npm test`. scripts/test.ts runs the steps of lanesOf() one after the other, the
 * lanes of a step side by side:
 *
 * - `unit`: files that start no stack and reach no shared server (pure functions, fakes on
 *   port 0), under `mocha --parallel`: a fast first answer.
 * - `integration`: every file in no list here, under `mocha --parallel --jobs N`. Each stack has
 *   its own database and queue prefix (scripts/harness/stack.ts), so files do not see each other.
 * - `cluster`: the suites of the local RabbitMQ cluster, one after the other in one process.
 * - `serial`: the files that run with nothing of this run beside them, one after the other.
 *
 * Each listed file says why it is there. A file that flakes beside others goes to `serial` with
 * its reason, unless the cause is a fixed resource (a port, a shared name) the test can stop
 * holding. A listed file that no longer exists fails the run.
 */

/**
 * The local three-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh) is brought up once per mocha
 * process, which takes a lease on it, on fixed ports (a free range of the run's own, from 25720:
 * scripts/harness/rabbitmq-cluster.ts): its suites share one process, one file after the other,
 * since each kills and restarts its nodes. It is a broker of its own, so the other files could run
 * beside it (see lanesOf).
 */
export const CLUSTER: Record<string, string> = {
  // In name order, as the suites ran before the lanes: the chaos run's killed node has the other
  // suites' time to settle before stack-failover kills it again.
  'test/broker/chaos-cluster.test.ts': 'the RabbitMQ cluster on fixed ports; kills a node under load',
  'test/broker/failover.test.ts': 'the RabbitMQ cluster on fixed ports; kills the leader node',
  'test/broker/quorum-topology.test.ts': 'the RabbitMQ cluster on fixed ports',
  'test/broker/rpc-failover.test.ts': 'the RabbitMQ cluster on fixed ports; kills the caller node',
  'test/broker/stack-failover.test.ts': 'the RabbitMQ cluster on fixed ports; kills and restarts a node',
};

/** Files that run with nothing of this run beside them: the path, and why. */
export const SERIAL: Record<string, string> = {
  'test/clients/typescript-client.test.ts':
    "imports scripts/client-gen.ts (a top-level await, which mocha's parallel workers, loading files as CommonJS, cannot compile) and starts the API in-process, whose default metrics a worker that ran another file has registered already",
  'test/jobs/outage.test.ts':
    "stops and starts the machine's RabbitMQ (with TEST_BROKER_RESTART=1): every stack beside it would lose its broker",
  'test/gateway/auth-cache.test.ts':
    'measures time: revocations and plan changes seen by another process within 250 ms',
  'test/jobs/job-cache.test.ts': 'measures time: job changes seen by another process within 250 ms',
  'test/assistant/tools.test.ts':
    'fails beside other files (2, 3 and 4 at once): the media-tools case reads the balance 10 credits short of its expectation after 30 s; passes alone, serial or under --parallel; cause not found yet',
};

/** Files that start no stack and need no shared server. */
export const UNIT: string[] = [
  'test/assistant/local-engine.test.ts',
  'test/assistant/openai-engine.test.ts',
  'test/chat/turn.test.ts',
  'test/console/html.test.ts',
  'test/deploy/manifests.test.ts',
  'test/drive/xlsx-reader.test.ts',
  'test/extract/flowchart.test.ts',
  'test/images/engine-rules.test.ts',
  'test/layout/docs.test.ts',
  'test/live/vad.test.ts',
  'test/platform/drain.test.ts',
  'test/platform/error-funnel.test.ts',
  'test/platform/log.test.ts',
  'test/platform/message.test.ts',
  'test/platform/stack-map.test.ts',
  'test/platform/write-behind.test.ts',
  'test/presentations/outline.test.ts',
  'test/presentations/slides.test.ts',
  'test/sheets/engine.test.ts',
  'test/spaces/remote-adapter.test.ts',
  'test/speech/pcm.test.ts',
  'test/video/video-rules.test.ts',
];

export interface Lane {
  name: 'unit' | 'integration' | 'cluster' | 'serial';
  files: string[];
  /** Under `mocha --parallel`, or one file after the other in one process. */
  parallel: boolean;
}

/** The lanes for these test files (paths relative to the project root): steps in order, the lanes of a step side by side. */
export function lanesOf(all: string[]): Lane[][] {
  const listed = [...Object.keys(CLUSTER), ...Object.keys(SERIAL), ...UNIT];
  const missing = listed.filter((f) => !all.includes(f));
  if (missing.length) throw new Error(`scripts/harness/lanes.ts lists files that do not exist: ${missing.join(', ')}`);
  const twice = listed.filter((f, i) => listed.indexOf(f) !== i);
  if (twice.length) throw new Error(`scripts/harness/lanes.ts lists files in two lanes: ${twice.join(', ')}`);
  return [
    [{ name: 'unit', files: UNIT, parallel: true }],
    [{ name: 'integration', files: all.filter((f) => !listed.includes(f)), parallel: true }],
    // Beside the integration lane it saved its 4-6 minutes, but on this shared, loaded machine the
    // FerretDB that both use timed out server selection (5 s) in a cluster suite: after it, then.
    [{ name: 'cluster', files: Object.keys(CLUSTER), parallel: false }],
    [{ name: 'serial', files: Object.keys(SERIAL), parallel: false }],
  ];
}
