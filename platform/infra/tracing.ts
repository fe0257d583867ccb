import { hostname } from 'node:os';
import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Context, Link, Span, SpanContext, Tracer } from '@opentelemetry/api';
import { redactString, setTraceIdSource, type Logger } from './log';

/**
 * Tracing: OpenTelemetry spans at a few explicit places (the HTTP server span, MongoDB commands,
 * AMQP publish and consume with W3C `traceparent` in the message headers, the engine call, the
 * webhook delivery), exported over OTLP/HTTP.
 *
 * Off and free unless an exporter is configured (see `tracingSettings`): no OpenTelemetry module
 * is even imported then, and every instrumentation point is one check of `tracingOn`. When on,
 * `initTracing` imports the SDK, installs the AsyncLocalStorage context manager and the W3C trace
 * context propagator, and every log line carries the active span's `traceId` / `spanId`.
 *
 * Standard configuration, read from the environment (README, Configuration):
 * OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (and _HEADERS, _TIMEOUT,
 * _COMPRESSION, read by the exporter), OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp, console,
 * none), OTEL_SERVICE_NAME (default svc-<process>), OTEL_RESOURCE_ATTRIBUTES,
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on), OTEL_BSP_*.
 *
 * Attributes follow the semantic conventions and never hold a request body, argument values,
 * keys or URLs with their query strings.
 */

/** True while tracing is initialised; instrumentation points check it first (a live binding). */
export let tracingOn = false;

/**
 * What an incoming `traceparent` on the public API does (TRACE_INCOMING): `link` (default) starts
 * a trace of our own and links the caller's span, so a client can neither choose our trace ids
 * nor force sampling under the parentbased_* samplers; `parent` continues the caller's trace
 * (behind an edge that sets or strips traceparent itself).
 */
let incoming: 'link' | 'parent' = 'link';

/** Semantic-convention attribute names (semconv 1.3x; test/monitoring/tracing.test.ts checks them against the package). */
export const ATTR = {
  httpRequestMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpResponseStatusCode: 'http.response.status_code',
  urlScheme: 'url.scheme',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  dbSystemName: 'db.system.name',
  dbOperationName: 'db.operation.name',
  dbCollectionName: 'db.collection.name',
  dbNamespace: 'db.namespace',
  messagingSystem: 'messaging.system',
  messagingDestinationName: 'messaging.destination.name',
  messagingOperationType: 'messaging.operation.type',
  messagingOperationName: 'messaging.operation.name',
  messagingMessageId: 'messaging.message.id',
  messagingBodySize: 'messaging.message.body.size',
  rabbitmqRoutingKey: 'messaging.rabbitmq.destination.routing_key',
  serviceName: 'service.name',
} as const;

export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** What the environment asks for: whether tracing is on, and why not when it is off. */
export function tracingSettings(
  env: NodeJS.ProcessEnv = process.env,
): { on: true; url: string } | { on: false; why: string } {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true')
    return { on: false, why: 'OTEL_SDK_DISABLED=true' };
  const exporters = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.includes('none')) return { on: false, why: 'OTEL_TRACES_EXPORTER=none' };
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  // The signal-specific endpoint is used as it is; the general one gets the signal's path (OTLP spec).
  if (traces) return { on: true, url: traces };
  if (base) return { on: true, url: `${base.replace(/\/+$/, '')}/v1/traces` };
  if (exporters.includes('console')) return { on: true, url: '' };
  return { on: false, why: 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' };
}

export interface TracingOptions {
  /** The default service.name (OTEL_SERVICE_NAME overrides it), e.g. svc-api. */
  serviceName: string;
  env?: NodeJS.ProcessEnv;
  log?: Logger;
}

let api: typeof OtelApi;
let tracer: Tracer;
let provider: { forceFlush(o?: { timeoutMillis?: number }): Promise<void>; shutdown(): Promise<void> } | undefined;
let initialising: Promise<boolean> | undefined;

