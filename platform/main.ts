import { metrics } from '../monitoring/metrics';
import { loadConfig, type Config } from './config';
import { toAppError } from './errors';
import { createLogger } from './log';
import { UnsupportedServerError } from './mongo';

/**
 * Entry point helper: parse config (a bad key stops before any connection), start, stop on
 * SIGINT/SIGTERM, and route process-level errors through the same funnel as requests.
 */
export function runMain(name: string, start: (config: Config) => Promise<{ stop(): Promise<void> }>) {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`${name}: ${(err as Error).message}\n`);
    process.exit(78); // EX_CONFIG
  }
  const log = createLogger(config.LOG_LEVEL, { service: name });
  const funnel = (source: string) => (err: unknown) => {
    const e = toAppError(err);
    metrics.errors.inc({ code: e.code, source: 'process' });
    log.error(`${source} in ${name}`, { code: e.code, err: (e.cause as Error) ?? e });
  };
  process.on('unhandledRejection', funnel('unhandled rejection'));
  process.on('uncaughtException', funnel('uncaught exception'));
  start(config).then(
    (proc) => {
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
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
        process.stderr.write(`${name}: ${err.message}\n`);
        process.exit(78); // EX_CONFIG: the database is not one we can run on
      }
      log.error('failed to start', { err: err as Error });
      process.exit(1);
    },
  );
}
