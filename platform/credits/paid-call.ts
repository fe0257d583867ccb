import type { CreditOperation, PoolType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { type RpcReply, RpcTimeoutError } from '../infra/amqp';
import type { HoldDelivery } from './credits';
import { AppError, ERROR_STATUS, type ErrorCode } from '../infra/errors';
import type { Runtime } from '../runtime';

/**
 * Synchronous calls to a worker pool (RabbitMQ request/reply with a deadline), paid for with a
 * credit hold: POST /images, /images/moonlight, /sheets/{id}/edit, /extract-flowchart.
 */

/** Extra life of a hold past the call's deadline, before the scheduler may settle it. */
export const HOLD_GRACE_MS = 30_000;
/**
 * How long `guard()` keeps a hold from being settled: the write that delivers must start within
 * this window (it takes milliseconds; a delivery written later than this may be refunded).
 */
export const DELIVERY_WINDOW_MS = 60_000;

export interface PoolCall {
  pool: PoolType;
  /** The `operation` label of the rpc metrics. */
  operation: string;
  payload: unknown;
  timeoutMs: number;
}

/**
 * Ask a pool and wait for its answer, with the rpc metrics. 504 `timeout` when it does not answer
 * before the deadline, 503 `service_unavailable` when it cannot be reached, the pool's own error
 * code (a known one, else internal_error) when it refuses.
 */
export async function callPool<R>(rt: Pick<Runtime, 'amqp'>, call: PoolCall): Promise<R> {
  const labels = { pool: call.pool, operation: call.operation };
  const started = performance.now();
  let reply: RpcReply<R>;
  try {
    reply = await rt.amqp.rpc<R>(call.pool, call.payload, call.timeoutMs);
  } catch (err) {
    const timeout = err instanceof RpcTimeoutError;
    metrics.rpcCalls.inc({ ...labels, outcome: timeout ? 'timeout' : 'unavailable' });
    throw timeout
      ? new AppError('timeout', `the ${call.pool} pool did not answer within ${call.timeoutMs} ms`, { cause: err })
      : new AppError('service_unavailable', `the ${call.pool} pool is unreachable`, { cause: err });
  }
  metrics.rpcDuration.observe(labels, (performance.now() - started) / 1000);
  metrics.rpcCalls.inc({ ...labels, outcome: reply.ok ? 'ok' : 'refused' });
  if (!reply.ok) {
    const code = (reply.error.code in ERROR_STATUS ? reply.error.code : 'internal_error') as ErrorCode;
    throw new AppError(code, reply.error.message);
  }
  return reply.result;
}

export interface PaidCall<R, T> extends PoolCall {
  /** What is charged (at its price). */
  charge: CreditOperation;
  accountId: string;
  requestId: string;
  /**
   * Name the hold, e.g. from the Idempotency-Key (`ctx.idFor('hold')`): a retry after a crash
   * takes over the hold the first attempt left pending instead of holding twice.
   */
  holdId?: string;
  /** The document `deliver` writes (by collection and _id): see "Guarantee" below. */
  deliveredBy?: HoldDelivery;
  /**
   * Turn the pool's answer into what is paid for (check it, store it). Call `guard()` right
   * before the write that delivers: it keeps the hold from being settled meanwhile, and throws
   * (504 timeout) when the scheduler settled it already, so nothing is written unpaid.
   * Without `deliver`, the answer itself is what is paid for.
   */
  deliver?: (answer: R, guard: () => Promise<void>) => Promise<T>;
}

/** The message of an error after which the hold was given back. */
function nothingCharged(err: unknown): unknown {
  if (!(err instanceof AppError) || /nothing was charged/.test(err.message)) return err;
  const out = new AppError(err.code, `${err.message}; nothing was charged`, { cause: err.cause, headers: err.headers });
  return out;
}

/**
 * Hold the credits, call the pool, deliver, then capture; give the credits back on any failure
 * (the error's message then ends with "nothing was charged").
 *
 * Guarantee (no free delivery, no paid failure): the hold records `deliveredBy`, the document
 * `deliver` writes. A failure anywhere settles the hold: captured if that document exists (it
 * was written before the failure), released otherwise. Once `deliver` has returned, the capture
 * happens outside any failure path: if it fails (or the process dies right before it), the
 * scheduler settles the hold after its `until` and captures it because the document exists, so
 * the answer stays a success and a retry is never needed. `guard()` moves `until` to
 * DELIVERY_WINDOW_MS from now with one conditional update that a settler's claim excludes, so
 * however long the delivery waited (a queue, retries) the hold cannot be released under a write
 * that starts within that window.
 */
export async function paidCall<R, T = R>(
  rt: Pick<Runtime, 'amqp' | 'credits' | 'log'>,
  call: PaidCall<R, T>,
): Promise<{ result: T /** Millicredits. */; charged: number }> {
  const { credits } = rt;
  const amount = credits.millicreditsFor(call.charge);
  const ttlMs = call.timeoutMs + HOLD_GRACE_MS;
  let hold: string | undefined;
  if (call.holdId !== undefined && (await credits.pending(call.holdId))) {
    // A retry: the attempt that made this hold died before settling it. Take it over; if a
    // settler has it already, let it finish (released: nothing was delivered) and hold afresh.
    if (await credits.extend(call.holdId, ttlMs)) hold = call.holdId;
    else await credits.settle(call.holdId);
  }
  // A short balance refuses here (402), before any work.
  hold ??= await credits.hold({
    accountId: call.accountId,
    operation: call.charge,
    millicredits: amount,
    requestId: call.requestId,
    ttlMs,
    id: call.holdId,
    deliveredBy: call.deliveredBy,
  });

  let result: T;
  try {
    const answer = await callPool<R>(rt, call);
    const guard = async () => {
      if (!(await credits.extend(hold, DELIVERY_WINDOW_MS)))
        throw new AppError('timeout', `the ${call.pool} call outlived its deadline and its credits were given back`);
    };
    result = call.deliver ? await call.deliver(answer, guard) : (answer as unknown as T);
  } catch (err) {
    // Delivered after all (written, then something failed): the charge stands.
    if ((await credits.settle(hold)) === 'captured') throw err;
    throw nothingCharged(err);
  }
  try {
    await credits.capture(hold);
  } catch (err) {
    // With deliveredBy the scheduler captures it (the document exists); without, nothing was stored: give it back.
    if (!call.deliveredBy) {
      await credits.settle(hold);
      throw err;
    }
    rt.log.warn('credit hold not captured; the scheduler will capture it', { holdId: hold, err: err as Error });
  }
  return { result, charged: amount };
}
