/** The job cannot succeed (bad input, refused content): fail it now, refund, no retry. */
export class UnrecoverableError extends Error {
  override name = 'UnrecoverableError';
}

/** A transient failure (provider down, rate limited): try again after `delayMs`. */
export class RetryLaterError extends Error {
  override name = 'RetryLaterError';
  constructor(
    message: string,
    readonly delayMs?: number,
  ) {
    super(message);
  }
}
