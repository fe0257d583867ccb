import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { toUnits } from '../../platform/credits/credits';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createImagesService } from '../../platform/images/images.service';

export function imagesRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createImagesService(rt);
  mount(
    r,
    endpoints.createImage,
    async ({ auth, body, requestId, charged }) => {
      const result = await service.render({ account: auth.account, requestId, request: body });
      charged(toUnits(result.charged));
      return result;
    },
    deps,
  );
  mount(
    r,
    endpoints.createMoonlightImage,
    async ({ auth, body, requestId, charged }) => {
      const out = await service.moonlight({ account: auth.account, requestId, request: body });
      charged(out.charged);
      return out.result;
    },
    deps,
  );
  return r;
}
