import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createPresentationsService } from '../../platform/presentations/presentations.service';

export function presentationsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createPresentationsService(rt);
  mount(
    r,
    endpoints.createPresentation,
    async ({ auth, body, requestId, charged, idFor }) => {
      const out = await service.create({
        accountId: auth.account._id,
        features: auth.account.features,
        requestId,
        request: body,
        idFor,
      });
      charged(out.charged);
      return out.body;
    },
    deps,
  );
  return r;
}
