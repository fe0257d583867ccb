import { metrics } from '../monitoring/metrics';
import { loadConfig, type Config } from './config';
import { toAppError } from './errors';
import { createLogger, serviceLogger } from './log';
import { UnsupportedServerError } from './mongo';

/**
 * Entry point helper: parse config (a bad key stops before any connection), start, stop on
 * SIGINT/SIGTERM, and route process-level errors through the same funnel as requests.
 *
 * Crash-only: an uncaught exception or unhandled rejection leaves the process in a state nobody
 * designed (Node's docs), so it is logged with its stack (the log is written synchronously) and
 * the process exits with status 70 at once; the supervisor, or the orchestrator, starts a new
 * one. Work in flight is safe: unacked messages go back to their queue, jobs keep their leases,
 * idempotency records and credit charges are written to survive exactly this.
 */
/** sysexits.h EX_SOFTWARE: an internal error; the supervisor restarts the process. */
const EX_SOFTWARE = 70;

export function runMain(name: string, start: (config: Config) => Promise<{ stop(): Promise<void> }>) {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    createLogger('info', { service: name }).fatal((err as Error).message);
    process.exit(78); // EX_CONFIG
  }
  const log = serviceLogger(config, name);
  const crash = (source: string) => (err: unknown) => {
    const e = toAppError(err);
    metrics.errors.inc({ code: e.code, source: 'process' });
    log.fatal(`${source} in ${name}; exiting`, { code: e.code, err: err instanceof Error ? err : e });
    process.exit(EX_SOFTWARE);
  };
  process.on('unhandledRejection', crash('unhandled rejection'));
  process.on('uncaughtException', crash('uncaught exception'));
  start(config).then(
    (proc) => {
      let stopping = false;
      const stop = (signal: string) => {
        // A second signal while draining: stop now (unacked work goes back to the queues).
        if (stopping) process.exit(1);
        stopping = true;
        log.info('stopping', { signal });
        proc.stop().then(
          () => process.exit(0),
          (err) => {
            log.error('stop failed', { err: err as Error });
            process.exit(1);
          },
        );
      };
      process.on('SIGINT', () => stop('SIGINT'));
      process.on('SIGTERM', () => stop('SIGTERM'));
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
