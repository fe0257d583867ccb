import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { z } from 'zod';
import { BusEvent, EVENT_VERSION } from '../../contracts/events';
import { broker } from '../../contracts/registry';
import { WEBHOOK_LIMITS, type WebhookEventPayload } from '../../contracts/webhooks';
import { metrics } from '../../monitoring/metrics';
import { withContext } from '../../platform/infra/context';
import type { Delivery } from '../../platform/infra/amqp';
import { Drain } from '../../platform/infra/drain';
import { parseOrDeadLetter } from '../../platform/infra/message';
import type { Runtime } from '../../platform/runtime';
import { ATTR, endSpan, startSpan, tracingOn } from '../../platform/infra/tracing';
import { createDeliveriesRepository } from '../../platform/webhooks/deliveries.repository';
import { createSecretBox, signPayload } from '../../platform/webhooks/secrets';
import { WEBHOOK_DEFER_MS } from '../../platform/infra/webhook-topology';
import { createWebhooksRepository, type WebhookDoc } from '../../platform/webhooks/webhooks.repository';
import { attemptDelivery, type AttemptResult } from './attempt';

/**
 * One delivery of one event to one webhook, as queued. WARNING: read by webhook workers of
 * other versions; add fields only.
 */
const DeliveryMessage = z.object({
  v: z.literal(1),
  /** Sent as eventId / X-Service-Event-Id; derived from (source event, webhook), so a repeated fan-out sends the same id. */
  deliveryId: z.string(),
  sourceEventId: z.string(),
  webhookId: z.string(),
  accountId: z.string(),
  event: z.string(),
  occurredAt: z.string(),
  data: z.record(z.string(), z.unknown()),
  /** 1 for the first try. */
  attempt: z.number().int().min(1),
});
type DeliveryMessage = z.infer<typeof DeliveryMessage>;

/**
 * The client span of one delivery attempt: the customer's host and port, never the URL's path or
 * query (they may hold the customer's own tokens). No `traceparent` goes to the endpoint: it is a
 * third party, and our trace ids and sampling decisions are not its business.
 */
function deliverySpan(hook: WebhookDoc, msg: DeliveryMessage) {
  let host: { address: string; port: number } | undefined;
  try {
    const u = new URL(hook.url);
    host = { address: u.hostname, port: Number(u.port) || (u.protocol === 'https:' ? 443 : 80) };
  } catch {
    host = undefined;
  }
  return startSpan('POST webhook', 'client', {
    [ATTR.httpRequestMethod]: 'POST',
    ...(host ? { [ATTR.serverAddress]: host.address, [ATTR.serverPort]: host.port } : {}),
    'svc.webhook.id': hook._id,
    'svc.webhook.event': msg.event,
    'svc.webhook.delivery_id': msg.deliveryId,
    'svc.webhook.attempt': msg.attempt,
  });
}

/** A healthy webhook's lastDeliveryAt is refreshed at most this often. */
const LAST_DELIVERY_STAMP_MS = 5000;

