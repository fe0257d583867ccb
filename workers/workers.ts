import { loadConfig, type Config } from '../platform/config';
import { serviceLogger } from '../platform/log';
import { createRuntime } from '../platform/runtime';
import { startMonitoringServer } from '../monitoring/server';
import { markStartup, startupReport } from '../platform/startup';
import { Pool } from './pool/pool';
import { consumerDefinitions, poolDefinitions, responderDefinitions } from './pools';
import { ConsumerPool } from './pool/consumer';
import { Responder } from './pool/responder';
import { WebhookWorker } from './webhook/webhook.worker';

/** Start the pools named in WORKER_POOLS. `stop()` drains them, then closes connections. */
export async function start(config: Config = loadConfig(), opts: { monitoring?: boolean } = {}) {
  const log = serviceLogger(config, 'workers');
  const rt = await createRuntime(config, log);
  const pools: Pool<unknown, Record<string, unknown>>[] = [];
  const responders: Responder<unknown, unknown>[] = [];
  const consumers: ConsumerPool<unknown>[] = [];
  let webhooks: WebhookWorker | undefined;
  for (const name of config.WORKER_POOLS) {
    if (name === 'webhook') {
      // Webhook deliveries are not jobs: their own consumer (workers/webhook/).
      webhooks = WebhookWorker.fromConfig(rt);
      await webhooks.start();
      continue;
    }
    const respond = responderDefinitions[name];
    if (respond) {
      // Request/reply pools (synchronous endpoints such as /images): their own consumer.
      const responder = new Responder(rt, respond(rt), { concurrency: config.concurrencyOf(name), shutdownGraceMs: config.SHUTDOWN_GRACE_MS });
      await responder.start();
      responders.push(responder);
      continue;
    }
    const consume = consumerDefinitions[name];
    if (consume) {
      // Plain consumer pools (drive text extraction): their own consumer, no job documents.
      const pool = new ConsumerPool(rt, consume(rt), { concurrency: config.concurrencyOf(name), shutdownGraceMs: config.SHUTDOWN_GRACE_MS });
      await pool.start();
      consumers.push(pool);
      continue;
    }
    const make = poolDefinitions[name];
    if (!make) {
      log.warn('pool has no engine in this build; its queue is left for another deployment', { pool: name });
      continue;
    }
    const pool = new Pool(rt, make(rt), {
      concurrency: config.concurrencyOf(name),
      leaseMs: config.JOB_LEASE_MS,
      maxAttempts: config.JOB_MAX_ATTEMPTS,
      retryDelayMs: config.JOB_RETRY_DELAY_MS,
      shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    });
    await pool.start();
    pools.push(pool);
  }
  markStartup('pools');
  const monitor = opts.monitoring === false ? undefined : await startMonitoringServer(config.WORKER_METRICS_PORT, rt.probes);
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
        const steps = await Promise.allSettled([...pools.map((p) => p.close()), ...responders.map((r) => r.close()), ...consumers.map((c) => c.close()), webhooks?.close(), monitor?.close()]);
        for (const s of steps) if (s.status === 'rejected') log.warn('worker stop step failed', { err: s.reason as Error });
        await rt.close();
      })();
      return stopped;
    },
  };
}
export type WorkerProcess = Awaited<ReturnType<typeof start>>;

