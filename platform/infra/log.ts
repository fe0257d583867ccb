import { pino, type Logger as PinoLogger } from 'pino';
import { currentContext } from './context';
import { mapStack } from './stack-map';

/**
 * Structured logging: pino, one JSON line per entry on stdout (or LOG_FILE), written
 * synchronously so that the line before a crash is on disk when the process exits.
 *
 * Every line carries `time`, `level`, `msg`, `service`, and from the work context the
 * `requestId` and `jobId` it is about and, when tracing is on, `traceId` / `spanId`.
 * Fields go through `clean()` first: errors become `{ type, message, stack, code, cause }`,
 * values under secret-looking names and anything that looks like a key, a webhook secret, a
 * bearer token or a URL signature are redacted, cycles and BigInts cannot break a line, and a
 * caller's field can never overwrite `time`, `level`, `msg` or a bound field (it moves under
 * `fields`). Still: never pass keys, secrets or argument values.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** For the last line of a dying process (uncaught exception). */
  fatal(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export interface LoggerOptions {
  /** Append to this file instead of writing to stdout (tests: one file for a whole run). */
  file?: string;
}

/** Trace ids of the active span; set by platform/infra/tracing.ts when tracing is on. */
let traceIds: () => { traceId: string; spanId: string } | undefined = () => undefined;
export const setTraceIdSource = (source: typeof traceIds) => {
  traceIds = source;
};

/**
 * Field names whose string value is always a secret, whatever it looks like: any name that
 * contains one of these (x-api-key, OPENAI_API_KEY, client_secret, refreshToken, passphrase …),
 * and exactly `key` or `sig`. Names like keyId or maxTokens count… hold no secret but match
 * `token`: only string values are redacted, so counts and ids stay readable.
 */
const SECRET_NAME =
  /secret|token|passw|passphrase|pwd|authorization|cookie|api[-_]?key|private[-_]?key|signature|credential|^key$|^sig$/i;
/** What a secret looks like inside any string (a message, a URL, a stack). */
const SECRET_PATTERNS: [RegExp, string][] = [
  [/\bsvc_[A-Za-z0-9_-]{6,}/g, 'svc_[redacted]'],
  [/\bwhsec_[A-Za-z0-9_-]{6,}/g, 'whsec_[redacted]'],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi, '$1 [redacted]'],
  [/([?&](?:sig|signature|token|key|x-amz-signature|x-goog-signature)=)[^&#\s"']+/gi, '$1[redacted]'],
  // user:password@ in a connection string
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+@/gi, '$1[redacted]@'],
];
/** Fields the logger writes itself; a caller's field of that name moves under `fields`. */
const OWN_FIELDS = new Set(['time', 'level', 'msg', 'service', 'requestId', 'jobId', 'traceId', 'spanId', 'fields']);
const MAX_DEPTH = 6;
const MAX_ITEMS = 50;
const MAX_STRING = 8192;

export function redactString(s: string): string {
  let out = s.length > MAX_STRING ? `${s.slice(0, MAX_STRING)}…[${s.length - MAX_STRING} more]` : s;
  for (const [re, to] of SECRET_PATTERNS) out = out.replace(re, to);
  return out;
}

function serializeError(err: Error, seen: WeakSet<object>, depth: number): Record<string, unknown> {
  const e = err as Error & { code?: unknown; cause?: unknown; errors?: unknown };
  const out: Record<string, unknown> = {
    type: e.constructor?.name ?? e.name,
    message: redactString(String(e.message)),
  };
  if (e.stack) out.stack = redactString(mapStack(e.stack));
  if (e.code !== undefined) out.code = clean(e.code, seen, depth + 1);
  if (e.cause !== undefined) out.cause = clean(e.cause, seen, depth + 1);
  if (Array.isArray(e.errors)) out.errors = clean(e.errors, seen, depth + 1);
  return out;
}

/** A copy of `v` that is safe to write: see the module comment. */
function clean(v: unknown, seen: WeakSet<object>, depth: number): unknown {
  if (typeof v === 'string') return redactString(v);
  if (typeof v === 'bigint') return v.toString();
  if (v === null || typeof v !== 'object') return typeof v === 'function' || typeof v === 'symbol' ? String(v) : v;
  if (seen.has(v)) return '[circular]';
  if (depth > MAX_DEPTH) return '[too deep]';
  seen.add(v);
  try {
    if (v instanceof Error) return serializeError(v, seen, depth);
    if (v instanceof Date) return Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
    if (Buffer.isBuffer(v) || ArrayBuffer.isView(v)) return `[${v.byteLength} bytes]`;
    if (Array.isArray(v)) {
      const items = v.slice(0, MAX_ITEMS).map((x) => clean(x, seen, depth + 1));
      if (v.length > MAX_ITEMS) items.push(`…${v.length - MAX_ITEMS} more`);
      return items;
    }
    if (v instanceof Map) return clean(Object.fromEntries([...v].slice(0, MAX_ITEMS)), seen, depth);
    if (v instanceof Set) return clean([...v], seen, depth);
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const [k, x] of Object.entries(v)) {
      if (n++ >= MAX_ITEMS) {
        out['…'] = 'more fields';
        break;
      }
      out[k] = typeof x === 'string' && x !== '' && SECRET_NAME.test(k) ? '[redacted]' : clean(x, seen, depth + 1);
    }
    return out;
  } finally {
    seen.delete(v);
  }
}

