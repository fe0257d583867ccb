import { DATABASE_RETRY_AFTER_SECONDS, isDatabaseUnavailable, isDatabaseUnreachable } from './db-health';

/**
 * The one error type. `code` is stable and public (SPEC 7): clients branch on it.
 * WARNING: codes are part of the public contract; add codes, never rename them.
 */
export const ERROR_STATUS = {
  validation_error: 400,
  /** A prompt describing adult content (POST /images/moonlight). */
  adult_content: 400,
  /** POST /agents/{id}/runs/{runId}/approve: the reviewToken is not the one of the run's review. */
  invalid_review_token: 400,
  invalid_json: 400,
  /** POST /live/session: ambient asked for without the account feature proactiveAudio. */
  ambient_not_available: 400,
  /** POST /live/session: a resumptionHandle whose signature does not verify (forged, altered, not a handle). */
  invalid_resumption_handle: 400,
  /** POST /live/session: a resumptionHandle past its expiry or superseded by a newer one. */
  resumption_handle_expired: 400,
  /** POST /live/session: a resumptionHandle of a session that was ended. */
  session_ended: 400,
  /** A request the HTTP layer could not read (a body that does not match its Content-Encoding, a malformed request line). */
  bad_request: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  /** A finished render scored as adult; not charged (POST /images/moonlight). */
  adult_render: 403,
  plan_required: 403,
  /** A write on a team drive file or folder: team drives are read-only over the API. */
  team_drive_read_only: 403,
  /** A Drive download link whose signature does not verify (altered, truncated, or not a link of this service). */
  link_invalid: 403,
  not_found: 404,
  /** The client did not send its request in time (HTTP server timeouts). */
  request_timeout: 408,
  conflict: 409,
  idempotency_in_flight: 409,
  limit_exceeded: 409,
  /**
   * A change lost a race: the resource's version moved on (fetch it again, re-apply). Over HTTP,
   * a request that sent If-Match answers 412 precondition_failed instead (api/http/route.ts).
   */
  version_conflict: 409,
  /** A proposed sheet commit whose cells a later merged commit changed: it cannot be merged as proposed. */
  stale_commit: 409,
  /** A board PATCH would remove a lane that still holds cards (move or delete them first). */
  column_not_empty: 409,
  /** A persona deployment asked of a persona that has no published version yet (publish it first). */
  persona_not_published: 409,
  /** A Drive folder move into itself or its own subtree. */
  folder_cycle: 409,
  /** An approve for a run that is not paused (and whose review has no such decision recorded). */
  run_not_paused: 409,
  /**
   * A request with If-Match whose version is no longer the stored one (RFC 9110 §13.1.1): nothing
   * was changed; fetch the resource again and re-apply. Without If-Match a lost race stays 409.
   */
  precondition_failed: 412,
  /** A Drive download link past its expiry (DRIVE_LINK_TTL_SECONDS): ask GET /drive/files/{id} or …/content for a new one. */
  link_expired: 410,
  /** A Drive download link whose signing key was revoked or lost drive:read since: the link is dead for good. */
  link_revoked: 410,
  payload_too_large: 413,
  /** A Drive upload that would take the drive past its plan quota (DRIVE_QUOTA_BYTES). */
  storage_quota_exceeded: 413,
  unsupported_media_type: 415,
  /** A Range header no byte of the file satisfies (signed asset links); Content-Range: bytes *\/size. */
  range_not_satisfiable: 416,
  idempotency_key_reused: 422,
  /** POST /extract-flowchart: the document is of the declared type but cannot be read (damaged, password-protected); nothing is charged. */
  unreadable_document: 422,
  /** POST /extract-flowchart: the document was read but holds no text (a scan without a text layer, a blank image); nothing is charged. */
  no_text_found: 422,
  rate_limited: 429,
  /** Request headers larger than the server accepts (16 KiB). */
  headers_too_large: 431,
  internal_error: 500,
  not_implemented: 501,
  /** POST /chat/completions: the agent run failed (its fee was refunded); the message says why. */
  agent_run_failed: 502,
  service_unavailable: 503,
  /** POST /real-world/spaces: imageUrls or videoUrl on a deployment without the room engine; nothing is charged. */
  room_engine_unavailable: 503,
  timeout: 504,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

/** One failed rule of a validation error: `path` is dotted (`ops.2.column`; `body` or `query` for the whole). */
export interface ErrorDetail {
  path: string;
  code: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    opts: { cause?: unknown; headers?: Record<string, string>; quiet?: boolean; details?: readonly ErrorDetail[] } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
    this.headers = opts.headers ?? {};
    this.quiet = opts.quiet ?? false;
    this.details = opts.details;
  }
  readonly headers: Record<string, string>;
  /** One entry per failed rule of a validation_error (answered as `error.details`). */
  readonly details: readonly ErrorDetail[] | undefined;
  /**
   * A 5xx the HTTP funnel counts but does not log one by one: the process logged its cause once
   * (the database going away: one line when it goes, one when it is back).
   */
  readonly quiet: boolean;
}

export const notFound = (what = 'resource') => new AppError('not_found', `${what} not found`);

/**
 * 503 while the database is away (platform/infra/db-health.ts): the Error shape, `service_unavailable`
 * and Retry-After, never a 500. Nothing the request did is lost: a retry with the same
 * Idempotency-Key finds what it made.
 */
