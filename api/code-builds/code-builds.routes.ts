import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createCodeBuildsService } from './code-builds.service';

export function codeBuildsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createCodeBuildsService(rt);
  mount(r, endpoints.createCodeBuild, async ({ auth, body, requestId, charged }) => {
    const { envelope, charged: amount } = await service.dispatch({ accountId: auth.account._id, requestId, request: body });
    charged(amount);
    return envelope;
  }, deps);
  return r;
}
