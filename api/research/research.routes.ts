import { JOB_ID_PREFIX } from '../../contracts/registry';
import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createResearchService } from '../../platform/research/research.service';

export function researchRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createResearchService(rt);
  mount(
    r,
    endpoints.createResearch,
    async ({ auth, body, requestId, charged, idFor }) => {
      const { envelope, charged: amount } = await service.dispatch({
        accountId: auth.account._id,
        requestId,
        request: body,
        key: auth.key,
        jobId: idFor(JOB_ID_PREFIX.research),
      });
      charged(amount);
      return envelope;
    },
    deps,
  );
  mount(r, endpoints.getResearch, ({ auth, params }) => service.legacy(auth.account._id, params.jobId ?? ''), deps);
  return r;
}
