/**
 * Webhooks benchmarks, against the real RabbitMQ and FerretDB on this machine:
 *  (a) deliveries per second to a local receiver: N `code_build.completed` events published to
 *      the events exchange for one account with one webhook; from the first publish to the Nth
 *      signed POST received. Every delivery is fanned out, signed, POSTed, and its attempt
 *      logged in the database. Baseline: the same receiver hit by plain POSTs of the same body
 *      from this process (no queue, no database), same concurrency.
 *  (a') the same for a healthy webhook while a dead one (never answers) of the same account
 *      gets every event too: a dead endpoint holds at most WEBHOOK_ENDPOINT_CONCURRENCY slots.
 *  (b) the retry delays actually observed, against the SPEC's 1 s and 3 s targets: a receiver
 *      that fails the first two attempts of each delivery; the gap from the end of one attempt
 *      to the start of the next, from the delivery log (server-side clock).
 *  (c) the attempt timeout observed against the 5 s target, with a receiver that never answers.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { broker } from '../../contracts/registry';
import type { BusEvent } from '../../contracts/events';
import { COLLECTIONS } from '../../platform/infra/mongo';
import type { DeliveryDoc } from '../../platform/webhooks/deliveries.repository';
import { client, eventually } from '../harness/http';
import { startStack, type Stack } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';

/** The delivery log as stored (the harness holds the connection). */
const deliveriesOf = (stack: Stack) => stack.db.db.collection<DeliveryDoc>(COLLECTIONS.webhookDeliveries);