export const databaseUnavailable = (cause?: unknown) =>
  new AppError(
    'service_unavailable',
    `the database is not answering; retry after ${DATABASE_RETRY_AFTER_SECONDS} s (with the same Idempotency-Key, if any)`,
    {
      cause,
      headers: { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) },
      // Unreachable is logged once per outage by the process (platform/runtime.ts); a timeout or
      // a primary stepping down is logged with each request, like any other failure.
      quiet: cause === undefined || isDatabaseUnreachable(cause),
    },
  );

/** Longest piece of caller input an error message repeats (a field name, a value, a path). */
export const ECHO_MAX = 64;

/** `s` cut to `max` characters with "…" when longer: for quoting caller input in messages. */
export const clip = (s: string, max = ECHO_MAX) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** Longest error message answered; the parts above it are cut. */
const MESSAGE_MAX = 1024;

/**
 * An error message safe to answer: no run of more than ECHO_MAX characters between blanks and
 * the separators `,;:` (a field name or value quoted from the request), and at most MESSAGE_MAX
 * characters in all, so a 1 MiB field name never comes back in full. The HTTP funnel applies it
 * to every message, whoever wrote it.
 */
export function boundedMessage(message: string): string {
  const capped = message.replace(new RegExp(`[^\\s,;:]{${ECHO_MAX + 1},}`, 'g'), (run) => clip(run));
  return capped.length > MESSAGE_MAX ? clip(capped, MESSAGE_MAX) : capped;
}

/** Codes for errors of other libraries that carry an HTTP status (http-errors style). */
const STATUS_CODES: Partial<Record<number, ErrorCode>> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  408: 'request_timeout',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  416: 'range_not_satisfiable',
  429: 'rate_limited',
  431: 'headers_too_large',
};

/** What to say for a library error: never its own message, which may quote the request. */
const STATUS_MESSAGES: Partial<Record<ErrorCode, string>> = {
  bad_request: 'the request could not be read',
  unauthorized: 'not authenticated',
  forbidden: 'forbidden',
  not_found: 'not found',
  request_timeout: 'the request was not received in time',
  conflict: 'conflict',
  payload_too_large: 'body: larger than the accepted limit',
  unsupported_media_type: 'unsupported media type',
  range_not_satisfiable: 'Range: no byte of the file is in the requested range',
  rate_limited: 'too many requests',
  headers_too_large: 'request headers are larger than accepted',
};

/** Body-parser failures (they carry `type`): stable codes with messages of our own. */
function fromBodyParser(type: string, err: unknown): AppError | null {
  switch (type) {
    case 'entity.parse.failed':
      return new AppError('invalid_json', 'body: malformed JSON', { cause: err });
    case 'entity.too.large':
      return new AppError('payload_too_large', 'body: larger than the accepted limit', { cause: err });
    case 'encoding.unsupported':
      return new AppError(
        'unsupported_media_type',
        'Content-Encoding: unsupported; send identity, gzip, deflate or br',
        { cause: err },
      );
    case 'charset.unsupported':
      return new AppError('unsupported_media_type', 'Content-Type: unsupported charset; JSON is UTF-8', { cause: err });
    case 'request.aborted':
      return new AppError('validation_error', 'body: request aborted', { cause: err });
    case 'request.size.invalid':
      return new AppError('bad_request', 'body: shorter or longer than its Content-Length', { cause: err });
    default:
      return null;
  }
}

/**
 * The funnels' mapping. An AppError stays as it is; a database that is away or failing over
 * becomes service_unavailable with Retry-After (databaseUnavailable); anything unknown becomes
 * internal_error, with the original kept as the cause.
 *
 * `request: true` (the HTTP funnel): the error was raised while serving a client's request, so
 * an error of another library that carries a 4xx `status`/`statusCode` (http-errors style:
 * body-parser, the router, zlib through body-parser) is the client's: it keeps its status
 * under a stable code and a message of our own (theirs may quote the request). Workers and the
 * scheduler leave it off: there a 4xx comes from an upstream, and is our failure.
 */
export function toAppError(err: unknown, opts: { request?: boolean } = {}): AppError {
  if (err instanceof AppError) return err;
  if (isDatabaseUnavailable(err)) return databaseUnavailable(err);
  const e = (err ?? {}) as { type?: unknown; status?: unknown; statusCode?: unknown; code?: unknown };
  const status = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (opts.request && status !== undefined && status >= 400 && status < 500) {
    if (typeof e.type === 'string') {
      const mapped = fromBodyParser(e.type, err);
      if (mapped) return mapped;
    }
    // The router could not percent-decode a path parameter (%ff, %, %C0%AF).
    if (err instanceof URIError)
      return new AppError('validation_error', 'path: malformed percent-encoding', { cause: err });
    // A compressed body that does not decompress (gzip, deflate or br over plain bytes).
    if (
      typeof e.code === 'string' &&
      (e.code.startsWith('Z_') || e.code.startsWith('ERR_BROTLI') || e.code.startsWith('ERR__'))
    ) {
      return new AppError('bad_request', 'body: does not match its Content-Encoding', { cause: err });
    }
    const code = STATUS_CODES[status] ?? 'bad_request';
    return new AppError(code, STATUS_MESSAGES[code] ?? 'the request could not be read', { cause: err });
  }
  return new AppError('internal_error', 'internal server error', { cause: err });
}
