/**
 * The typed client of the service: openapi-fetch over the types generated from GET /api/v1/openapi
 * (schema.d.ts, `npm run client:gen`), plus what every caller would otherwise write by hand:
 * the Bearer key, an Idempotency-Key on every POST, bounded retries that honour Retry-After,
 * errors thrown as ApiError, waitForJob() over the job event stream, and verifyWebhook().
 *
 * Runs wherever fetch, Web Crypto and AbortSignal.any do (Node 20.3+, Deno, Bun, browsers, edge
 * runtimes); it imports nothing of the server.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import createFetchClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema';

export type { components, operations, paths } from './schema';
export type JobEnvelope = components['schemas']['JobEnvelope'];
export type ErrorBody = components['schemas']['Error'];
export type ErrorDetail = NonNullable<ErrorBody['error']['details']>[number];
export type WebhookEventPayload = components['schemas']['WebhookEventPayload'];

export interface ClientOptions {
  /** The server URL, ending in /api/v1 (e.g. `http://localhost:8080/api/v1`). */
  baseUrl: string;
  /** An API key, `svc_…`, sent as `Authorization: Bearer`. */
  apiKey: string;
  /** The fetch to use; default `globalThis.fetch`. */
  fetch?: typeof globalThis.fetch;
  /**
   * How many times a request is sent again (default 3; 0: never): after 429 or 503, waiting the
   * Retry-After seconds, and after a network error when the request is a GET or HEAD or carries an
   * Idempotency-Key (every POST does, see below).
   */
  retries?: number;
  /** A Retry-After longer than this (ms) is not waited for: the ApiError is thrown at once (default 60,000). */
  maxRetryDelayMs?: number;
  /**
   * Send `Idempotency-Key: <random UUID>` on every POST that has none (default true). The same key
   * goes with the client's own retries of that request, so a retry never runs or bills it twice.
   */
  idempotencyKeys?: boolean;
}

/**
 * Any non-2xx answer (3xx aside), built from the service's Error body
 * (`{ error: { code, message, requestId, details? } }`). Branch on `code`, which is stable.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** HTTP status. */
  readonly status: number;
  /** The stable machine code (validation_error, not_found, rate_limited, …); `http_<status>` when the body is not the Error shape. */
  readonly code: string;
  /** The X-Request-Id of the answer (quote it to support), or null. */
  readonly requestId: string | null;
  /** validation_error: one entry per failed rule. Empty otherwise. */
  readonly details: ErrorDetail[];
  /** Seconds from the Retry-After header (429, 503, 504, Drive text), or null. */
  readonly retryAfter: number | null;
  /** The method and URL of the request. */
  readonly request: string;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    requestId: string | null;
    details?: ErrorDetail[];
    retryAfter: number | null;
    request: string;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details ?? [];
    this.retryAfter = init.retryAfter;
    this.request = init.request;
  }

  /** Read the error out of a non-2xx response (consumes its body). */
  static async from(response: Response, request: string): Promise<ApiError> {
    const text = await response.text().catch(() => '');
    let body: Partial<ErrorBody> | undefined;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const e = body?.error;
    const shaped = !!e && typeof e.code === 'string' && typeof e.message === 'string';
    return new ApiError({
      status: response.status,
      code: shaped ? e.code : `http_${response.status}`,
      message: shaped ? e.message : `${request} answered ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`,
      requestId: (shaped && e.requestId) || response.headers.get('x-request-id'),
      details: shaped && Array.isArray(e.details) ? e.details : [],
      retryAfter: retryAfterSeconds(response.headers.get('retry-after')),
      request,
    });
  }
}

/** Seconds from a Retry-After header: delay-seconds or an HTTP date; null when absent or unreadable. */
function retryAfterSeconds(value: string | null): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

const sleep = (ms: number, signal?: AbortSignal | null) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

const RETRIED_STATUS = new Set([429, 503]);

/**
 * The fetch every call goes through: key, Idempotency-Key, retries, and ApiError for 4xx/5xx.
 * A 3xx is returned as it is (304 of a conditional GET; a 302 when redirects are not followed).
 */