/** A name-based UUID (version 5 layout, SHA-256 truncated): stable per (event, webhook). */
export function deliveryIdFor(sourceEventId: string, webhookId: string): string {
  const b = createHash('sha256').update(`webhook-delivery:${sourceEventId}:${webhookId}`).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export interface WebhookWorkerEvents {
  fannedOut: [{ event: string; accountId: string; webhooks: number }];
  attempted: [{ webhookId: string; deliveryId: string; attempt: number; result: AttemptResult; willRetry: boolean }];
  skipped: [{ webhookId: string; deliveryId: string; reason: string }];
  deferred: [{ webhookId: string; deliveryId: string }];
  disabled: [{ webhookId: string; accountId: string }];
}

export interface WebhookWorkerOptions {
  attemptTimeoutMs: number;
  retryDelaysMs: readonly number[];
  disableAfter: number;
  concurrency: number;
  endpointConcurrency: number;
  allowLoopback: boolean;
  /** How long close() waits for attempts in flight before leaving them to redelivery. */
  shutdownGraceMs: number;
}

/**
 * The webhook pool (SPEC 6). Two consumers:
 * 1. fan-out: takes each event from the pool queue (bound to the events exchange with '#'),
 *    finds the account's active webhooks subscribed to it, and queues one delivery message per
 *    webhook (publisher confirms) before it acks the event;
 * 2. delivery: signs and POSTs one attempt, logs it, and on failure parks the message in the
 *    delay queue for the next retry (1 s, then 3 s) before it acks. A worker that dies in the
 *    middle of an attempt never acked it, so RabbitMQ hands the message to another worker.
 * Each webhook gets at most `endpointConcurrency` attempts at once per process; the rest wait in
 * a short delay queue, so a slow or dead endpoint holds a bounded share of the slots.
 * Length: a worker class of 14 methods sharing its consumers, the in-flight drain and the per-webhook
 * counters; the longest, attempt, is 123 lines.
 */
export class WebhookWorker extends EventEmitter<WebhookWorkerEvents> {
  private cancels: (() => Promise<void>)[] = [];
  /** Fan-outs and attempts running here. */
  private readonly inFlight = new Drain();
  private perWebhook = new Map<string, number>();
  private stamps = new Map<string, { at: number; pending?: Promise<void> }>();
  private readonly hooks;
  private readonly deliveries;
  private readonly box;
  private readonly log;

  constructor(
    private readonly rt: Runtime,
    private readonly opts: WebhookWorkerOptions,
  ) {
    super();
    this.hooks = createWebhooksRepository(rt.store);
    this.deliveries = createDeliveriesRepository(rt.store);
    this.box = createSecretBox(rt.config.WEBHOOK_SECRET_KEY);
    this.log = rt.log.child({ pool: 'webhook' });
  }

  static fromConfig(rt: Runtime) {
    const c = rt.config;
    return new WebhookWorker(rt, {
      attemptTimeoutMs: c.WEBHOOK_ATTEMPT_TIMEOUT_MS,
      retryDelaysMs: c.WEBHOOK_RETRY_DELAYS_MS,
      disableAfter: c.WEBHOOK_DISABLE_AFTER_FAILURES,
      concurrency: c.WEBHOOK_DELIVERY_CONCURRENCY,
      endpointConcurrency: c.WEBHOOK_ENDPOINT_CONCURRENCY,
      allowLoopback: c.ALLOW_LOOPBACK_URLS,
      shutdownGraceMs: Math.min(c.SHUTDOWN_GRACE_MS, c.WEBHOOK_ATTEMPT_TIMEOUT_MS + 1000),
    });
  }

  async start(): Promise<void> {
    const prefix = this.rt.config.QUEUE_PREFIX;
    this.cancels.push(
      await this.rt.amqp.consume(broker.poolQueue(prefix, 'webhook'), 16, (d) => this.track(this.fanOut(d))),
    );
    this.cancels.push(
      await this.rt.amqp.consume(broker.webhookDeliveryQueue(prefix), this.opts.concurrency, (d) =>
        this.track(this.deliver(d)),
      ),
    );
    this.log.info('webhook pool started', {
      concurrency: this.opts.concurrency,
      retryDelaysMs: this.opts.retryDelaysMs,
      attemptTimeoutMs: this.opts.attemptTimeoutMs,
    });
  }

  private track(p: Promise<void>): Promise<void> {
    return this.inFlight.track(p);
  }

  private parse<T>(d: Delivery, schema: z.ZodType<T>, queue: string): T | undefined {
    return parseOrDeadLetter(d, schema, { queue, log: this.log });
  }

  /** Stage 1: one event → one delivery message per subscribed, active webhook. */
  private async fanOut(d: Delivery): Promise<void> {
    const ev = this.parse(d, BusEvent, 'webhook');
    if (!ev) return;
    // Lines about a job's event name the job (and, from the message, the request that made it).
    await withContext(jobContext(ev.data), () => this.fanOutEvent(d, ev));
  }

  private async fanOutEvent(d: Delivery, ev: BusEvent): Promise<void> {
    const hooks = await this.hooks.forAccount(ev.accountId).subscribedTo(ev.event);
    const queue = broker.webhookDeliveryQueue(this.rt.config.QUEUE_PREFIX);
    for (const h of hooks) {
      const deliveryId = deliveryIdFor(ev.eventId, h._id);
      const msg: DeliveryMessage = {
        v: 1,
        deliveryId,
        sourceEventId: ev.eventId,
        webhookId: h._id,
        accountId: ev.accountId,
        event: ev.event,
        occurredAt: ev.occurredAt,
        data: ev.data,
        attempt: 1,
      };
      // A failed publish throws: the event is requeued and fanned out again; the delivery ids
      // are the same, so receivers deduplicate what went out twice.
      await this.rt.amqp.publish('', queue, msg, { messageId: deliveryId });
    }
    d.ack();
    this.emit('fannedOut', { event: ev.event, accountId: ev.accountId, webhooks: hooks.length });
  }

  private park(msg: DeliveryMessage, delayMs: number) {
    return this.rt.amqp.publish('', broker.webhookDelayQueue(this.rt.config.QUEUE_PREFIX, delayMs), msg, {
      messageId: msg.deliveryId,
    });
  }

  /** Stage 2: one attempt of one delivery. */
  private async deliver(d: Delivery): Promise<void> {
    const msg = this.parse(d, DeliveryMessage, 'webhook.deliveries');
    if (!msg) return;
    await withContext(jobContext(msg.data), () => this.deliverMessage(d, msg));
  }

  private async deliverMessage(d: Delivery, msg: DeliveryMessage): Promise<void> {
    const repo = this.hooks.forAccount(msg.accountId);
    const hook = await repo.get(msg.webhookId);
    const skip = !hook
      ? 'webhook deleted'
      : !hook.isActive
        ? 'webhook inactive'
        : !hook.events.includes(msg.event)
          ? 'no longer subscribed'
          : null;
    if (!hook || skip) {
      metrics.webhookDeliveries.inc({ result: 'skipped' });
      d.ack();
      this.emit('skipped', { webhookId: msg.webhookId, deliveryId: msg.deliveryId, reason: skip ?? 'webhook deleted' });
      return;
    }
    const busy = this.perWebhook.get(hook._id) ?? 0;
    if (busy >= this.opts.endpointConcurrency) {
      // Not an attempt: wait in the short delay queue so this endpoint cannot take every slot.
      await this.park(msg, WEBHOOK_DEFER_MS);
      metrics.webhookDeliveries.inc({ result: 'deferred' });
      d.ack();
      this.emit('deferred', { webhookId: hook._id, deliveryId: msg.deliveryId });
      return;
    }
    this.perWebhook.set(hook._id, busy + 1);
    try {
      await this.attempt(d, msg, hook);
    } finally {
      const n = (this.perWebhook.get(hook._id) ?? 1) - 1;
      if (n <= 0) this.perWebhook.delete(hook._id);
      else this.perWebhook.set(hook._id, n);
    }
  }

  private async attempt(d: Delivery, msg: DeliveryMessage, hook: WebhookDoc): Promise<void> {
    const at = new Date();
    let result: AttemptResult;
    let secret: string | undefined;
    try {
      secret = this.box.open(hook.secret, hook._id);
    } catch {
      this.log.error('webhook signing secret cannot be decrypted; was WEBHOOK_SECRET_KEY changed?', {
        webhookId: hook._id,
        keyId: hook.secret.keyId,
      });
    }
    if (secret === undefined) {
      result = {
        outcome: 'network_error',
        statusCode: null,
        durationMs: 0,
        responseExcerpt: null,
        error: 'the signing secret could not be decrypted on the server',
      };
    } else {
      const payload: WebhookEventPayload = {
        eventId: msg.deliveryId,
        eventVersion: EVENT_VERSION,
        event: msg.event as WebhookEventPayload['event'],
        occurredAt: msg.occurredAt,
        timestamp: at.toISOString(),
        data: msg.data,
      };
      const body = JSON.stringify(payload);
      const span = tracingOn ? deliverySpan(hook, msg) : undefined;
      result = await attemptDelivery(
        hook.url,
        body,
        {
          'content-type': 'application/json',
          'user-agent': 'svc-webhooks/1.0',
          'x-service-event': msg.event,
          'x-service-event-id': msg.deliveryId,
          'x-service-event-version': EVENT_VERSION,
          'x-service-signature': signPayload(secret, body),
        },
        {
          timeoutMs: this.opts.attemptTimeoutMs,
          allowLoopback: this.opts.allowLoopback,
          excerptMax: WEBHOOK_LIMITS.responseExcerptMax,
        },
      );
      if (span) {
        span.setAttribute('svc.webhook.outcome', result.outcome);
        if (result.statusCode !== null) span.setAttribute(ATTR.httpResponseStatusCode, result.statusCode);
        endSpan(
          span,
          undefined,
          result.outcome === 'delivered'
            ? {}
            : { errorType: result.statusCode !== null ? String(result.statusCode) : result.outcome },
        );
      }
    }
    metrics.webhookAttempts.inc({ outcome: result.outcome });
    metrics.webhookAttemptDuration.observe({ outcome: result.outcome }, result.durationMs / 1000);

    const delivered = result.outcome === 'delivered';
    const delay = delivered ? undefined : this.opts.retryDelaysMs[msg.attempt - 1];
    const nextAttemptAt = delay === undefined ? null : new Date(Date.now() + delay);
    await this.deliveries.record({
      accountId: msg.accountId,
      webhookId: hook._id,
      eventId: msg.deliveryId,
      event: msg.event,
      attempt: msg.attempt,
      outcome: delivered ? 'delivered' : 'failed',
      statusCode: result.statusCode,
      durationMs: result.durationMs,
      responseExcerpt: result.responseExcerpt,
      error: result.error ? result.error.slice(0, WEBHOOK_LIMITS.errorMax) : null,
      nextAttemptAt,
      redelivered: d.msg.fields.redelivered,
      at,
    });
    this.emit('attempted', {
      webhookId: hook._id,
      deliveryId: msg.deliveryId,
      attempt: msg.attempt,
      result,
      willRetry: delay !== undefined,
    });
    const log = this.log.child({
      webhookId: hook._id,
      deliveryId: msg.deliveryId,
      event: msg.event,
      attempt: msg.attempt,
    });

    const repo = this.hooks.forAccount(msg.accountId);
    if (delivered) {
      await this.markDelivered(msg.accountId, hook);
      metrics.webhookDeliveries.inc({ result: 'delivered' });
      log.debug('webhook delivered', { statusCode: result.statusCode, durationMs: result.durationMs });
    } else if (delay !== undefined) {
      await this.park({ ...msg, attempt: msg.attempt + 1 }, delay);
      log.info('webhook attempt failed; retry scheduled', {
        outcome: result.outcome,
        statusCode: result.statusCode,
        delayMs: delay,
      });
    } else {
      const { disabled, consecutiveFailures } = await repo.markFailed(hook._id, this.opts.disableAfter);
      metrics.webhookDeliveries.inc({ result: 'failed' });
      log.warn('webhook delivery failed after its retries', {
        outcome: result.outcome,
        statusCode: result.statusCode,
        consecutiveFailures,
      });
      if (disabled) {
        metrics.webhooksDisabled.inc();
        log.warn('webhook disabled after consecutive failed deliveries', { consecutiveFailures });
        this.emit('disabled', { webhookId: hook._id, accountId: msg.accountId });
      }
    }
    d.ack();
  }

  /**
   * End the webhook's failure streak and stamp lastDeliveryAt, coalesced: concurrent updates of
   * one document are slow (FerretDB serialises them), so a healthy webhook stamped within the
   * last few seconds is left alone, and this process writes at most one stamp at a time per
   * webhook (the others await it).
   */
  private async markDelivered(accountId: string, hook: WebhookDoc): Promise<void> {
    const now = Date.now();
    const fresh = (at: number | undefined) => at !== undefined && now - at < LAST_DELIVERY_STAMP_MS;
    if (
      hook.consecutiveFailures === 0 &&
      hook.lastDeliveryStatus === 'delivered' &&
      fresh(hook.lastDeliveryAt?.getTime())
    )
      return;
    const mine = this.stamps.get(hook._id);
    if (mine?.pending !== undefined) return mine.pending;
    if (hook.consecutiveFailures === 0 && fresh(mine?.at)) return;
    const pending = this.hooks
      .forAccount(accountId)
      .markDelivered(hook._id)
      .finally(() => this.stamps.set(hook._id, { at: Date.now() }));
    this.stamps.set(hook._id, { at: mine?.at ?? 0, pending });
    return pending;
  }

  /** Stop taking messages, let attempts in flight finish (bounded; the rest are left to redelivery), then return. Twice is fine. */
  async close(): Promise<void> {
    await this.inFlight.close({
      stop: this.cancels,
      graceMs: this.opts.shutdownGraceMs,
      log: this.log,
      stoppedMessage: 'webhook pool stopped',
    });
  }
}

/** The job an event is about, for the work context of its lines (events of other kinds have none). */
function jobContext(data: unknown): { jobId?: string } {
  const jobId = (data as { jobId?: unknown } | null)?.jobId;
  return typeof jobId === 'string' && jobId.length <= 64 ? { jobId } : {};
}
