import { z } from 'zod';
import { EVENT_NAMES, SubscribableEventName, subscriptionProblem } from './events';
import { line, listEnvelope } from './common';

/** SPEC 8 webhook limits. WARNING: public contract. */
export const WEBHOOK_LIMITS = {
  /** Webhooks per account; the 11th is refused with 409 limit_exceeded. */
  perAccount: 10,
  /** Characters of a target URL. */
  urlMax: 2048,
  nameMax: 255,
  /** Characters of a receiver's response body kept in a delivery record. */
  responseExcerptMax: 1024,
  /** Characters of an error text kept in a delivery record. */
  errorMax: 500,
} as const;

const events = z
  .array(SubscribableEventName, { error: 'must be an array of event names' })
  .min(1, { error: 'must name at least one event' })
  .max(100, { error: 'must name at most 100 events' })
  .superRefine((names, ctx) => {
    const problem = subscriptionProblem(names);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    'Event names (SPEC 6.1); at least one. Unknown, upcoming and not-yet-emitted names answer 400 naming each.',
  );

const name = line(WEBHOOK_LIMITS.nameMax)
  .trim()
  .min(1, { error: 'must not be empty' })
  .describe('A label for the webhook.');
const url = line(WEBHOOK_LIMITS.urlMax)
  .min(1, { error: 'must not be empty' })
  .describe(
    'HTTPS endpoint that receives POSTed events. Targets resolving to private, loopback, link-local or metadata addresses are refused, at creation and at every delivery.',
  );

/** SPEC 2.20 create body. */
export const WebhookCreate = z.strictObject({ name, url, events }).meta({ id: 'WebhookCreate' });
export type WebhookCreate = z.output<typeof WebhookCreate>;

/** SPEC 2.20 update body: any of name, url, events, isActive. */
export const WebhookUpdate = z
  .strictObject({
    name: name.optional(),
    url: url.optional(),
    events: events.optional(),
    isActive: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('true re-enables a disabled webhook and resets its failure count; false pauses deliveries.'),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: name, url, events or isActive',
  })
  .meta({ id: 'WebhookUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type WebhookUpdate = z.output<typeof WebhookUpdate>;

/** A webhook as returned. The signing secret is never part of it (only WebhookCreated). */
export const Webhook = z
  .object({
    id: z.string().describe('wh_ followed by a random part.'),
    name: z.string(),
    url: z.string(),
    events: z.array(z.enum(EVENT_NAMES)),
    isActive: z
      .boolean()
      .describe('false while disabled, by PATCH or automatically after consecutive failed deliveries.'),
    consecutiveFailures: z
      .number()
      .int()
      .describe('Failed deliveries in a row (each after its retries); 5 disables the webhook.'),
    disabledAt: z.string().nullable().describe('When the webhook was last disabled, or null while active.'),
    disabledReason: z
      .enum(['consecutive_failures', 'manual'])
      .nullable()
      .describe('Why it is disabled, or null while active.'),
    lastDeliveryAt: z
      .string()
      .nullable()
      .describe(
        'When the last delivery finished (delivered or given up); while deliveries succeed it is refreshed every few seconds, not on each one.',
      ),
    lastDeliveryStatus: z.enum(['delivered', 'failed']).nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Webhook' });
export type Webhook = z.infer<typeof Webhook>;

/** The creation answer: the webhook plus its signing secret, shown this once. */
export const WebhookCreated = Webhook.extend({
  secret: z
    .string()
    .describe(
      'Signing secret (whsec_…), returned once, on creation; never again. X-Service-Signature is sha256=<hex HMAC-SHA256 of the raw body keyed with it>.',
    ),
}).meta({ id: 'WebhookCreated' });

/** One delivery attempt, as logged (SPEC 6.4.5). */
export const WebhookDelivery = z
  .object({
    id: z.string().describe('whd_ followed by a random part.'),
    webhookId: z.string(),
    eventId: z
      .string()
      .describe('The delivery id sent as eventId and X-Service-Event-Id; the same on every attempt of one delivery.'),
    event: z.string(),
    attempt: z.number().int().describe('1 for the first try, then 2 and 3 for the retries.'),
    outcome: z.enum(['delivered', 'failed']).describe('delivered: a 2xx answer.'),
    statusCode: z
      .number()
      .int()
      .nullable()
      .describe("The receiver's HTTP status, or null when none came (timeout, connection error, refused target)."),
    durationMs: z.number().int(),
    responseExcerpt: z
      .string()
      .nullable()
      .describe(`The first ${WEBHOOK_LIMITS.responseExcerptMax} characters of the response body.`),
    error: z.string().nullable().describe('Why the attempt failed, or null.'),
    nextAttemptAt: z.string().nullable().describe('When the next retry is due, or null when none follows.'),
    redelivered: z.boolean().describe('true when the attempt ran again because a worker stopped in the middle of it.'),
    at: z.string().describe('When the attempt started.'),
  })
  .meta({ id: 'WebhookDelivery' });
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookList = listEnvelope(Webhook).meta({ id: 'WebhookList' });
export const WebhookDeliveryList = listEnvelope(WebhookDelivery).meta({ id: 'WebhookDeliveryList' });

/** GET /webhooks/{id}/deliveries query. */
export const WebhookDeliveriesQuery = z.object({
  limit: z.coerce
    .number({ error: 'must be an integer between 1 and 100' })
    .int({ error: 'must be an integer between 1 and 100' })
    .min(1, { error: 'must be between 1 and 100' })
    .max(100, { error: 'must be between 1 and 100' })
    .optional()
    .describe('Page size, 1 to 100; default 20.'),
  cursor: z
    .string()
    .max(512, { error: 'must be at most 512 characters' })
    .optional()
    .describe('Opaque: pass back the cursor of the previous page verbatim.'),
});

/**
 * The POST body of a delivery (SPEC 6.2). Signed as sent: X-Service-Signature is computed over
 * these exact bytes. WARNING: public contract; add fields only.
 */
export const WebhookEventPayload = z
  .object({
    eventId: z
      .string()
      .describe('UUID, unique per delivery (the same on its retries); also X-Service-Event-Id. Deduplicate on it.'),
    eventVersion: z.string().describe('Payload schema version, a date string; also X-Service-Event-Version.'),
    event: z.enum(EVENT_NAMES),
    occurredAt: z.string().describe('ISO 8601 UTC: when the event happened.'),
    timestamp: z.string().describe('ISO 8601 UTC: when this attempt was sent.'),
    data: z
      .record(z.string(), z.unknown())
      .describe('For job events: jobId, status, pollUrl (absolute), plus extras such as error on failures.'),
  })
  .meta({ id: 'WebhookEventPayload' });
export type WebhookEventPayload = z.infer<typeof WebhookEventPayload>;
