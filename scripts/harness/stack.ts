import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { MongoClient } from 'mongodb';
import { POOL_TYPES, SCOPES, broker, type Plan, type Scope } from '../../contracts/registry';
import type { AccountFeatures } from '../../contracts/account';
import { start as startApi, type ApiServer } from '../../api/app';
import { start as startWorkers, type WorkerProcess } from '../../workers/workers';
import { start as startScheduler, type SchedulerProcess } from '../../scheduler/scheduler';
import { loadConfig, type Config } from '../../platform/infra/config';
import { connectAny, declaredNames } from '../../platform/infra/amqp';
import { openStore, type Database } from '../../platform/infra/mongo';
import { webhookQueueNames } from '../../platform/infra/webhook-topology';
import { recordQueuePrefix } from './broker-hygiene';
import { testLogEnv } from './test-log';

export { recordQueuePrefix } from './broker-hygiene';

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });

export interface StackOptions {
  env?: Record<string, string>;
  api?: boolean;
  workers?: boolean;
  scheduler?: boolean;
}

export interface Stack {
  config: Config;
  baseUrl: string;
  api?: ApiServer;
  workers?: WorkerProcess;
  scheduler?: SchedulerProcess;
  /** The API's runtime (or the workers'/scheduler's when there is no API). */
  rt: NonNullable<ApiServer['runtime']>;
  /** The runtime's connection, for tests that read or arrange data directly (the runtime only hands out its opaque store). */
  db: Database;
  createAccount(opts?: {
    plan?: Plan;
    credits?: number;
    scopes?: Scope[];
    features?: Partial<AccountFeatures>;
  }): Promise<{ accountId: string; key: string; keyId: string }>;
  /** Another process of the same kind on the same database and broker. */
  config2(env?: Record<string, string>): Config;
  stop(): Promise<void>;
}

/**
 * Start the real API, worker pools and scheduler in this process against the real RabbitMQ and
 * the real MongoDB-compatible server, each run with its own database and queue prefix so tests
 * never see each other's data. `stop()` drops both.
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const id = randomBytes(4).toString('hex');
  const port = await freePort();
  const base = {
    NODE_ENV: 'test',
    ...testLogEnv(),
    PORT: String(port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    MONGODB_URL: `${(process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '')}/t_${id}`,
    AMQP_URL: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    QUEUE_PREFIX: recordQueuePrefix(`t${id}.`),
    // Classic by default: quorum queues are Raft groups, heavy to create and delete by the hundred
    // on one node; the suites that test quorum behaviour ask for it.
    QUEUE_TYPE: process.env.TEST_QUEUE_TYPE ?? 'classic',
    WORKER_METRICS_PORT: '0',
    SCHEDULER_METRICS_PORT: '0',
    // The suites read ${baseUrl}/metrics: the in-process API serves it on its own port.
    METRICS_ON_API_PORT: 'true',
    SWEEP_INTERVAL: '1 second',
    SCHEDULER_PROCESS_EVERY_MS: '300',
    DISPATCH_GRACE_MS: '500',
    JOB_LEASE_MS: '3000',
    JOB_RETRY_DELAY_MS: '100',
    SHUTDOWN_GRACE_MS: '5000',
    PUBLISH_TIMEOUT_MS: '2000',
    ...opts.env,
  };
  const env = (extra: Record<string, string> = {}) => loadConfig({ ...base, ...extra });
  const config = env();
  let api: Stack['api'];
  let workers: Stack['workers'];
  let scheduler: Stack['scheduler'];
  try {
    api = opts.api === false ? undefined : await startApi(config);
    workers = opts.workers === false ? undefined : await startWorkers(config);
    scheduler = opts.scheduler === false ? undefined : await startScheduler(config);
  } catch (err) {
    // A stack that failed halfway stops what it started and drops what it declared: no queue or
    // database of a failed start outlives it (the end-of-run broker check would count them).
    await Promise.allSettled([workers?.stop(), scheduler?.stop()]);
    await api?.stop().catch(() => undefined);
    await dropEverything(config).catch(() => undefined);
    throw err;
  }
  const rt = (api?.runtime ?? workers?.runtime ?? scheduler?.runtime)!;

  return {
    config,
    baseUrl: `http://127.0.0.1:${port}/api/v1`,
    api,
    workers,
    scheduler,
    rt,
    // A getter: a stack that starts no process has no runtime, and no connection to open.
    get db() {
      return openStore(rt.store);
    },
    config2: (extra) => env({ PORT: '0', ...extra }),
    async createAccount(o = {}) {
      const account = await rt.accounts.createAccount({
        name: `test ${id}`,
        plan: o.plan ?? 'pro',
        credits: o.credits ?? 1000,
        features: o.features,
      });
      const { key, doc } = await rt.accounts.forAccount(account._id).createKey({ scopes: o.scopes ?? [...SCOPES] });
      return { accountId: account._id, key, keyId: doc._id };
    },
    async stop() {
      await Promise.allSettled([workers?.stop(), scheduler?.stop()]);
      await api?.stop();
      await dropEverything(config);
    },
  };
}

/** Drop the run's database and its queues and exchanges. */
export async function dropEverything(config: Config) {
  const mongo = new MongoClient(config.MONGODB_URL);
  try {
    await mongo.connect();
    await mongo.db().dropDatabase();
  } finally {
    await mongo.close();
  }
  // AMQP_URL may list the nodes of a cluster: any live one serves.
  const conn = await connectAny(config.AMQP_URL);
  try {
    const ch = await conn.createChannel();
    // Every queue and exchange this process declared under the prefix, plus every registry name
    // that depends on the prefix alone, as queue and as exchange (deleting a missing one is a
    // no-op): the stack may have failed before declaring them, or a child process declared them.
    const names = declaredNames.get(config.QUEUE_PREFIX);
    const byPrefix = Object.values(broker)
      .filter((f) => f.length === 1)
      .map((f) => (f as (prefix: string) => string)(config.QUEUE_PREFIX));
    const queues = new Set([
      ...POOL_TYPES.map((p) => broker.poolQueue(config.QUEUE_PREFIX, p)),
      ...webhookQueueNames(config.QUEUE_PREFIX, config.WEBHOOK_RETRY_DELAYS_MS),
      ...byPrefix,
      ...(names?.queues ?? []),
    ]);
    for (const q of queues) await ch.deleteQueue(q);
    for (const x of new Set([...byPrefix, ...(names?.exchanges ?? [])])) await ch.deleteExchange(x);
    declaredNames.delete(config.QUEUE_PREFIX);
    await ch.close();
  } finally {
    await conn.close();
  }
}
