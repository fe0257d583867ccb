import type { PoolType } from '../contracts/registry';
import { loadConfig, type Config } from '../platform/infra/config';
import { serviceLogger } from '../platform/infra/log';
import { createRuntime } from '../platform/runtime';
import { startMonitoringServer } from '../monitoring/server';
import { startupReport, startupStep } from '../platform/infra/startup';
import { Pool } from './pool/pool';
import { consumerDefinitions, poolDefinitions, preloadPools, responderDefinitions } from './pools';
import { ConsumerPool } from './pool/consumer';
import { Responder } from './pool/responder';
import { WebhookWorker } from './webhooks/webhook.worker';

/** Start the pools named in WORKER_POOLS. `stop()` drains them, then closes connections. */
export async function start(config: Config = loadConfig(), opts: { monitoring?: boolean } = {}) {
  const log = serviceLogger(config, 'workers');
  // The pools' modules load (CPU) while the process connects (network).
  const preloading = preloadPools(config.WORKER_POOLS);
  const rt = await createRuntime(config, log);
  await startupStep('modules', () => preloading);
  const pools: Pool<unknown, Record<string, unknown>>[] = [];
  const responders: Responder<unknown, unknown>[] = [];
  const consumers: ConsumerPool<unknown>[] = [];
  let webhooks: WebhookWorker | undefined;
  const startPool = async (name: PoolType) => {
    if (name === 'webhook') {
      // Webhook deliveries are not jobs: their own consumer (workers/webhooks/).
      webhooks = WebhookWorker.fromConfig(rt);
      await webhooks.start();
      return;
    }
    const respond = responderDefinitions[name];
    if (respond) {
      // Request/reply pools (synchronous endpoints such as /images): their own consumer.
      const responder = new Responder(rt, await respond(rt), {
        concurrency: config.concurrencyOf(name),
        shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
      });
      responders.push(responder);
      await responder.start();
      return;
    }
    const consume = consumerDefinitions[name];
    if (consume) {
      // Plain consumer pools (drive text extraction): their own consumer, no job documents.
      const pool = new ConsumerPool(rt, await consume(rt), {
        concurrency: config.concurrencyOf(name),
        shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
      });
      consumers.push(pool);
      await pool.start();
      return;
    }
    const make = poolDefinitions[name];
    if (!make) {
      log.warn('pool has no engine in this build; its queue is left for another deployment', { pool: name });
      return;
    }
    const pool = new Pool(rt, await make(rt), {
      concurrency: config.concurrencyOf(name),
      leaseMs: config.JOB_LEASE_MS,
      maxAttempts: config.JOB_MAX_ATTEMPTS,
      retryDelayMs: config.JOB_RETRY_DELAY_MS,
      shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    });
    pools.push(pool);
    await pool.start();
  };
  // Every pool's consumer side by side (each its own channel).
  const started = await startupStep('pools', () => Promise.allSettled(config.WORKER_POOLS.map(startPool)));
  const unwind = async (reason: unknown): Promise<never> => {
    await Promise.allSettled([
      ...pools.map((p) => p.close()),
      ...responders.map((r) => r.close()),
      ...consumers.map((c) => c.close()),
      webhooks?.close(),
    ]);
    await rt.close();
    throw reason;
  };
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) await unwind(failed.reason);
  const monitor =
    opts.monitoring === false
      ? undefined
      : await startMonitoringServer(config.WORKER_METRICS_PORT, rt.probes).catch(unwind);
  log.info('workers ready', { pools: config.WORKER_POOLS, monitoringPort: monitor?.port, startupMs: startupReport() });
  let stopped: Promise<void> | undefined;
  return {
    runtime: rt,
    pools,
    consumers,
    webhooks,
    monitoringPort: monitor?.port,
    stop(): Promise<void> {
      stopped ??= (async () => {
        const steps = await Promise.allSettled([
          ...pools.map((p) => p.close()),
          ...responders.map((r) => r.close()),
          ...consumers.map((c) => c.close()),
          webhooks?.close(),
          monitor?.close(),
        ]);
        for (const s of steps)
          if (s.status === 'rejected') log.warn('worker stop step failed', { err: s.reason as Error });
        await rt.close();
      })();
      return stopped;
    },
  };
}
export type WorkerProcess = Awaited<ReturnType<typeof start>>;