function sender(opts: Required<Omit<ClientOptions, 'baseUrl'>>) {
  return async (input: Request): Promise<Response> => {
    const headers = new Headers(input.headers);
    headers.set('authorization', `Bearer ${opts.apiKey}`);
    if (opts.idempotencyKeys && input.method === 'POST' && !headers.has('idempotency-key'))
      headers.set('idempotency-key', globalThis.crypto.randomUUID());
    const request = new Request(input, { headers });
    const what = `${request.method} ${request.url}`;
    const networkRetry = request.method === 'GET' || request.method === 'HEAD' || headers.has('idempotency-key');
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= opts.retries;
      let response: Response;
      try {
        response = await opts.fetch(last ? request : request.clone());
      } catch (err) {
        if (last || !networkRetry || request.signal.aborted) throw err;
        await sleep(Math.min(250 * 2 ** attempt, 4000), request.signal);
        continue;
      }
      if (response.status < 400) return response;
      if (!last && RETRIED_STATUS.has(response.status)) {
        const after = retryAfterSeconds(response.headers.get('retry-after'));
        const delayMs = after === null ? Math.min(500 * 2 ** attempt, 8000) : after * 1000;
        if (delayMs <= opts.maxRetryDelayMs) {
          await response.body?.cancel().catch(() => {});
          await sleep(delayMs, request.signal);
          continue;
        }
      }
      throw await ApiError.from(response, what);
    }
  };
}

export interface WaitOptions {
  /** Stops the wait: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Rejects with a TimeoutError after this many ms (default 600,000). */
  timeoutMs?: number;
  /** Called with every state the job is seen in (queued, processing with progressMessage, …). */
  onProgress?: (job: JobEnvelope) => void;
}

/** A stream that sends nothing, heartbeats included (every 15 s), for this long is taken for dead. */
const STREAM_IDLE_MS = 45_000;
/** Stream failures in a row after which waitForJob long-polls GET /jobs/{id} instead. */
const STREAM_FAILURES_MAX = 3;
const LONG_POLL_SECONDS = 30;
const TERMINAL = new Set(['complete', 'failed']);

/** How long the end of a stream is waited for after its final event. */
const STREAM_END_WAIT_MS = 1000;