/**
 * Turn tracing on when the environment configures an exporter; resolves to whether it is on.
 * Never throws: a tracing set-up that fails is logged and the process runs untraced. Call once
 * per process, before anything is started (runMain does); tests call it with their own env and
 * `shutdownTracing()` afterwards.
 */
export function initTracing(opts: TracingOptions): Promise<boolean> {
  initialising ??= setUp(opts).catch((err) => {
    opts.log?.warn('tracing could not be set up; running without it', { err: err as Error });
    initialising = undefined;
    return false;
  });
  return initialising;
}

/** A positive integer from the environment, else `dflt` (OTel: an invalid value is ignored, not fatal). */
function envInt(env: NodeJS.ProcessEnv, key: string, dflt: number, log?: Logger): number {
  const raw = env[key]?.trim();
  if (!raw) return dflt;
  const n = Number(raw);
  if (Number.isInteger(n) && n > 0) return n;
  log?.warn(`${key} is not a positive integer; using ${dflt}`, { key });
  return dflt;
}

async function setUp({ serviceName, env = process.env, log }: TracingOptions): Promise<boolean> {
  const settings = tracingSettings(env);
  if (!settings.on) return false;
  const mode = (env.TRACE_INCOMING ?? 'link').trim().toLowerCase();
  if (mode !== 'link' && mode !== 'parent')
    log?.warn('TRACE_INCOMING must be link or parent; using link', { value: mode });
  incoming = mode === 'parent' ? 'parent' : 'link';
  const [otel, sdk, resources, core, asyncHooks] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
    import('@opentelemetry/context-async-hooks'),
  ]);

  const sampler = buildSampler(sdk, env, log);
  const exporters = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const spanProcessors: InstanceType<typeof sdk.BatchSpanProcessor | typeof sdk.SimpleSpanProcessor>[] = [];
  if (settings.url) {
    const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/json').trim();
    if (protocol !== 'http/json')
      log?.warn(
        `OTEL_EXPORTER_OTLP_PROTOCOL ${protocol} is not supported: spans go as OTLP/HTTP with JSON bodies (http/json), which collectors accept on their OTLP/HTTP port`,
        { protocol },
      );
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    spanProcessors.push(
      new sdk.BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: settings.url }),
        scheduledDelayMillis: envInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, log),
        exportTimeoutMillis: envInt(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, log),
        maxQueueSize: envInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, log),
        maxExportBatchSize: Math.min(
          envInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, log),
          envInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048),
        ),
      }),
    );
  }
  if (exporters.includes('console'))
    spanProcessors.push(new sdk.SimpleSpanProcessor({ exporter: new sdk.ConsoleSpanExporter() }));

  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults (read from `env`, so a
  // test's settings do not leak into process.env).
  const fromEnv: Attributes = {};
  for (const part of (env.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    try {
      fromEnv[decodeURIComponent(part.slice(0, eq).trim())] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      log?.warn('OTEL_RESOURCE_ATTRIBUTES: an entry is not percent-encoded correctly; ignored');
    }
  }
  const name = env.OTEL_SERVICE_NAME?.trim() || (fromEnv[ATTR.serviceName] as string | undefined) || serviceName;
  const resource = resources.defaultResource().merge(
    resources.resourceFromAttributes({
      'host.name': hostname(),
      'process.pid': process.pid,
      ...fromEnv,
      [ATTR.serviceName]: name,
    }),
  );

  const p = new sdk.TracerProvider({ resource, sampler, spanProcessors });
  const cm = new asyncHooks.AsyncLocalStorageContextManager().enable();
  otel.context.setGlobalContextManager(cm);
  otel.propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  otel.trace.setGlobalTracerProvider(p);
  api = otel;
  provider = p;
  tracer = otel.trace.getTracer('svc');
  setTraceIdSource(traceIds);
  tracingOn = true;
  log?.info('tracing on', {
    serviceName: name,
    endpoint: settings.url ? redactString(new URL(settings.url).origin) : 'console',
  });
  return true;
}

type Sdk = typeof import('@opentelemetry/sdk-trace');

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG as the OTel specification defines them. */
function buildSampler(sdk: Sdk, env: NodeJS.ProcessEnv, log?: Logger) {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const rawArg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  let ratio = 1;
  if (rawArg) {
    const n = Number(rawArg);
    if (Number.isFinite(n) && n >= 0 && n <= 1) ratio = n;
    else log?.warn('OTEL_TRACES_SAMPLER_ARG is not a ratio from 0 to 1; using 1');
  }
  switch (name) {
    case 'always_on':
      return new sdk.AlwaysOnSampler();
    case 'always_off':
      return new sdk.AlwaysOffSampler();
    case 'traceidratio':
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) });
    case 'parentbased_always_on':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
    default:
      log?.warn(`OTEL_TRACES_SAMPLER ${name} is not supported; using parentbased_always_on`);
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
}

