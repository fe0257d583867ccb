/**
 * The broker-cluster run (`npm run chaos -- --broker-cluster`): the compiled service under its
 * supervisor on the local three-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh), quorum
 * queues, AMQP_URL listing the three nodes (every process connects to node 1 first, so node 1
 * also leads the queues they declare).
 *   1. 500 POST /code-builds at a steady 15/s, each with its own Idempotency-Key, retried with
 *      the same key until accepted (what a careful client does);
 *   2. meanwhile: the node leading the code pool's queue (rabbitmqctl list_queues leader) killed
 *      with SIGKILL, then started again; a second later another node stopped gracefully (SIGTERM:
 *      connections closed by the broker, leaders handed over), then started again;
 *   3. a webhook of the account, subscribed to code_build.completed, on a local receiver.
 * Figures: accepted, completed, lost, duplicated, credits, the webhook deliveries by event id,
 * the accept latency (first try to 202, as the client sees it) before, during and after each
 * fault, and the longest time without a publisher confirm. That last one is measured from the
 * client side: a probe AmqpClient in this process, on the same AMQP_URL and connected to the same
 * node as the service, publishes one persistent message every 20 ms to a quorum queue of its own
 * (led by that node too) and records when each confirm arrives; the longest gap between two
 * confirms is the time a publisher of the service could not get one. The service's own view is
 * beside it: its publishes that failed or waited over 1 s (amqp_publish_confirm_duration_seconds),
 * its failovers and re-sent publishes, from /metrics of the API, worker and scheduler processes.
 * Exit status 1 when a job was lost or duplicated, a credit is off, or a webhook is missing or
 * was sent under two event ids.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { AmqpClient, connectAny } from '../../platform/infra/amqp';
import { fromUnits } from '../../platform/credits/credits';
import { createLogger } from '../../platform/infra/log';
import {
  clusterLeftovers,
  clusterUp,
  releaseCluster,
  type Cluster,
  type NodeNumber,
} from '../harness/rabbitmq-cluster';
import { freePort } from '../harness/stack';
import {
  pct,
  postUntilAccepted,
  printFigures,
  sleep,
  startChaosRun,
  waitForQuiet,
  type Accepted,
  type ChaosRun,
} from './kit';

export interface BrokerClusterOptions {
  /** Code builds posted (default 500). */
  jobs?: number;
  /** Steady rate of first tries per second (default 15: 33 s, so that every phase of the faults has requests). */
  ratePerSecond?: number;
  /** Also stop and start a second node gracefully after the kill (default true). */
  gracefulStop?: boolean;
  /** The cluster (default: brought up here, and released at the end). */
  cluster?: Cluster;
  /** Print the figures table (default true). */
  print?: boolean;
}

export interface BrokerClusterResult {
  ok: boolean;
  posted: number;
  accepted: number;
  completed: number;
  lost: number;
  duplicated: number;
  creditsExact: boolean;
  webhooks: { jobsWithOneEventId: number; jobsWithSeveralEventIds: number; missing: number; receipts: number };
  longestConfirmGapMs: number;
  leaks: string[];
  figures: [string, string | number][];
}

const CODE_BUILD_PRICE = 5;