/** Read `reader` to its end, for at most `ms`; false when it did not end in time (or failed). */
async function drain(reader: ReadableStreamDefaultReader<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const end = (async () => {
    while (!(await reader.read()).done) {}
    return true;
  })().catch(() => false);
  try {
    return await Promise.race([end, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** What one connection to the event stream ended with (`dropped`: how many events it brought first). */
type StreamEnd = { job: JobEnvelope } | { dropped: number } | { unavailable: true };

/** One waitForJob call: where its stream is, and how to read the job. */
class JobWait {
  /** The `id:` of the last event read: the job's ETag, sent back as Last-Event-ID. */
  private lastId: string | undefined;
  /** The reconnection delay the stream asked for (`retry:`). */
  private retryMs = 2000;
  private readonly signal: AbortSignal;

  constructor(
    private readonly baseUrl: string,
    private readonly send: (r: Request) => Promise<Response>,
    private readonly jobId: string,
    private readonly opts: WaitOptions,
  ) {
    this.signal = AbortSignal.any([
      ...(opts.signal ? [opts.signal] : []),
      AbortSignal.timeout(opts.timeoutMs ?? 600_000),
    ]);
  }

  async run(): Promise<JobEnvelope> {
    for (let failures = 0; failures < STREAM_FAILURES_MAX; ) {
      this.signal.throwIfAborted();
      const end = await this.stream();
      if ('job' in end) return end.job;
      if ('unavailable' in end) break;
      // A connection that brought events before it dropped is not a failure: resume at once.
      failures = end.dropped > 0 ? 0 : failures + 1;
      if (end.dropped === 0) await sleep(this.retryMs, this.signal);
    }
    return this.longPoll();
  }

  private get url() {
    return `${this.baseUrl}/jobs/${encodeURIComponent(this.jobId)}`;
  }

  /** The envelope of an event, or undefined for an event that is not one of the job's states. */
  private envelope(ev: EventSourceMessage): JobEnvelope | undefined {
    if (ev.event !== 'progress' && ev.event !== 'complete' && ev.event !== 'failed') return undefined;
    try {
      const job = JSON.parse(ev.data) as JobEnvelope;
      return typeof job === 'object' && job !== null && typeof job.status === 'string' ? job : undefined;
    } catch {
      return undefined;
    }
  }

  /** One connection to GET /jobs/{id}/events, read until the terminal event or until it drops. */
  private async stream(): Promise<StreamEnd> {
    const { signal } = this;
    const conn = new AbortController();
    const stop = () => conn.abort(signal.reason);
    signal.addEventListener('abort', stop, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const alive = () => {
      clearTimeout(idle);
      idle = setTimeout(() => conn.abort(new Error('the job event stream went silent')), STREAM_IDLE_MS);
    };
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (this.lastId !== undefined) headers['last-event-id'] = this.lastId;
      alive();
      let response: Response;
      try {
        response = await this.send(new Request(`${this.url}/events`, { headers, signal: conn.signal }));
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (err instanceof ApiError && err.status === 404) return { unavailable: true };
        // A refused key, scope or request will not change on a retry; anything else may.
        if (err instanceof ApiError && [400, 401, 403].includes(err.status)) throw err;
        return { dropped: 0 };
      }
      if (response.status === 204) {
        // The id sent was the final state's: one plain read answers it.
        this.lastId = undefined;
        return { unavailable: true };
      }
      if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
        await response.body?.cancel().catch(() => {});
        return { unavailable: true };
      }
      const events: EventSourceMessage[] = [];
      const parser = createParser({
        onRetry: (ms) => {
          this.retryMs = ms;
        },
        onEvent: (ev) => events.push(ev),
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let count = 0;
      try {
        for (;;) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch {
            if (signal.aborted) throw signal.reason;
            break; // the connection dropped: the caller resumes from lastId
          }
          if (chunk.done) break;
          alive();
          parser.feed(chunk.value);
          for (const ev of events.splice(0)) {
            if (ev.id !== undefined) this.lastId = ev.id;
            const job = this.envelope(ev);
            if (!job) continue;
            count++;
            this.opts.onProgress?.(job);
            if (ev.event !== 'progress' || TERMINAL.has(job.status)) {
              // The server ends the stream after the final event: read up to its end, so the
              // connection goes back to the pool instead of being torn down.
              await drain(reader, STREAM_END_WAIT_MS);
              return { job };
            }
          }
        }
      } finally {
        await reader.cancel().catch(() => {});
      }
      return { dropped: count };
    } finally {
      clearTimeout(idle);
      signal.removeEventListener('abort', stop);
    }
  }

  /** GET /jobs/{id} with Prefer: wait (answers when the job changes), until the job is finished. */
  private async longPoll(): Promise<JobEnvelope> {
    const { signal } = this;
    let etag = this.lastId === undefined ? undefined : `"${this.lastId}"`;
    for (;;) {
      const headers: Record<string, string> = { prefer: `wait=${LONG_POLL_SECONDS}` };
      if (etag) headers['if-none-match'] = etag;
      const started = Date.now();
      const response = await this.send(new Request(this.url, { headers, signal }));
      if (response.status === 200) {
        const job = (await response.json()) as JobEnvelope;
        etag = response.headers.get('etag') ?? undefined;
        this.opts.onProgress?.(job);
        if (TERMINAL.has(job.status)) return job;
      } else await response.body?.cancel().catch(() => {});
      // A server that did not hold the request (no Preference-Applied, or a 304 at once) is asked once a second.
      const quick = Date.now() - started < 1000;
      if (quick && (!response.headers.get('preference-applied') || response.status === 304))
        await sleep(1000 - (Date.now() - started), signal);
    }
  }
}

export type ServiceClient = Client<paths, 'application/json'> & {
  /**
   * Wait until a job is finished and answer its envelope: `status` is `complete` (with `result`)
   * or `failed` (with `error`; its credits were refunded). A failed job resolves too; it does not
   * reject. Reads GET /jobs/{id}/events (Server-Sent Events), resuming with Last-Event-ID after a
   * dropped connection; after three failed connections in a row, or when the server has no stream,
   * it long-polls GET /jobs/{id} with `Prefer: wait=30`. Rejects with ApiError (404 for an unknown
   * job), with the signal's reason, or with a TimeoutError after `timeoutMs`.
   */
  waitForJob(jobId: string, opts?: WaitOptions): Promise<JobEnvelope>;
};

/**
 * A typed client: `GET`, `POST`, `PATCH`, `PUT`, `DELETE` take a path of the document and its
 * typed params and body, and answer `{ data, response }`. A 4xx or 5xx is thrown as ApiError, so
 * `data` is set whenever the call returns (use `must()` to say so to TypeScript).
 */
export function createClient(options: ClientOptions): ServiceClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const send = sender({
    apiKey: options.apiKey,
    fetch: options.fetch ?? ((input) => globalThis.fetch(input)),
    retries: options.retries ?? 3,
    maxRetryDelayMs: options.maxRetryDelayMs ?? 60_000,
    idempotencyKeys: options.idempotencyKeys ?? true,
  });
  const client = createFetchClient<paths, 'application/json'>({ baseUrl, fetch: send });
  return Object.assign(client, {
    waitForJob: (jobId: string, opts: WaitOptions = {}) => new JobWait(baseUrl, send, jobId, opts).run(),
  });
}

/** The `data` of a call, which is set whenever the call returns (errors throw ApiError). */
export async function must<T>(call: Promise<{ data?: T; response: Response }>): Promise<NonNullable<T>> {
  const { data, response } = await call;
  if (data === undefined || data === null)
    throw new Error(`${response.url} answered ${response.status} without a body to read`);
  return data as NonNullable<T>;
}

/** Why verifyWebhook refused a delivery. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason: 'missing_signature' | 'signature_mismatch' | 'malformed_payload' | 'header_mismatch' | 'stale',
    message: string,
  ) {
    super(message);
  }
}

export interface VerifyOptions {
  /**
   * How far (seconds) the payload's `timestamp`, the time the attempt was sent, may be from now
   * (default 300). Inside the signed body, so a replayed delivery older than this is refused.
   * `null`: no check.
   */
  toleranceSeconds?: number | null;
  /** The current time (ms since the epoch); default Date.now(). */
  now?: number;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;
const header = (h: HeaderBag, name: string) => {
  if (h instanceof Headers) return h.get(name) ?? undefined;
  const v = Object.entries(h).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(v) ? v[0] : v;
};
const hexBytes = (hex: string) => Uint8Array.from(hex.match(/../g)!, (b) => Number.parseInt(b, 16));

/**
 * Check a webhook delivery (SPEC 6.3) and answer its payload: `X-Service-Signature` must be
 * `sha256=` + the hex HMAC-SHA256 of the raw body under the webhook's secret (compared in constant
 * time by Web Crypto's verify), the body a WebhookEventPayload whose `event` and `eventId` match
 * the X-Service-Event and X-Service-Event-Id headers, and its `timestamp` within the tolerance.
 * Pass the body exactly as received (before any JSON parsing). Throws WebhookVerificationError.
 */
export async function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: HeaderBag,
  secret: string,
  opts: VerifyOptions = {},
): Promise<WebhookEventPayload> {
  const signature = header(headers, 'x-service-signature');
  const hex = signature?.match(/^sha256=([0-9a-f]{64})$/)?.[1];
  if (!hex)
    throw new WebhookVerificationError('missing_signature', 'X-Service-Signature is missing or not sha256=<hex>');
  const bytes = typeof rawBody === 'string' ? new TextEncoder().encode(rawBody) : rawBody;
  const key = await globalThis.crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['verify'],
  );
  if (!(await globalThis.crypto.subtle.verify('HMAC', key, hexBytes(hex), new Uint8Array(bytes))))
    throw new WebhookVerificationError('signature_mismatch', 'the signature does not match the body and the secret');
  let payload: WebhookEventPayload;
  try {
    payload = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new WebhookVerificationError('malformed_payload', 'the body is not JSON');
  }
  if (typeof payload !== 'object' || payload === null || typeof payload.timestamp !== 'string')
    throw new WebhookVerificationError('malformed_payload', 'the body is not a webhook event payload');
  const event = header(headers, 'x-service-event');
  const eventId = header(headers, 'x-service-event-id');
  if ((event !== undefined && event !== payload.event) || (eventId !== undefined && eventId !== payload.eventId))
    throw new WebhookVerificationError('header_mismatch', 'X-Service-Event or X-Service-Event-Id differ from the body');
  const tolerance = opts.toleranceSeconds === undefined ? 300 : opts.toleranceSeconds;
  if (tolerance !== null) {
    const skew = Math.abs((opts.now ?? Date.now()) - Date.parse(payload.timestamp));
    if (!(skew <= tolerance * 1000))
      throw new WebhookVerificationError('stale', `the delivery's timestamp is more than ${tolerance} s from now`);
  }
  return payload;
}