/** Caller fields made safe, with names the logger owns (or a child bound) moved under `fields`. */
function cleanFields(
  fields: Record<string, unknown> | undefined,
  bound: ReadonlySet<string>,
  binding = false,
): Record<string, unknown> | undefined {
  if (!fields) return undefined;
  const out = clean(fields, new WeakSet(), 0) as Record<string, unknown>;
  let moved: Record<string, unknown> | undefined;
  for (const k of Object.keys(out)) {
    // A line may name its request or job explicitly (outside any context: it replaces the
    // context's); a child may not bind them (pino would write the mixin's beside it): use withContext.
    const own = OWN_FIELDS.has(k) && (binding || (k !== 'requestId' && k !== 'jobId'));
    if (own || bound.has(k)) {
      moved ??= {};
      moved[k] = out[k];
      delete out[k];
    }
  }
  if (moved) out.fields = moved;
  return out;
}

function wrap(p: PinoLogger, bound: ReadonlySet<string>): Logger {
  const at =
    (level: 'debug' | 'info' | 'warn' | 'error' | 'fatal') => (msg: string, fields?: Record<string, unknown>) => {
      if (!p.isLevelEnabled(level)) return;
      p[level](cleanFields(fields, bound) ?? {}, redactString(msg));
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    fatal: at('fatal'),
    child(fields) {
      const safe = cleanFields(fields, bound, true) ?? {};
      return wrap(p.child(safe), new Set([...bound, ...Object.keys(safe)]));
    },
  };
}

const destinations = new Map<string, ReturnType<typeof pino.destination>>();
/** One synchronous destination per target, shared by every logger of the process. */
function destination(file: string | undefined) {
  const key = file ?? '';
  let d = destinations.get(key);
  if (!d) {
    d = pino.destination(file ? { dest: file, sync: true, append: true, mkdir: true } : { dest: 1, sync: true });
    destinations.set(key, d);
  }
  return d;
}

export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, opts: LoggerOptions = {}): Logger {
  const p = pino(
    {
      level,
      base: null,
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // clean() has serialized errors already; pino's own err serializer would redo it badly.
      serializers: { err: (v: unknown) => v },
      mixin() {
        const ctx = currentContext();
        const ids = traceIds();
        if (!ctx.requestId && !ctx.jobId && !ids) return {};
        return {
          ...(ctx.requestId ? { requestId: ctx.requestId } : {}),
          ...(ctx.jobId ? { jobId: ctx.jobId } : {}),
          ...ids,
        };
      },
    },
    destination(opts.file),
  );
  const bindings = clean(base, new WeakSet(), 0) as Record<string, unknown>;
  return wrap(p.child(bindings), new Set(Object.keys(bindings)));
}

/** The logger of a service process, as its configuration asks. */
export const serviceLogger = (config: { LOG_LEVEL: LogLevel; LOG_FILE?: string }, service: string): Logger =>
  createLogger(config.LOG_LEVEL, { service }, { file: config.LOG_FILE });
