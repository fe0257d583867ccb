import { EventEmitter } from 'node:events';
import type { z } from 'zod';
import { broker, type PoolType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { Delivery } from '../../platform/infra/amqp';
import type { Logger } from '../../platform/infra/log';
import { Drain } from '../../platform/infra/drain';
import { parseOrDeadLetter } from '../../platform/infra/message';
import type { Runtime } from '../../platform/runtime';
import { inSpan } from '../../platform/infra/tracing';

export interface ConsumerContext {
  /** Aborted when the worker stops past its grace period. */
  signal: AbortSignal;
  log: Logger;
  /** Deliveries of this message before this one that ended without an ack (RabbitMQ x-delivery-count; 0 on the first). */
  priorDeliveries: number;
}

/**
 * A plain consumer pool (not a job, not request/reply): typed messages from its pool queue,
 * handled, then acked. Used for background work whose state lives in its own documents (the drive
 * pool's text extraction). `handle` must be idempotent: a message may come twice.
 * A message that does not match `input` is dead-lettered; a handler that throws leaves the
 * message to be requeued after a backoff (AmqpClient.consume), and the queue's delivery limit
 * dead-letters it in the end.
 */
export interface ConsumerDefinition<I = unknown> {
  pool: PoolType;
  input: z.ZodType<I>;
  handle(input: I, ctx: ConsumerContext): Promise<void>;
}

export interface ConsumerEvents {
  handled: [{ pool: PoolType }];
  rejected: [{ pool: PoolType; reason: string }];
}

/** Runs a ConsumerDefinition with prefetch = concurrency. `close()` may be called twice. */
export class ConsumerPool<I> extends EventEmitter<ConsumerEvents> {
  private cancel?: () => Promise<void>;
  /** The work running here (counted in pool_jobs_in_flight). */
  private readonly inFlight: Drain;
  private readonly log: Logger;

  constructor(
    private readonly rt: Runtime,
    private readonly def: ConsumerDefinition<I>,
    private readonly opts: { concurrency: number; shutdownGraceMs: number },
  ) {
    super();
    this.log = rt.log.child({ pool: def.pool, role: 'consumer' });
    const labels = { pool: def.pool };
    this.inFlight = new Drain({
      gauge: { inc: () => metrics.jobsInFlight.inc(labels), dec: () => metrics.jobsInFlight.dec(labels) },
    });
  }

  async start(): Promise<void> {
    const queue = broker.poolQueue(this.rt.config.QUEUE_PREFIX, this.def.pool);
    this.cancel = await this.rt.amqp.consume(queue, this.opts.concurrency, (d) => this.take(d));
    this.log.info('consumer pool started', { queue, concurrency: this.opts.concurrency });
  }

  private async take(d: Delivery): Promise<void> {
    const input = parseOrDeadLetter(d, this.def.input, {
      queue: this.def.pool,
      log: this.log,
      onDeadLettered: () => this.emit('rejected', { pool: this.def.pool, reason: 'invalid' }),
    });
    if (input === undefined) return;
    const work = this.inFlight.begin();
    const abort = work.abort;
    const headers = (d.msg.properties.headers ?? {}) as Record<string, unknown>;
    const priorDeliveries = Number(headers['x-delivery-count'] ?? (d.msg.fields.redelivered ? 1 : 0)) || 0;
    try {
      await inSpan(`engine ${this.def.pool}`, 'internal', { 'svc.pool': this.def.pool }, () =>
        this.def.handle(input, { signal: abort.signal, log: this.log, priorDeliveries }),
      );
      d.ack();
      this.emit('handled', { pool: this.def.pool });
    } finally {
      work.end();
    }
  }

  /** Stop taking messages, wait for those in flight up to the grace period, then abort the rest (their messages go back to the broker). */
  async close(): Promise<void> {
    await this.inFlight.close({
      stop: [this.cancel],
      graceMs: this.opts.shutdownGraceMs,
      log: this.log,
      stoppedMessage: 'consumer pool stopped',
    });
  }
}
