import { JOB_ID_PREFIX } from '../../contracts/registry';
import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createCodeBuildsService } from '../../platform/code-builds/code-builds.service';

export function codeBuildsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createCodeBuildsService(rt);
  mount(
    r,
    endpoints.createCodeBuild,
    async ({ auth, body, requestId, charged, idFor }) => {
      const { envelope, charged: amount } = await service.dispatch({
        accountId: auth.account._id,
        requestId,
        request: body,
        jobId: idFor(JOB_ID_PREFIX.code),
      });
      charged(amount);
      return envelope;
    },
    deps,
  );
  return r;
}
