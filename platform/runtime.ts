import { POOL_TYPES, broker } from '../contracts/registry';
import { reportQueueDepth, reportReadiness } from '../monitoring/metrics';
import { probeHandler, type Probe } from '../monitoring/server';
import { createAuthInvalidations } from './accounts/accounts';
import { createAccountsRepository } from './accounts/accounts.repository';
import { AmqpClient } from './infra/amqp';
import { createBlobStore } from './infra/media-blobs';
import type { Config } from './infra/config';
import { createCredits, migrateCreditUnits } from './credits/credits';
import { armFaultPoint } from './infra/faults';
import { createJobs } from './jobs/jobs';
import type { Logger } from './infra/log';
import { connectMongo, ensureIndexes, storeOf } from './infra/mongo';
import { startupStep } from './infra/startup';

/**
 * What every process shares: MongoDB, RabbitMQ (topology declared on connect), and the
 * repositories built on them. `close()` may be called twice and runs every cleanup.
 */
export async function createRuntime(config: Config, log: Logger) {
  armFaultPoint(config.FAULT_POINT);
  const amqp = new AmqpClient(
    config.AMQP_URL,
    {
      prefix: config.QUEUE_PREFIX,
      queueType: config.QUEUE_TYPE,
      deliveryLimit: config.DELIVERY_LIMIT,
      pools: POOL_TYPES,
      webhookDelaysMs: config.WEBHOOK_RETRY_DELAYS_MS,
    },
    log.child({ component: 'amqp' }),
    config.PUBLISH_TIMEOUT_MS,
    { heartbeatS: config.AMQP_HEARTBEAT_S },
  );
  // MongoDB (connect, indexes) and RabbitMQ (connect, topology) side by side: neither needs the other.
  const [mongo, broker_] = await Promise.allSettled([
    (async () => {
      const db = await startupStep('mongodb', () =>
        connectMongo(config.MONGODB_URL, {
          maxPoolSize: config.MONGODB_MAX_POOL_SIZE,
          serverSelectionTimeoutMs: config.MONGODB_SERVER_SELECTION_TIMEOUT_MS,
        }),
      );
      try {
        await Promise.all([
          startupStep('indexes', () => ensureIndexes(db)),
          startupStep('credit-units', () => migrateCreditUnits(storeOf(db), log)),
        ]);
      } catch (err) {
        await db.close();
        throw err;
      }
      return db;
    })(),
    startupStep('rabbitmq', () => amqp.start()),
  ]);
  if (mongo.status === 'rejected' || broker_.status === 'rejected') {
    await Promise.allSettled([amqp.close(), mongo.status === 'fulfilled' ? mongo.value.close() : undefined]);
    // Both down: the first is thrown (and logged by the caller), the second said here.
    if (mongo.status === 'rejected' && broker_.status === 'rejected')
      log.error('RabbitMQ did not connect either', { err: broker_.reason as Error });
    throw mongo.status === 'rejected' ? mongo.reason : (broker_ as PromiseRejectedResult).reason;
  }
  // The connection stays here (indexes, probes, close); the rest of the code gets the opaque store
  // and reaches collections through repositories.
  const db = mongo.value;
  const store = storeOf(db);
  const credits = createCredits(store, config.CREDIT_PRICES);
  const blobs = createBlobStore(store, {
    secret: config.ASSET_SIGNING_SECRET,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    defaultTtlSeconds: config.ASSET_URL_TTL_SECONDS,
  });
  const jobs = createJobs({
    store,
    amqp,
    credits,
    log: log.child({ component: 'jobs' }),
    publicBaseUrl: config.PUBLIC_BASE_URL,
    queuePrefix: config.QUEUE_PREFIX,
    settleLeaseMs: config.IDEMPOTENCY_LEASE_MS,
    creditLeases: {
      credits: config.CREDIT_LEASE_CREDITS,
      minBalance: config.CREDIT_LEASE_MIN_BALANCE,
      ttlMs: config.CREDIT_LEASE_MS,
    },
  });
  const invalidations = createAuthInvalidations({
    store,
    amqp,
    exchange: broker.authExchange(config.QUEUE_PREFIX),
    log,
  });
  const accounts = createAccountsRepository(store, { invalidate: invalidations.publish });
  const queues = [
    ...POOL_TYPES.map((p) => broker.poolQueue(config.QUEUE_PREFIX, p)),
    broker.deadLetterQueue(config.QUEUE_PREFIX),
    broker.webhookDeliveryQueue(config.QUEUE_PREFIX),
  ];
  const unreport = reportQueueDepth({ queues, depth: (q) => amqp.queueDepth(q) });
  // Once per outage, in every process: when this process saw its database go and come back.
  db.health.on('down', ({ reason }) =>
    log.warn('database unreachable; probing it every 0.5 s until it answers', { reason }),
  );
  db.health.on('up', ({ downMs }) => log.info('database reachable again', { downMs }));
  const probes: Probe[] = [
    // A read that reaches the stored data (FerretDB answers ping while its PostgreSQL is away);
    // known down answers at once.
    {
      name: 'mongodb',
      check: () => (db.health.up ? db.reachable() : Promise.reject(new Error(`unreachable: ${db.health.reason}`))),
    },
    {
      name: 'rabbitmq',
      check: () => {
        if (!amqp.isReady()) throw new Error('not connected');
      },
    },
  ];
  const unreportReady = reportReadiness(async () => (await probeHandler(probes)).length === 0);
  let closed: Promise<void> | undefined;
  return {
    config,
    log,
    store,
    /** Whether the database answers, as far as this process knows (platform/infra/db-health.ts). */
    dbHealth: db.health,
    amqp,
    credits,
    blobs,
    jobs,
    accounts,
    /** Key and account changes made by this process (the fanout brings everyone else's). */
    authChanges: invalidations.local,
    /** Broadcast invalidations stored but never confirmed (the scheduler calls it). */
    sweepAuthInvalidations: invalidations.sweep,
    probes,
    close(): Promise<void> {
      closed ??= (async () => {
        unreport();
        unreportReady();
        await jobs.close().catch((err) => log.warn('job accept batch not written on close', { err: err as Error }));
        const results = await Promise.allSettled([amqp.close(), db.close()]);
        for (const r of results)
          if (r.status === 'rejected') log.warn('runtime close step failed', { err: r.reason as Error });
      })();
      return closed;
    },
  };
}
export type Runtime = Awaited<ReturnType<typeof createRuntime>>;
