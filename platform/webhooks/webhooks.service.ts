import type { Webhook, WebhookCreate, WebhookDelivery, WebhookUpdate } from '../../contracts/webhooks';
import { notFound } from '../infra/errors';
import { mapPage, pageWhole } from '../infra/lists';
import type { DeliveriesRepository, DeliveryDoc } from './deliveries.repository';
import { newWebhookSecret, type SecretBox } from './secrets';
import { assertWebhookTarget } from './target';
import type { WebhookDoc, WebhooksRepository } from './webhooks.repository';

export const toWebhook = (d: WebhookDoc): Webhook => ({
  id: d._id,
  name: d.name,
  url: d.url,
  events: d.events as Webhook['events'],
  isActive: d.isActive,
  consecutiveFailures: d.consecutiveFailures,
  disabledAt: d.disabledAt?.toISOString() ?? null,
  disabledReason: d.disabledReason,
  lastDeliveryAt: d.lastDeliveryAt?.toISOString() ?? null,
  lastDeliveryStatus: d.lastDeliveryStatus,
  createdAt: d.createdAt.toISOString(),
  updatedAt: d.updatedAt.toISOString(),
});

export const toDelivery = (d: DeliveryDoc): WebhookDelivery => ({
  id: d._id,
  webhookId: d.webhookId,
  eventId: d.eventId,
  event: d.event,
  attempt: d.attempt,
  outcome: d.outcome,
  statusCode: d.statusCode,
  durationMs: d.durationMs,
  responseExcerpt: d.responseExcerpt,
  error: d.error,
  nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
  redelivered: d.redelivered,
  at: d.at.toISOString(),
});

export interface WebhooksServiceDeps {
  webhooks: WebhooksRepository;
  deliveries: DeliveriesRepository;
  box: SecretBox;
  allowLoopback: boolean;
}

/** /webhooks (SPEC 4.11): validated input in, API shapes out; every call is scoped to one account. */
export function createWebhooksService(deps: WebhooksServiceDeps) {
  const { webhooks, deliveries, box } = deps;
  const target = { allowLoopback: deps.allowLoopback };

  const mustGet = async (accountId: string, id: string) => {
    const doc = await webhooks.forAccount(accountId).get(id);
    if (!doc) throw notFound('webhook');
    return doc;
  };

  return {
    async list(accountId: string, q: { limit?: number; cursor?: string } = {}) {
      // Every webhook of the account (at most WEBHOOK_LIMITS.perAccount), in one page unless `limit` asks for less.
      const all = await webhooks.forAccount(accountId).list();
      return mapPage(pageWhole(all, q, 'webhooks'), toWebhook);
    },

    /** Check the target, store the secret sealed, answer it this once. */
    async create(accountId: string, input: WebhookCreate) {
      await assertWebhookTarget(input.url, target);
      const secret = newWebhookSecret();
      const doc = await webhooks.forAccount(accountId).create({
        name: input.name,
        url: input.url,
        events: [...new Set(input.events)],
        seal: (id) => box.seal(secret, id),
      });
      return { ...toWebhook(doc), secret };
    },

    get: async (accountId: string, id: string) => toWebhook(await mustGet(accountId, id)),

    async update(accountId: string, id: string, patch: WebhookUpdate) {
      await mustGet(accountId, id);
      if (patch.url !== undefined) await assertWebhookTarget(patch.url, target);
      const doc = await webhooks
        .forAccount(accountId)
        .update(id, { ...patch, events: patch.events && [...new Set(patch.events)] });
      if (!doc) throw notFound('webhook');
      return toWebhook(doc);
    },

    async remove(accountId: string, id: string) {
      if (!(await webhooks.forAccount(accountId).remove(id))) throw notFound('webhook');
      await deliveries.forAccount(accountId).removeForWebhook(id);
    },

    async deliveries(accountId: string, id: string, q: { limit?: number; cursor?: string }) {
      await mustGet(accountId, id);
      const page = await deliveries.forAccount(accountId).page(id, { limit: q.limit ?? 20, cursor: q.cursor });
      return mapPage(page, toDelivery);
    },
  };
}
