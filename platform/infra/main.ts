import { loadConfig, type Config } from './config';
import { funnelError } from './error-funnel';
import { createLogger, serviceLogger } from './log';
import { UnsupportedServerError } from './mongo';
import { markImportsDone } from './startup';
import { flushTracing, initTracing, shutdownTracing, tracingOn } from './tracing';

/**
 * Entry point helper: parse config (a bad key stops before any connection), start, stop on
 * SIGINT/SIGTERM, and route process-level errors through the same funnel as requests.
 *
 * Crash-only: an uncaught exception or unhandled rejection leaves the process in a state nobody
 * designed (Node's docs), so it is logged with its stack (the log is written synchronously) and
 * the process exits with status 70 at once; the supervisor, or the orchestrator, starts a new
 * one. Work in flight is safe: unacked messages go back to their queue, jobs keep their leases,
 * idempotency records and credit charges are written to survive exactly this. With tracing on,
 * the spans already ended get a short, bounded flush first (CRASH_FLUSH_MS), never a hang.
 *
 * Tracing (platform/infra/tracing.ts) is set up before start() when the environment configures an
 * exporter; its service.name defaults to `svc-<name>`. A graceful stop flushes it last.
 */
/** sysexits.h EX_SOFTWARE: an internal error; the supervisor restarts the process. */
const EX_SOFTWARE = 70;
/** How long a crashing process waits for its ended spans to be exported. */
const CRASH_FLUSH_MS = 1000;
/** How long a stopping process waits for its spans to be exported. */
const STOP_FLUSH_MS = 5000;

export function runMain(name: string, start: (config: Config) => Promise<{ stop(): Promise<void> }>) {
  markImportsDone();
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    createLogger('info', { service: name }).fatal((err as Error).message);
    process.exit(78); // EX_CONFIG
  }
  const log = serviceLogger(config, name);
  let crashing = false;
  const crash = (source: string) => (err: unknown) => {
    funnelError(err, {
      source: 'process',
      log,
      msg: `${source} in ${name}; exiting`,
      logWhen: 'always',
      level: 'fatal',
    });
    if (!tracingOn) process.exit(EX_SOFTWARE);
    if (crashing) return; // a second error while the spans flush: the exit is on its way
    crashing = true;
    setTimeout(() => process.exit(EX_SOFTWARE), CRASH_FLUSH_MS + 100);
    void flushTracing(CRASH_FLUSH_MS).finally(() => process.exit(EX_SOFTWARE));
  };
  process.on('unhandledRejection', crash('unhandled rejection'));
  process.on('uncaughtException', crash('uncaught exception'));
  initTracing({ serviceName: `svc-${name}`, log })
    .then(() => start(config))
    .then(
      (proc) => {
        let stopping = false;
        const stop = (signal: string) => {
          // A second signal while draining: stop now (unacked work goes back to the queues).
          if (stopping) process.exit(1);
          stopping = true;
          log.info('stopping', { signal });
          proc.stop().then(
            () => shutdownTracing(STOP_FLUSH_MS).finally(() => process.exit(0)),
            (err) => {
              log.error('stop failed', { err: err as Error });
              void shutdownTracing(STOP_FLUSH_MS).finally(() => process.exit(1));
            },
          );
        };
        process.on('SIGINT', () => stop('SIGINT'));
        process.on('SIGTERM', () => stop('SIGTERM'));
        // Started by the supervisor (an IPC channel): when it dies, leave with it, not as an orphan.
        process.on('disconnect', () => stop('supervisor gone'));
      },
      (err) => {
        if (err instanceof UnsupportedServerError) {
          log.error(err.message);
          process.exit(78); // EX_CONFIG: the database is not one we can run on
        }
        log.error('failed to start', { err: err as Error });
        process.exit(1);
      },
    );
}
