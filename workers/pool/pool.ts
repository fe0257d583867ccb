import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { JOB_TYPES, broker, type PoolType } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { Delivery } from '../../platform/infra/amqp';
import { isDatabaseUnavailable } from '../../platform/infra/db-health';
import { currentContext, withContext } from '../../platform/infra/context';
import type { JobMessage } from '../../platform/jobs/jobs';
import type { Logger } from '../../platform/infra/log';
import type { JobDoc } from '../../platform/infra/mongo';
import { Drain } from '../../platform/infra/drain';
import { deadLetter, parseOrDeadLetter } from '../../platform/infra/message';
import type { Runtime } from '../../platform/runtime';
import { inSpan } from '../../platform/infra/tracing';
import { RetryLaterError, UnrecoverableError } from './errors';

export interface ProcessorContext {
  /** 1 on the first try. */
  attempt: number;
  /** Aborted when the worker loses the job (lease taken over) or stops past its grace period. */
  signal: AbortSignal;
  /** Record the pipeline's own status token, a human message, and optionally a partial result. */
  progress(rawStatus: string, message: string, result?: Record<string, unknown>): Promise<void>;
  job: Readonly<JobDoc>;
  log: Logger;
}

/** A typed processor: validated input in, a result object out. */
export type Processor<I, O extends Record<string, unknown>> = (input: I, ctx: ProcessorContext) => Promise<O>;

export interface PoolDefinition<I = unknown, O extends Record<string, unknown> = Record<string, unknown>> {
  pool: PoolType;
  input: z.ZodType<I>;
  process: Processor<I, O>;
  /** Extra members for the completion event (an asset URL, say). */
  eventExtras?: (result: O) => Record<string, unknown>;
}

export interface PoolEvents {
  completed: [{ jobId: string; result: Record<string, unknown> }];
  failed: [{ jobId: string; error: string; reason: string }];
  retrying: [{ jobId: string; error: string; attempt: number }];
  duplicate: [{ jobId: string }];
  deadLettered: [{ reason: string }];
}

export interface PoolOptions {
  concurrency: number;
  leaseMs: number;
  maxAttempts: number;
  retryDelayMs: number;
  shutdownGraceMs: number;
}

/** What kind of error, for logs: its class and stable code, never its message. */
const errorType = (err: unknown) =>
  err instanceof Error
    ? `${err.name}${(err as { code?: unknown }).code ? `:${String((err as { code?: unknown }).code)}` : ''}`
    : typeof err;

const JobMessageSchema = z.object({ jobId: z.string().min(1), accountId: z.string().min(1), type: z.enum(JOB_TYPES) });

/**
 * A pool of one job type: consumes its queue with prefetch = concurrency, claims each job with
 * a lease (renewed while working), runs the processor, and settles the message only after the
 * job document holds the outcome. Crashes leave the lease to expire; the sweep republishes.
 * Length: a pool of 10 methods sharing its consumers, the work in flight and the closing state; the longest,
 * run, is 82 lines.
 */
export class Pool<I, O extends Record<string, unknown>> extends EventEmitter<PoolEvents> {
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private cancel?: () => Promise<void>;
  /** The jobs running here, by job id (counted in pool_jobs_in_flight). */
  private readonly inFlight: Drain;
  private closing?: Promise<void>;
  /** Aborted by close(): ends the waits for the database below. */
  private readonly stopping = new AbortController();
  private readonly log: Logger;

  constructor(
    private readonly rt: Runtime,
    private readonly def: PoolDefinition<I, O>,
    private readonly opts: PoolOptions,
  ) {
    super();
    this.log = rt.log.child({ pool: def.pool });
    const labels = { pool: def.pool };
    this.inFlight = new Drain({
      gauge: { inc: () => metrics.jobsInFlight.inc(labels), dec: () => metrics.jobsInFlight.dec(labels) },
    });
  }

  async start(): Promise<void> {
    const queue = broker.poolQueue(this.rt.config.QUEUE_PREFIX, this.def.pool);
    this.cancel = await this.rt.amqp.consume(queue, this.opts.concurrency, (d) => this.handle(d));
    this.log.info('pool started', { queue, concurrency: this.opts.concurrency });
  }

  private async handle(d: Delivery): Promise<void> {
    const dl = {
      queue: this.def.pool,
      log: this.log,
      onDeadLettered: (reason: string) => this.emit('deadLettered', { reason }),
    };
    const parsed: JobMessage | undefined = parseOrDeadLetter(d, JobMessageSchema, dl);
    if (!parsed) return;
    if (parsed.type !== this.def.pool) return deadLetter(d, 'wrong_pool', dl);
    // Every line about the job names it and the request that made it (the message's
    // x-request-id header, or the job's own record when an older publisher sent none).
    await withContext({ jobId: parsed.jobId }, () =>
      this.whileDatabaseAway((again) => this.claimAndRun(d, parsed, again)),
    );
  }

