import { JOB_ID_PREFIX } from '../../contracts/registry';
import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createVideosService } from '../../platform/videos/videos.service';

export function videosRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createVideosService(rt);
  mount(
    r,
    endpoints.createVideo,
    async ({ auth, body, requestId, charged, idFor }) => {
      const { envelope, charged: amount } = await service.dispatch({
        account: auth.account,
        requestId,
        request: body,
        jobId: idFor(JOB_ID_PREFIX.video),
      });
      charged(amount);
      return envelope;
    },
    deps,
  );
  return r;
}
