import type { Logger } from '../../platform/infra/log';

export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  msg: string;
  fields: Record<string, unknown>;
}

/**
 * A Logger that keeps every entry as the code wrote it, before any redaction: a test can read
 * what a component logs, and check it never handed the logger a secret in the first place.
 */
export function recordingLogger(
  bound: Record<string, unknown> = {},
  entries: LogEntry[] = [],
): Logger & { entries: LogEntry[] } {
  const at =
    (level: LogEntry['level']) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void entries.push({ level, msg, fields: { ...bound, ...fields } });
  return {
    entries,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    fatal: at('fatal'),
    child: (fields) => recordingLogger({ ...bound, ...fields }, entries),
  };
}

/** Everything an entry holds as text (errors with their message, cause and stack), to search for secrets. */
export function entryText(e: LogEntry): string {
  const seen = new WeakSet<object>();
  return `${e.msg} ${JSON.stringify(e.fields, (_k, v: unknown) => {
    if (v instanceof Error) return { message: v.message, stack: v.stack, cause: v.cause };
    if (v && typeof v === 'object') {
      if (seen.has(v)) return undefined;
      seen.add(v);
    }
    return v;
  })}`;
}