const N = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 1000);
const RETRY_SAMPLES = Number(process.env.BENCH_WEBHOOK_RETRY_SAMPLES ?? 20);

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A receiver whose answer depends on how many times it has seen an event id. */
async function receiver(answer: (seen: number) => number | 'hang') {
  const seen = new Map<string, number>();
  let total = 0;
  let ok = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      total++;
      const id = String(req.headers['x-service-event-id'] ?? '');
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      const a = answer(n);
      if (a === 'hang') return;
      if (a >= 200 && a < 300) ok++;
      res.writeHead(a).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    get total() {
      return total;
    },
    get ok() {
      return ok;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const publishEvents = async (stack: Stack, accountId: string, n: number) => {
  const exchange = broker.eventsExchange(stack.config.QUEUE_PREFIX);
  const batch = 100;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(
      [...Array(Math.min(batch, n - i)).keys()].map(() => {
        const ev: BusEvent = {
          eventId: randomUUID(),
          event: 'code_build.completed',
          accountId,
          occurredAt: new Date().toISOString(),
          data: {
            jobId: 'code_bench',
            status: 'complete',
            pollUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/code_bench`,
          },
        };
        return stack.rt.amqp.publish(exchange, ev.event, ev);
      }),
    );
  }
};

async function throughput(stack: Stack): Promise<BenchRow[]> {
  const rcv = await receiver(() => 200);
  try {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    await api.post('/webhooks', { name: 'bench', url: rcv.url, events: ['code_build.completed'] });
    const t0 = performance.now();
    await publishEvents(stack, accountId, N);
    await eventually(async () => rcv.ok >= N, 300_000, `${N} deliveries`);
    const seconds = (performance.now() - t0) / 1000;

    // Baseline: the same receiver, plain POSTs of a same-size body from this process.
    const body = JSON.stringify({
      eventId: randomUUID(),
      eventVersion: '2026-11-01',
      event: 'code_build.completed',
      occurredAt: new Date().toISOString(),
      timestamp: new Date().toISOString(),
      data: { jobId: 'code_bench', status: 'complete', pollUrl: 'http://x/api/v1/jobs/code_bench' },
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: stack.config.WEBHOOK_DELIVERY_CONCURRENCY });
    const post = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request(
          rcv.url,
          {
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'x-service-event-id': randomUUID() },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve());
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const b0 = performance.now();
    let next = 0;
    await Promise.all(
      [...Array(stack.config.WEBHOOK_DELIVERY_CONCURRENCY).keys()].map(async () => {
        while (next++ < N) await post();
      }),
    );
    const baseline = N / ((performance.now() - b0) / 1000);
    agent.destroy();
    return [
      row(
        `deliveries per second (${N} events, 1 webhook, concurrency ${stack.config.WEBHOOK_DELIVERY_CONCURRENCY})`,
        N / seconds,
        'deliveries/s',
        baseline,
        'baseline: bare keep-alive POSTs to the same receiver',
      ),
    ];
  } finally {
    await rcv.close();
  }
}

/** (a') The same, for a healthy webhook while a dead one (never answers) gets every event too. */
async function throughputBesideDeadEndpoint(stack: Stack, alone: number): Promise<BenchRow[]> {
  const n = Math.min(N, 500);
  const healthy = await receiver(() => 200);
  const dead = await receiver(() => 'hang');
  try {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    await api.post('/webhooks', { name: 'healthy', url: healthy.url, events: ['code_build.completed'] });
    const deadHook = (await api.post('/webhooks', { name: 'dead', url: dead.url, events: ['code_build.completed'] }))
      .body;
    const t0 = performance.now();
    await publishEvents(stack, accountId, n);
    await eventually(async () => healthy.ok >= n, 300_000, `${n} deliveries beside a dead endpoint`);
    const rate = n / ((performance.now() - t0) / 1000);
    await api.delete(`/webhooks/${deadHook.id}`); // its pending retries are skipped
    return [
      row(
        `deliveries per second to a healthy webhook beside a dead one (${n} events each)`,
        rate,
        'deliveries/s',
        alone,
        'baseline: the healthy webhook alone, row above',
      ),
    ];
  } finally {
    await Promise.all([healthy.close(), dead.close()]);
  }
}

async function retryDelays(stack: Stack): Promise<BenchRow[]> {
  const rcv = await receiver((seen) => (seen <= 2 ? 500 : 200));
  try {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const hook = (await api.post('/webhooks', { name: 'retries', url: rcv.url, events: ['code_build.completed'] }))
      .body;
    await publishEvents(stack, accountId, RETRY_SAMPLES);
    await eventually(async () => rcv.ok >= RETRY_SAMPLES, 60_000, 'retried deliveries');
    const docs = await eventually(async () => {
      const d = await deliveriesOf(stack).find({ webhookId: hook.id }).toArray();
      return d.length >= RETRY_SAMPLES * 3 ? d : undefined;
    });
    const byEvent = new Map<string, DeliveryDoc[]>();
    for (const d of docs) byEvent.set(d.eventId, [...(byEvent.get(d.eventId) ?? []), d]);
    const gap1: number[] = [];
    const gap2: number[] = [];
    for (const attempts of byEvent.values()) {
      const [a1, a2, a3] = attempts.sort((x, y) => x.attempt - y.attempt);
      if (!a1 || !a2 || !a3) continue;
      gap1.push(a2.at.getTime() - (a1.at.getTime() + a1.durationMs));
      gap2.push(a3.at.getTime() - (a2.at.getTime() + a2.durationMs));
    }
    return [
      row(
        `first retry delay, mean of ${gap1.length}`,
        mean(gap1),
        'ms',
        1000,
        `p95 ${percentile(gap1, 95)} ms, min ${Math.min(...gap1)} ms`,
      ),
      row(
        `second retry delay, mean of ${gap2.length}`,
        mean(gap2),
        'ms',
        3000,
        `p95 ${percentile(gap2, 95)} ms, min ${Math.min(...gap2)} ms`,
      ),
    ];
  } finally {
    await rcv.close();
  }
}

async function attemptTimeout(stack: Stack): Promise<BenchRow[]> {
  const rcv = await receiver(() => 'hang');
  try {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const hook = (await api.post('/webhooks', { name: 'hangs', url: rcv.url, events: ['code_build.completed'] })).body;
    await publishEvents(stack, accountId, 4);
    const docs = await eventually(async () => {
      const d = await deliveriesOf(stack).find({ webhookId: hook.id, attempt: 1 }).toArray();
      return d.length >= 4 ? d : undefined;
    }, 30_000);
    const ms = docs.map((d) => d.durationMs);
    await api.delete(`/webhooks/${hook.id}`); // the retries are skipped
    return [
      row(
        'attempt timeout against a receiver that never answers (4 attempts)',
        mean(ms),
        'ms',
        5000,
        `max ${Math.max(...ms)} ms`,
      ),
    ];
  } finally {
    await rcv.close();
  }
}

export const bench: Bench = {
  name: 'webhooks',
  async run() {
    const stack = await startStack({
      env: {
        ALLOW_LOOPBACK_URLS: 'true',
        LOG_LEVEL: 'silent',
        RATE_LIMIT_MAX: '1000000',
        ...(process.env.BENCH_WEBHOOK_ENV ? JSON.parse(process.env.BENCH_WEBHOOK_ENV) : {}),
      },
      scheduler: false,
    });
    try {
      const tp = await throughput(stack);
      return [
        ...tp,
        ...(await throughputBesideDeadEndpoint(stack, tp[0]!.value)),
        ...(await retryDelays(stack)),
        ...(await attemptTimeout(stack)),
      ];
    } finally {
      await stack.stop();
    }
  },
};
