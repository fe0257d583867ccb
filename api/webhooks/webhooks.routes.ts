import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { createDeliveriesRepository } from '../../platform/webhooks/deliveries.repository';
import { createSecretBox } from '../../platform/webhooks/secrets';
import { createWebhooksRepository } from '../../platform/webhooks/webhooks.repository';
import { mount, type RouteDeps } from '../http/route';
import { createWebhooksService } from '../../platform/webhooks/webhooks.service';

export function webhooksRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createWebhooksService({
    webhooks: createWebhooksRepository(rt.store),
    deliveries: createDeliveriesRepository(rt.store),
    box: createSecretBox(rt.config.WEBHOOK_SECRET_KEY),
    allowLoopback: rt.config.ALLOW_LOOPBACK_URLS,
  });
  mount(r, endpoints.listWebhooks, ({ auth, query }) => service.list(auth.account._id, query), deps);
  mount(r, endpoints.createWebhook, ({ auth, body }) => service.create(auth.account._id, body), deps);
  mount(r, endpoints.getWebhook, ({ auth, params }) => service.get(auth.account._id, params.id!), deps);
  mount(
    r,
    endpoints.updateWebhook,
    ({ auth, params, body }) => service.update(auth.account._id, params.id!, body),
    deps,
  );
  mount(
    r,
    endpoints.deleteWebhook,
    async ({ auth, params }) => {
      await service.remove(auth.account._id, params.id!);
      return undefined;
    },
    deps,
  );
  mount(
    r,
    endpoints.listWebhookDeliveries,
    ({ auth, params, query }) => service.deliveries(auth.account._id, params.id!, query),
    deps,
  );
  return r;
}
