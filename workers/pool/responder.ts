import type { z } from 'zod';
import { broker, type PoolType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { RpcReply } from '../../platform/infra/amqp';
import { AppError, toAppError } from '../../platform/infra/errors';
import type { Logger } from '../../platform/infra/log';
import { Drain } from '../../platform/infra/drain';
import { funnelError } from '../../platform/infra/error-funnel';
import type { Runtime } from '../../platform/runtime';
import { inSpan } from '../../platform/infra/tracing';

export interface ResponderContext {
  /** Aborted at the caller's deadline (nobody waits for the answer any more) or when stopping past the grace period. */
  signal: AbortSignal;
  log: Logger;
  /**
   * Stream a chunk of bytes to the caller before the answer (a streamed reply: POST /speech's
   * audio; the caller uses `AmqpClient.rpcStream`). Resolves once the broker has it, so awaiting
   * each send keeps chunks in order and paces the handler; rejects when the broker is away (the
   * handler should stop: its caller will time out). Single-answer pools never call it.
   */
  send(chunk: Buffer): Promise<void>;
}

/**
 * A request/reply pool (synchronous endpoints such as /images): typed input in, an answer out.
 * Throw AppError to answer with that error code; anything else answers internal_error. A
 * streaming pool (speech) sends chunks with `ctx.send` first; its answer then closes the stream
 * (totals), and an error after some chunks tells the caller the stream was cut.
 */
export interface ResponderDefinition<I = unknown, O = unknown> {
  pool: PoolType;
  input: z.ZodType<I>;
  handle(input: I, ctx: ResponderContext): Promise<O>;
}

/**
 * Serves a pool queue over `AmqpClient.respond` with prefetch = concurrency. `close()` stops
 * taking requests and waits for those in flight (within the grace period), and may be called twice.
 */
export class Responder<I, O> {
  private cancel?: () => Promise<void>;
  /** The work running here (counted in pool_jobs_in_flight). */
  private readonly inFlight: Drain;
  private readonly log: Logger;

  constructor(
    private readonly rt: Runtime,
    private readonly def: ResponderDefinition<I, O>,
    private readonly opts: { concurrency: number; shutdownGraceMs: number },
  ) {
    this.log = rt.log.child({ pool: def.pool, role: 'responder' });
    const labels = { pool: def.pool };
    this.inFlight = new Drain({
      gauge: { inc: () => metrics.jobsInFlight.inc(labels), dec: () => metrics.jobsInFlight.dec(labels) },
    });
  }

  async start(): Promise<void> {
    const queue = broker.poolQueue(this.rt.config.QUEUE_PREFIX, this.def.pool);
    this.cancel = await this.rt.amqp.respond(queue, this.opts.concurrency, (payload, meta) =>
      this.answer(payload, meta.deadline, meta.send),
    );
    this.log.info('responder started', { queue, concurrency: this.opts.concurrency });
  }

  private async answer(
    payload: unknown,
    deadline: number | null,
    send: (chunk: Buffer) => Promise<void>,
  ): Promise<RpcReply> {
    const work = this.inFlight.begin();
    const abort = work.abort;
    const timer =
      deadline === null
        ? undefined
        : setTimeout(() => abort.abort(new Error('the caller stopped waiting')), Math.max(0, deadline - Date.now()));
    try {
      const input = this.def.input.safeParse(payload);
      if (!input.success) throw new AppError('validation_error', 'request does not match the pool contract');
      const result = await inSpan(`engine ${this.def.pool}`, 'internal', { 'svc.pool': this.def.pool }, () =>
        this.def.handle(input.data, { signal: abort.signal, log: this.log, send }),
      );
      return { ok: true, result };
    } catch (err) {
      const e =
        abort.signal.aborted && !(err instanceof AppError)
          ? new AppError('timeout', 'the work was stopped at its deadline')
          : toAppError(err);
      // A refusal (the handler's AppError) or the deadline is the answer; a failure of ours goes through the funnel.
      if (e.code === 'internal_error')
        funnelError(e, { source: 'consumer', log: this.log, msg: 'request failed', logWhen: 'always' });
      return { ok: false, error: { code: e.code, message: e.message } };
    } finally {
      clearTimeout(timer);
      work.end();
    }
  }

  /** Stop taking messages, wait for those in flight up to the grace period, then abort the rest (their messages go back to the broker). */
  async close(): Promise<void> {
    await this.inFlight.close({
      stop: [this.cancel],
      graceMs: this.opts.shutdownGraceMs,
      log: this.log,
      stoppedMessage: 'responder stopped',
    });
  }
}