/** Export what has ended, waiting at most `timeoutMs` (never rejects). */
export async function flushTracing(timeoutMs = 2000): Promise<void> {
  if (!provider) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    provider.forceFlush({ timeoutMillis: timeoutMs }).catch(() => undefined),
    new Promise<void>((r) => (timer = setTimeout(r, timeoutMs))),
  ]);
  clearTimeout(timer);
}

/** Flush (bounded) and turn tracing off; the process, or the next test, may init again. */
export async function shutdownTracing(timeoutMs = 5000): Promise<void> {
  await initialising?.catch(() => undefined);
  initialising = undefined;
  if (!provider) return;
  const p = provider;
  tracingOn = false;
  provider = undefined;
  setTraceIdSource(() => undefined);
  await flushTracing(timeoutMs);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    p.shutdown().catch(() => undefined),
    new Promise<void>((r) => (timer = setTimeout(r, timeoutMs))),
  ]);
  clearTimeout(timer);
  api.trace.disable();
  api.context.disable();
  api.propagation.disable();
}

// --- Instrumentation helpers. Each is a no-op (returns undefined, or calls `fn` as it is) while tracing is off.

const KINDS: Record<SpanKindName, number> = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 };

/** The active span's ids, for log lines (valid spans only). */
function traceIds(): { traceId: string; spanId: string } | undefined {
  const span = api.trace.getActiveSpan();
  if (!span) return undefined;
  const c = span.spanContext();
  return api.isSpanContextValid(c) ? { traceId: c.traceId, spanId: c.spanId } : undefined;
}

/**
 * A span started now, child of `parent` (default: the active context), or undefined when tracing
 * is off. With `requireParent`, undefined too when there is no active span to hang it under
 * (background commands do not each start a trace of their own).
 */
export function startSpan(
  name: string,
  kind: SpanKindName,
  attributes?: Attributes,
  opts: { parent?: Context; requireParent?: boolean; links?: Link[] } = {},
): Span | undefined {
  if (!tracingOn) return undefined;
  const parent = opts.parent ?? api.context.active();
  if (opts.requireParent && !api.trace.getSpan(parent)) return undefined;
  return tracer.startSpan(name, { kind: KINDS[kind] as OtelApi.SpanKind, attributes, links: opts.links }, parent);
}