  /**
   * Run `step`; while it fails because the database is away, wait until this process sees it
   * again and run it again (`again` true), holding the message meanwhile: a requeue would count
   * towards the quorum queue's delivery limit, and a long outage would dead-letter good jobs.
   * A stopping worker gives up waiting (the error goes up, the message is requeued).
   */
  private async whileDatabaseAway<T>(step: (again: boolean) => Promise<T>): Promise<T> {
    for (let tries = 0; ; tries++) {
      try {
        return await step(tries > 0);
      } catch (err) {
        if (!isDatabaseUnavailable(err) || this.closing !== undefined) throw err;
        if (tries === 0) this.log.warn('database unavailable; waiting for it', { errorType: errorType(err) });
        await this.rt.dbHealth.whenUp(this.stopping.signal);
        // Up, or a timeout of the operation's own while up: a short pause keeps a slow database
        // from being retried in a tight loop.
        await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** Math.min(tries, 5))));
        if (this.closing !== undefined) throw err;
      }
    }
  }

  private async claimAndRun(d: Delivery, parsed: JobMessage, again: boolean): Promise<void> {
    const { jobs } = this.rt;
    // Our own lease may be taken again only when no delivery here is running the job.
    let job = await jobs.claim(parsed.jobId, this.owner, this.opts.leaseMs, {
      again: again && !this.inFlight.has(parsed.jobId),
    });
    if (!job && d.msg.fields.redelivered) job = await this.takeOver(parsed.jobId);
    if (!job) {
      // Finished, held by another worker, or unknown: nothing to do for this copy.
      d.ack();
      this.emit('duplicate', { jobId: parsed.jobId });
      return;
    }
    const requestId = currentContext().requestId ?? job.requestId ?? undefined;
    await withContext({ requestId }, () => this.run(d, job));
  }

  private async run(d: Delivery, job: JobDoc): Promise<void> {
    const { jobs } = this.rt;
    const log = this.log.child({ attempt: job.attempts });
    if (job.attempts > this.opts.maxAttempts) {
      await jobs.fail(job._id, `gave up after ${this.opts.maxAttempts} attempts`, {
        owner: this.owner,
        reason: 'attempts_exhausted',
      });
      d.ack();
      this.emit('failed', { jobId: job._id, error: 'attempts exhausted', reason: 'attempts_exhausted' });
      return;
    }
    // First start only (a retry's wait would include the attempts before it). The dispatch mark is
    // written in a batch up to 20 ms (100 ms under a stream) after the publish, so a quick start often sees none yet: the
    // job was created just before it was published, which is the wait a client sees.
    if (job.attempts === 1)
      metrics.jobQueueWait.observe(
        { type: job.type },
        Math.max(0, Date.now() - (job.dispatchedAt ?? job.createdAt).getTime()) / 1000,
      );

    const work = this.inFlight.begin(job._id);
    const abort = work.abort;
    const heartbeat = setInterval(
      () => {
        jobs.renewLease(job._id, this.owner, this.opts.leaseMs).then(
          (ours) => {
            if (!ours) abort.abort(new Error('lease lost'));
          },
          // While the database is known to be away every beat fails: the process said so once.
          (err) =>
            isDatabaseUnavailable(err) && !this.rt.dbHealth.up
              ? log.debug('lease renewal failed', { err: err as Error })
              : log.warn('lease renewal failed', { err: err as Error }),
        );
      },
      Math.max(200, Math.floor(this.opts.leaseMs / 3)),
    );

    const startedAt = Date.now();
    log.debug('job started', { type: job.type });
    try {
      const input = this.def.input.safeParse(job.input);
      if (!input.success) throw new UnrecoverableError('the stored job input no longer matches its contract');
      // The engine call's span: its progress writes nest under it; the claim and completion
      // sit beside it, under the delivery's consumer span.
      const result = await inSpan(
        `engine ${job.type}`,
        'internal',
        { 'svc.job.id': job._id, 'svc.job.type': job.type, 'svc.job.attempt': job.attempts },
        () =>
          this.def.process(input.data, {
            attempt: job.attempts,
            signal: abort.signal,
            job,
            log,
            progress: async (rawStatus, message, partial) => {
              await jobs.progress(job._id, this.owner, { rawStatus, progressMessage: message, result: partial });
            },
          }),
      );
      if (abort.signal.aborted) throw abort.signal.reason;
      // The work is done: a database that went away meanwhile is waited for, not a reason to
      // do the work again.
      const completed = await this.whileDatabaseAway(() =>
        jobs.complete(job._id, this.owner, result, this.def.eventExtras?.(result), job),
      );
      if (completed) {
        log.info('job completed', { durationMs: Date.now() - startedAt });
        this.emit('completed', { jobId: job._id, result });
      }
      d.ack();
    } catch (err) {
      const settle = await this.onError(job, err, log);
      // A stopping worker puts the message back so another worker takes the job at once.
      if (settle === 'requeue') d.requeue();
      else d.ack();
    } finally {
      clearInterval(heartbeat);
      work.end();
    }
  }

  /**
   * The broker redelivers a message at once when the consumer holding it died. Its worker no
   * longer renews the job's lease, so wait for the lease to run out (at most leaseMs) and take
   * the job then, instead of waiting for the sweep. If the holder is alive it keeps renewing,
   * and this copy is a duplicate after all.
   */
  private async takeOver(jobId: string): Promise<JobDoc | null> {
    for (let i = 0; i < 2 && this.closing === undefined; i++) {
      const lease = await this.rt.jobs.leaseOf(jobId);
      if (!lease) return null; // not processing any more (finished, or queued for someone else)
      const wait = lease.until.getTime() - Date.now() + 50;
      if (wait > this.opts.leaseMs + 1000) return null; // a retry scheduled later: the sweep brings it
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (this.closing !== undefined) return null; // stopping: leave it to the next worker
      const job = await this.rt.jobs.claim(jobId, this.owner, this.opts.leaseMs);
      if (job) {
        this.log.info('took over a job whose worker stopped renewing its lease', { jobId });
        return job;
      }
    }
    return null;
  }

  private async onError(job: JobDoc, err: unknown, log: Logger): Promise<'ack' | 'requeue'> {
    const message = err instanceof Error ? err.message : String(err);
    if (this.closing !== undefined && !(err instanceof UnrecoverableError)) {
      // Stopping: hand the job straight back so another worker can take it now.
      await this.rt.jobs.scheduleRetry(job._id, this.owner, 0, 'worker stopped');
      return 'requeue';
    }
    if (isDatabaseUnavailable(err)) {
      // The database went away under the job (a progress write, say): once it is back, hand the
      // job straight back without counting the attempt, and requeue so it runs again at once.
      log.warn('job attempt interrupted by the database; retrying once it is back', { errorType: errorType(err) });
      await this.whileDatabaseAway(() =>
        this.rt.jobs.scheduleRetry(job._id, this.owner, 0, 'the database was unavailable', { uncounted: true }),
      );
      return 'requeue';
    }
    if (err instanceof UnrecoverableError) {
      // The message may quote user input (a host, a provider's reply): it goes to the job, not the log.
      log.warn('job failed', { reason: 'unrecoverable', errorType: errorType(err) });
      await this.rt.jobs.fail(job._id, message, { owner: this.owner, reason: 'error' });
      this.emit('failed', { jobId: job._id, error: message, reason: 'error' });
      return 'ack';
    }
    if (job.attempts >= this.opts.maxAttempts) {
      log.warn('job failed', { reason: 'attempts_exhausted', errorType: errorType(err) });
      const text = `failed after ${job.attempts} attempts: ${message}`;
      await this.rt.jobs.fail(job._id, text, { owner: this.owner, reason: 'attempts_exhausted' });
      this.emit('failed', { jobId: job._id, error: text, reason: 'attempts_exhausted' });
      return 'ack';
    }
    const delay = err instanceof RetryLaterError && err.delayMs !== undefined ? err.delayMs : this.opts.retryDelayMs;
    log.warn('job attempt failed; retrying later', { errorType: errorType(err), delayMs: delay });
    metrics.jobsRetried.inc({ type: job.type });
    await this.rt.jobs.scheduleRetry(job._id, this.owner, delay, message);
    this.emit('retrying', { jobId: job._id, error: message, attempt: job.attempts });
    return 'ack';
  }

  /** Stop taking work, let jobs in flight finish within the grace period, then hand them back. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopping.abort();
      // Past the grace period the jobs left are aborted and waited for: each hands its job back.
      await this.inFlight.close({
        stop: [this.cancel],
        graceMs: this.opts.shutdownGraceMs,
        log: this.log,
        stoppedMessage: 'pool stopped',
        awaitAborted: true,
      });
    })();
    return this.closing;
  }
}