/** A webhook endpoint on loopback that records the event id and job of every request. */
async function startReceiver() {
  const got: { eventId: string; jobId: string; event: string }[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      try {
        const body = JSON.parse(raw) as { event: string; data: { jobId: string } };
        got.push({ eventId: String(req.headers['x-service-event-id']), jobId: body.data.jobId, event: body.event });
      } catch {
        // not ours
      }
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** A publisher beside the service: one confirmed publish every 20 ms; when each confirm came. */
async function startProbe(run: ChaosRun, url: string) {
  const queue = `${run.config.QUEUE_PREFIX}chaos.probe`;
  const conn = await connectAny(url);
  try {
    const ch = await conn.createChannel();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  } finally {
    await conn.close();
  }
  const client = new AmqpClient(
    url,
    {
      prefix: run.config.QUEUE_PREFIX,
      queueType: 'quorum',
      deliveryLimit: run.config.DELIVERY_LIMIT,
      pools: POOL_TYPES,
      webhookDelaysMs: run.config.WEBHOOK_RETRY_DELAYS_MS,
    },
    createLogger('silent'),
    run.config.PUBLISH_TIMEOUT_MS,
  );
  await client.start();
  const confirms: number[] = [];
  let failed = 0;
  let stop = false;
  const loop = (async () => {
    for (let n = 0; !stop; n++) {
      try {
        await client.publish('', queue, { n }, { messageId: `probe-${n}` });
        confirms.push(Date.now());
      } catch {
        failed++;
      }
      await sleep(20);
    }
  })();
  return {
    confirms,
    failed: () => failed,
    /** The longest time between two confirms within [from, to] (ms since the epoch). */
    gap(from = 0, to = Infinity) {
      const xs = confirms.filter((c) => c >= from && c <= to);
      let worst = 0;
      for (let i = 1; i < xs.length; i++) worst = Math.max(worst, xs[i]! - xs[i - 1]!);
      return worst;
    },
    async close() {
      stop = true;
      await loop;
      await client.close();
      const c = await connectAny(url);
      try {
        await (await c.createChannel()).deleteQueue(queue);
      } finally {
        await c.close();
      }
    },
  };
}

/** Sum of a metric's samples (matching `labels`) in Prometheus text. */
function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).some(([k, v]) => !line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return sum;
}

const latency = (xs: number[]) =>
  xs.length
    ? `${Math.round(pct(xs, 50))} / ${Math.round(pct(xs, 99))} / ${Math.round(Math.max(...xs))} ms (n=${xs.length})`
    : 'n/a (no request in this phase)';

// Length: a chaos scenario read top to bottom in three phases (the faults while the builds are posted, the
// webhooks, the figures) inside the one try/finally that stops the run, the receiver and the probe; the
// phases share the marks, answers and jobs they gather, and its inner functions are at most 18 lines.
export async function runBrokerClusterScenario(opts: BrokerClusterOptions = {}): Promise<BrokerClusterResult> {
  const N = opts.jobs ?? 500;
  const rate = opts.ratePerSecond ?? 15;
  const graceful = opts.gracefulStop ?? true;
  const cluster = opts.cluster ?? (await clusterUp());
  const ports = { worker: await freePort(), scheduler: await freePort() };
  const run = await startChaosRun({
    name: 'chaos_broker',
    jobMs: 200,
    credits: 10_000,
    env: {
      AMQP_URL: cluster.url,
      QUEUE_TYPE: 'quorum',
      LOG_LEVEL: 'info', // the failover lines: 'amqp connected' carries downMs
      ALLOW_LOOPBACK_URLS: 'true',
      POOL_CONCURRENCY: 'code=16',
      WORKER_METRICS_PORT: String(ports.worker),
      SCHEDULER_METRICS_PORT: String(ports.scheduler),
    },
  });
  const receiver = await startReceiver();
  let probe: Awaited<ReturnType<typeof startProbe>> | undefined;
  try {
    const hook = await fetch(`${run.base}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${run.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'chaos', url: receiver.url, events: ['code_build.completed'] }),
    });
    if (hook.status !== 201) throw new Error(`webhook create answered ${hook.status}: ${await hook.text()}`);
    probe = await startProbe(run, cluster.url);
    const codeQueue = broker.poolQueue(run.config.QUEUE_PREFIX, 'code');

    // --- the faults, while the builds are posted -----------------------------------------
    const marks: { name: string; at: number }[] = [];
    const mark = (name: string) => marks.push({ name, at: Date.now() });
    const t0 = Date.now();
    let killed: NodeNumber = 1;
    let stopped: NodeNumber | undefined;
    const fault = { restartMs: 0, stopMs: 0, startAgainMs: 0 };
    const faults = (async () => {
      await sleep(Math.min(3000, (N / rate) * 150));
      killed = (await cluster.leaderOf(codeQueue)) || 1;
      mark(`node ${killed} (leader of the code queue) killed`);
      await cluster.kill(killed);
      fault.restartMs = await cluster.start(killed);
      mark(`node ${killed} answers again`);
      if (!graceful) return;
      await sleep(1000);
      stopped = ((killed % 3) + 1) as NodeNumber;
      mark(`node ${stopped} stopped gracefully`);
      let t = Date.now();
      await cluster.stop(stopped);
      fault.stopMs = Date.now() - t;
      t = Date.now();
      fault.startAgainMs = await cluster.start(stopped);
      mark(`node ${stopped} answers again`);
    })();

    const answers: Accepted[] = [];
    const posts: Promise<void>[] = [];
    for (let i = 0; i < N; i++) {
      const due = t0 + (i * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      posts.push(
        postUntilAccepted(run, `broker-${run.id}-${i}`, { prompt: `cluster app ${i}` }).then(
          (a) => void answers.push(a),
        ),
      );
    }
    await Promise.all(posts);
    const postedFor = Date.now() - t0;
    await faults;
    await waitForQuiet(run, 300_000);

    // --- webhooks: every completed build's event, once by event id ---------------------------
    const jobs = await run.db.jobs.find({ accountId: run.accountId }).toArray();
    const complete = jobs.filter((j) => j.status === 'complete');
    const idsOf = (jobId: string) => new Set(receiver.got.filter((g) => g.jobId === jobId).map((g) => g.eventId));
    for (
      const deadline = Date.now() + 120_000;
      complete.some((j) => idsOf(j._id).size === 0) && Date.now() < deadline;
    )
      await sleep(250);
    await sleep(2000); // a late repeat, if any, arrives now
    await probe.close();
    const probeFailed = probe.failed();

    // --- figures ----------------------------------------------------------------------
    const scrape = async (url: string) =>
      await fetch(url)
        .then((r) => r.text())
        .catch(() => '');
    const texts = await Promise.all([
      scrape(`http://127.0.0.1:${run.metricsPort}/metrics`),
      scrape(`http://127.0.0.1:${ports.worker}/metrics`),
      scrape(`http://127.0.0.1:${ports.scheduler}/metrics`),
    ]);
    const sum = (name: string, labels: Record<string, string> = {}) =>
      texts.reduce((n, t) => n + metricSum(t, name, labels), 0);
    const confirmDuration = 'amqp_publish_confirm_duration_seconds';
    const slowConfirms =
      sum(`${confirmDuration}_count`, { outcome: 'confirmed' }) -
      sum(`${confirmDuration}_bucket`, { outcome: 'confirmed', le: '1' });

    const logical = new Set(answers.map((a) => a.key)).size;
    const byKey = new Map(answers.map((a) => [a.key, a]));
    const lost = [...byKey.values()].filter((a) => complete.every((j) => j._id !== a.jobId)).length;
    const duplicated = jobs.length - logical;
    const balance = fromUnits((await run.db.accounts.findOne({ _id: run.accountId }))!.millicredits);
    const spent = 10_000 - balance;
    const expected = complete.length * CODE_BUILD_PRICE;
    const perJob = complete.map((j) => idsOf(j._id).size);
    const webhooks = {
      jobsWithOneEventId: perJob.filter((n) => n === 1).length,
      jobsWithSeveralEventIds: perJob.filter((n) => n > 1).length,
      missing: perJob.filter((n) => n === 0).length,
      receipts: receiver.got.length,
    };
    const distinctEventIds = new Set(receiver.got.map((g) => g.eventId)).size;

    // Phases by the time a request was first sent.
    const at = (name: string) => marks.find((m) => m.name.startsWith(name))?.at;
    const bounds = [t0, ...marks.map((m) => m.at), Infinity];
    const phaseNames = [
      'before the kill',
      `node ${killed} killed → answering again`,
      ...(graceful ? [`after node ${killed} came back`, `node ${stopped} stopped gracefully → answering again`] : []),
      'after the faults',
    ];
    const phases = phaseNames.map((name, i) => ({ name, from: bounds[i]!, to: bounds[i + 1]! }));
    const latencyRows: [string, string][] = phases.map((p) => [
      `accept latency p50 / p99 / max, ${p.name}`,
      latency(answers.filter((a) => a.sentAt >= p.from && a.sentAt < p.to).map((a) => a.acceptedAt - a.sentAt)),
    ]);
    const killAt = at(`node ${killed} (leader`)!;
    const backAt = at(`node ${killed} answers`)!;
    const stopAt = stopped ? at(`node ${stopped} stopped`) : undefined;
    const longest = probe.gap();
    const failoverLines = run.lines().filter((l) => l.msg === 'amqp connection lost; failing over');
    const downMs = run
      .lines()
      .filter((l) => l.msg === 'amqp connected' && typeof l.downMs === 'number')
      .map((l) => l.downMs as number);
    const figures: [string, string | number][] = [
      [
        'code builds posted (each its own Idempotency-Key), steady rate',
        `${N} at ${rate}/s (${(postedFor / 1000).toFixed(1)} s)`,
      ],
      ['accepted (202)', `${logical} (${answers.filter((a) => a.tries > 1).length} after a retry)`],
      ['jobs created', jobs.length],
      ['complete / failed', `${complete.length} / ${jobs.filter((j) => j.status === 'failed').length}`],
      ['lost (accepted, never completed)', lost],
      ['duplicated (two jobs for one key)', duplicated],
      ['jobs started more than once (redelivered, taken over)', jobs.filter((j) => (j.attempts ?? 0) > 1).length],
      ['credits spent / expected (5 a build)', `${spent} / ${expected}`],
      [
        'webhook code_build.completed: builds delivered under exactly one event id',
        `${webhooks.jobsWithOneEventId} / ${complete.length}`,
      ],
      ['webhook: builds under two event ids / missing', `${webhooks.jobsWithSeveralEventIds} / ${webhooks.missing}`],
      [
        'webhook requests received (a repeat carries the same event id)',
        `${webhooks.receipts} (${distinctEventIds} event ids)`,
      ],
      [
        `fault 1: node ${killed}, leader of the code queue, SIGKILL → it answers AMQP again`,
        `${backAt - killAt} ms (start: ${fault.restartMs} ms)`,
      ],
      ...(graceful
        ? ([
            [
              `fault 2: node ${stopped} stopped gracefully (stop took) → started again`,
              `${fault.stopMs} ms → ${fault.startAgainMs} ms`,
            ],
          ] as [string, string][])
        : []),
      ['longest time without a publisher confirm (probe, 20 ms cadence), whole run', `${longest} ms`],
      [`… around the kill of node ${killed}`, `${probe.gap(killAt - 1000, backAt)} ms`],
      ...(stopAt
        ? ([
            [
              `… around the graceful stop of node ${stopped}`,
              `${probe.gap(stopAt - 1000, at(`node ${stopped} answers`) ?? Infinity)} ms`,
            ],
          ] as [string, string][])
        : []),
      ['probe publishes failed (not confirmed within PUBLISH_TIMEOUT_MS)', probeFailed],
      ...latencyRows,
      [
        'service: failovers (amqp_reconnects_total, API + worker + scheduler)',
        `${sum('amqp_reconnects_total', { outcome: 'failover' })} to another node, ${sum('amqp_reconnects_total', { outcome: 'same_node' })} to the same, ${sum('amqp_reconnects_total', { outcome: 'failed' })} rounds with no node`,
      ],
      [
        'service: failover warnings logged / connection lost → connected to another node, max',
        `${failoverLines.length} / ${downMs.length ? `${Math.max(...downMs)} ms (p50 ${pct(downMs, 50)} ms)` : 'n/a'}`,
      ],
      [
        'service: publishes sent again (connection lost / nacked)',
        `${sum('amqp_publishes_resent_total', { reason: 'connection_lost' })} / ${sum('amqp_publishes_resent_total', { reason: 'nacked' })}`,
      ],
      [
        'service: publishes failed / confirmed after more than 1 s',
        `${sum(`${confirmDuration}_count`, { outcome: 'failed' })} / ${slowConfirms}`,
      ],
      ['queue type, nodes', `quorum, 3 (RabbitMQ ${'3.10'}; PUBLISH_TIMEOUT_MS ${run.config.PUBLISH_TIMEOUT_MS})`],
    ];
    const creditsExact = spent === expected;
    const ok =
      lost === 0 &&
      duplicated === 0 &&
      creditsExact &&
      webhooks.missing === 0 &&
      webhooks.jobsWithSeveralEventIds === 0 &&
      logical === N;
    if (opts.print ?? true)
      printFigures(
        `chaos run (broker cluster: SIGKILL of the code queue's leader${graceful ? ', then a graceful stop of another node' : ''})`,
        figures,
      );
    await run.close();
    const leaks = await clusterLeftovers().catch((err: Error) => [`(could not list the cluster: ${err.message})`]);
    return {
      ok: ok && leaks.length === 0,
      posted: N,
      accepted: logical,
      completed: complete.length,
      lost,
      duplicated,
      creditsExact,
      webhooks,
      longestConfirmGapMs: longest,
      leaks,
      figures,
    };
  } catch (err) {
    await probe?.close().catch(() => {});
    await run.close().catch(() => {});
    throw err;
  } finally {
    await receiver.close();
  }
}

/** `npm run chaos -- --broker-cluster`: the full run, on a cluster brought up for it (and stopped after, if this run started it). */
export async function runBrokerCluster(): Promise<boolean> {
  try {
    const cluster = await clusterUp();
    console.log(`RabbitMQ cluster up in ${cluster.bootMs} ms: ${cluster.urls.map((u) => new URL(u).host).join(', ')}`);
    const r = await runBrokerClusterScenario({ cluster });
    if (r.leaks.length) console.log(`WARNING: the run left these on the cluster: ${r.leaks.join(', ')}`);
    return r.ok;
  } finally {
    await releaseCluster();
  }
}
