/**
 * The one error type. `code` is stable and public (SPEC 7): clients branch on it.
 * WARNING: codes are part of the public contract; add codes, never rename them.
 */
export const ERROR_STATUS = {
  validation_error: 400,
  /** A prompt describing adult content (POST /images/moonlight). */
  adult_content: 400,
  invalid_json: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  /** A finished render scored as adult; not charged (POST /images/moonlight). */
  adult_render: 403,
  plan_required: 403,
  not_found: 404,
  conflict: 409,
  idempotency_in_flight: 409,
  limit_exceeded: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal_error: 500,
  not_implemented: 501,
  service_unavailable: 503,
  timeout: 504,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    opts: { cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
    this.headers = opts.headers ?? {};
  }
  readonly headers: Record<string, string>;
}

export const notFound = (what = 'resource') => new AppError('not_found', `${what} not found`);

/** Anything unknown becomes an internal_error AppError; the original is kept as the cause. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  return new AppError('internal_error', 'internal server error', { cause: err });
}
