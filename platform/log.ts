/** Minimal structured logger: one JSON line per entry. Never pass keys, secrets or argument values. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

const serialize = (v: unknown): unknown =>
  v instanceof Error ? { name: v.name, message: v.message, ...(v.cause ? { cause: serialize(v.cause) } : {}) } : v;

export function createLogger(level: LogLevel, base: Record<string, unknown> = {}): Logger {
  const write = (lvl: Exclude<LogLevel, 'silent'>, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level: lvl, msg, ...base };
    for (const [k, v] of Object.entries(fields ?? {})) entry[k] = serialize(v);
    process.stdout.write(JSON.stringify(entry) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }),
  };
}
