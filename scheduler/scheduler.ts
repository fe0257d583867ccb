import { Agenda } from 'agenda';
import { metrics } from '../monitoring/metrics';
import { startMonitoringServer } from '../monitoring/server';
import { loadConfig, type Config } from '../platform/infra/config';
import { isDatabaseUnavailable } from '../platform/infra/db-health';
import { funnelError } from '../platform/infra/error-funnel';
import { serviceLogger } from '../platform/infra/log';
import { startupReport, startupStep } from '../platform/infra/startup';
import { instanceId } from '../platform/infra/instance';
import { createRuntime, type Runtime } from '../platform/runtime';
import { inSpan } from '../platform/infra/tracing';
import { createDeliveriesRepository } from '../platform/webhooks/deliveries.repository';
import { startDeadLetterHandler } from './dead-letters';
import { agendaBackend, createAgendaTasks } from './agenda.repository';
import { createTasks } from './tasks';

/**
 * The scheduler process: Agenda on MongoDB runs the recurring tasks. Several schedulers may run;
 * Agenda's locks keep each task run single. It also drains the dead-letter queue.
 */
export async function start(config: Config = loadConfig(), opts: { monitoring?: boolean } = {}) {
  const log = serviceLogger(config, 'scheduler');
  const rt = await createRuntime(config, log);
  const tasks = createTasks(rt);
  const agenda = new Agenda({
    // Named after this process: Agenda writes the name on every lock it takes (lastModifiedBy),
    // so the locks an outage left behind can be told from another scheduler's (below).
    name: instanceId,
    backend: agendaBackend(rt.store),
    processEvery: config.SCHEDULER_PROCESS_EVERY_MS,
    defaultLockLifetime: 60_000,
  });
  // Agenda looks for due tasks every SCHEDULER_PROCESS_EVERY_MS: while the database is known to
  // be away each look fails, and the process already said so once.
  agenda.on('error', (err: Error) =>
    isDatabaseUnavailable(err) && !rt.dbHealth.up
      ? log.debug('agenda error while the database is away', { err })
      : log.error('agenda error', { err }),
  );

  // Task runs in progress in this process, by name.
  const running = new Map<string, number>();
  const releaseOutageLocks = releaseLocksAfterOutage(rt, running);
  rt.dbHealth.on('up', ({ downMs }) => void releaseOutageLocks(new Date(Date.now() - downMs)));

  const define = (name: string, run: () => Promise<unknown>) =>
    // biome-ignore lint/nursery/noMisusedPromises: Agenda awaits an async processor (define's second overload); Biome reads the first, callback-style one.
    agenda.define(name, async () => {
      running.set(name, (running.get(name) ?? 0) + 1);
      try {
        // A trace per task run (tracing on): its database commands and the jobs it republishes.
        const result = await inSpan(`task ${name}`, 'internal', { 'svc.task': name }, run);
        metrics.schedulerRuns.inc({ task: name, outcome: 'ok' });
        log.debug('task done', { task: name, result });
      } catch (err) {
        metrics.schedulerRuns.inc({ task: name, outcome: 'error' });
        funnelError(err, { source: 'scheduler', log, msg: 'task failed', logWhen: 'always', fields: { task: name } });
        throw err;
      } finally {
        running.set(name, running.get(name)! - 1);
        if (running.get(name) === 0) running.delete(name);
      }
    });

  define('jobs.sweep', tasks.sweepJobs);
  define('events.sweep', tasks.sweepEvents);
  define('credits.settle', tasks.settleCredits);
  define('audit.expire', tasks.expireAudit);
  define('idempotency.expire', tasks.expireIdempotencyKeys);
  define('ratelimits.expire', tasks.expireRateLimitWindows);
  define('dead-letters.expire', tasks.expireDeadLetters);
  define('drive.purge', () => tasks.purgeDriveTrash());
  define('drive.repair', () => tasks.repairDrive());
  define('drive.text.sweep', () => tasks.sweepDriveText());
  define('agents.sweep', () => tasks.sweepAgentRuns());
  define('live.sessions.stale', () => tasks.dropStaleLiveSessions());
  const webhookDeliveries = createDeliveriesRepository(rt.store);
  define('webhooks.deliveries.expire', () =>
    webhookDeliveries.expire(new Date(Date.now() - config.WEBHOOK_DELIVERY_RETENTION_DAYS * 86_400_000)),
  );

  const every: [string, string][] = [
    [config.SWEEP_INTERVAL, 'jobs.sweep'],
    [config.SWEEP_INTERVAL, 'events.sweep'],
    [config.SWEEP_INTERVAL, 'credits.settle'],
    ['1 hour', 'audit.expire'],
    ['1 hour', 'idempotency.expire'],
    ['10 minutes', 'ratelimits.expire'],
    ['1 hour', 'dead-letters.expire'],
    ['15 minutes', 'drive.purge'],
    ['1 minute', 'drive.repair'],
    [config.SWEEP_INTERVAL, 'drive.text.sweep'],
    [config.SWEEP_INTERVAL, 'agents.sweep'],
    [config.SWEEP_INTERVAL, 'live.sessions.stale'],
    ['1 hour', 'webhooks.deliveries.expire'],
  ];
  // The schedules (one document each) and the dead-letter consumer side by side.
  let stopDeadLetters: () => Promise<void>;
  try {
    [stopDeadLetters] = await startupStep('agenda', async () => {
      await agenda.start();
      return Promise.all([
        startDeadLetterHandler(rt),
        ...every.map(([interval, name]) => agenda.every(interval, name)),
      ]);
    });
  } catch (err) {
    await agenda.stop().catch(() => {});
    await rt.close();
    throw err;
  }
  let monitor: Awaited<ReturnType<typeof startMonitoringServer>> | undefined;
  try {
    monitor =
      opts.monitoring === false ? undefined : await startMonitoringServer(config.SCHEDULER_METRICS_PORT, rt.probes);
  } catch (err) {
    await stopDeadLetters().catch(() => {});
    await agenda.stop().catch(() => {});
    await rt.close();
    throw err;
  }
  log.info('scheduler started', {
    sweepInterval: config.SWEEP_INTERVAL,
    monitoringPort: monitor?.port,
    startupMs: startupReport(),
  });

  let stopped: Promise<void> | undefined;
  return {
    runtime: rt,
    tasks,
    agenda,
    monitoringPort: monitor?.port,
    stop(): Promise<void> {
      stopped ??= (async () => {
        const steps = await Promise.allSettled([agenda.stop(false), stopDeadLetters(), monitor?.close()]);
        for (const s of steps)
          if (s.status === 'rejected') log.warn('scheduler stop step failed', { err: s.reason as Error });
        await rt.close();
      })();
      return stopped;
    },
  };
}
export type SchedulerProcess = Awaited<ReturnType<typeof start>>;

/**
 * A task run that the database's outage interrupted cannot write its end: Agenda keeps the lock
 * it took (`lockedAt`) and nobody runs the task again until the lock is older than its lifetime
 * (60 s), which would hold the jobs sweep and the credits settlement back for a minute after the
 * database is back. So when this process sees the database again it releases the locks that it
 * took before the outage began (Agenda names this process on them) of tasks that none of its
 * runs is still running: those runs are over, and the next scan (SCHEDULER_PROCESS_EVERY_MS)
 * runs the tasks again. Another scheduler's locks are not touched.
 */
function releaseLocksAfterOutage(rt: Runtime, running: ReadonlyMap<string, number>) {
  return async (downSince: Date): Promise<void> => {
    try {
      const released = await createAgendaTasks(rt.store).releaseLocks(instanceId, downSince, [...running.keys()]);
      if (released) rt.log.info('released scheduler task locks left by the database outage', { tasks: released });
    } catch (err) {
      rt.log.warn('scheduler task locks not released; they expire by themselves within 60 s', { err: err as Error });
    }
  };
}