/** Run `fn` with `span` as the active span (as it is without one). */
export function runInSpan<T>(span: Span | undefined, fn: () => T): T {
  if (!span) return fn();
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

/**
 * End `span`. With an error, the span's status is ERROR with `error.type` (the error's class and
 * code); its message and stack are recorded (redacted) only when `record` says so: job errors may
 * quote user input, and that goes to the job, not to a trace.
 */
export function endSpan(
  span: Span | undefined,
  err?: unknown,
  opts: { record?: boolean; errorType?: string } = {},
): void {
  if (!span) return;
  if (err !== undefined || opts.errorType) {
    span.setAttribute(ATTR.errorType, opts.errorType ?? errorTypeOf(err));
    span.setStatus({ code: 2 as OtelApi.SpanStatusCode /* ERROR */ });
    if (opts.record && err instanceof Error)
      span.recordException({
        name: err.name,
        message: redactString(err.message),
        stack: err.stack ? redactString(err.stack) : undefined,
      });
  }
  span.end();
}

/** `fn` inside a span of its own (ended when it settles, ERROR when it throws); just `fn()` when off. */
export async function inSpan<T>(
  name: string,
  kind: SpanKindName,
  attributes: Attributes | undefined,
  fn: (span: Span | undefined) => Promise<T>,
  opts: { record?: boolean } = {},
): Promise<T> {
  if (!tracingOn) return fn(undefined);
  const span = startSpan(name, kind, attributes);
  try {
    const out = await runInSpan(span, () => fn(span));
    endSpan(span);
    return out;
  } catch (err) {
    endSpan(span, err, opts);
    throw err;
  }
}

/** The error's class, with its stable code when it has one (`AppError:not_found`, `MongoServerError:11000`). */
export function errorTypeOf(err: unknown): string {
  if (!(err instanceof Error)) return typeof err;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' || typeof code === 'number' ? `${err.name}:${code}` : err.name;
}

/** The active span's context, to link a batch written later to the work that queued it (undefined when off). */
export function currentSpanContext(): SpanContext | undefined {
  if (!tracingOn) return undefined;
  return api.trace.getActiveSpan()?.spanContext();
}

/**
 * `fn` as a trace of its own (a root span named `name`, linked to the spans of the work it
 * serves), for writes batched across requests: without it, the batch's commands would belong to
 * whichever request happened to start the batch.
 */
export function batchSpan<T>(name: string, links: (SpanContext | undefined)[], fn: () => Promise<T>): Promise<T> {
  if (!tracingOn) return fn();
  const ls = links
    .filter((c): c is SpanContext => !!c && api.isSpanContextValid(c))
    .slice(0, 128)
    .map((context) => ({ context }));
  return inSpanFrom(api.ROOT_CONTEXT, name, ls, fn);
}

async function inSpanFrom<T>(parent: Context, name: string, links: Link[], fn: () => Promise<T>): Promise<T> {
  const span = tracer.startSpan(name, { kind: 0 as OtelApi.SpanKind, links }, parent);
  try {
    const out = await api.context.with(api.trace.setSpan(parent, span), fn);
    endSpan(span);
    return out;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** Header values as the W3C propagator reads them (AMQP may hand long strings over as Buffers). */
const headerGetter = {
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
  get: (carrier: Record<string, unknown>, key: string) => {
    const v = carrier[key];
    const s = Buffer.isBuffer(v) ? v.toString('utf8') : v;
    return typeof s === 'string' || Array.isArray(s) ? (s as string | string[]) : undefined;
  },
};

/**
 * Where a public request's server span starts (see TRACE_INCOMING): under the caller's context,
 * or at a root of its own with a link to the caller's span.
 */
export function incomingSpanOptions(headers: Record<string, unknown>): { parent?: Context; links?: Link[] } {
  if (!tracingOn) return {};
  const remote = extractContext(headers);
  if (incoming === 'parent') return { parent: remote };
  const caller = remote && api.trace.getSpanContext(remote);
  return {
    parent: api.ROOT_CONTEXT,
    ...(caller && api.isSpanContextValid(caller) ? { links: [{ context: caller }] } : {}),
  };
}

/** The remote context carried by `headers` (HTTP or AMQP: `traceparent`, `tracestate`), or the root context. */
export function extractContext(headers: Record<string, unknown> | undefined): Context | undefined {
  if (!tracingOn) return undefined;
  return api.propagation.extract(api.ROOT_CONTEXT, headers ?? {}, headerGetter);
}

/**
 * `headers` plus `traceparent` / `tracestate` of `span` (default: the active span), unless they
 * are set already. The same object when tracing is off or there is nothing to carry.
 */
export function injectTraceHeaders(headers: Record<string, unknown>, span?: Span): Record<string, unknown> {
  if (!tracingOn || headers.traceparent !== undefined) return headers;
  const ctx = span ? api.trace.setSpan(api.context.active(), span) : api.context.active();
  const out: Record<string, string> = {};
  api.propagation.inject(ctx, out);
  return out.traceparent ? { ...headers, ...out } : headers;
}
