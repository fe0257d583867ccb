import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { JOB_ID_PREFIX } from '../../contracts/registry';
import type { Runtime } from '../../platform/runtime';
import { createSpacesService } from '../../platform/spaces/spaces.service';
import { mount, type RouteDeps } from '../http/route';

export function spacesRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createSpacesService(rt);
  mount(
    r,
    endpoints.createSpace,
    async ({ auth, body, requestId, charged, idFor }) => {
      const { envelope, charged: amount } = await service.dispatch({
        account: auth.account,
        requestId,
        request: body,
        jobId: idFor(JOB_ID_PREFIX.space),
      });
      charged(amount);
      return envelope;
    },
    deps,
  );
  return r;
}
