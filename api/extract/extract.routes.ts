import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { toUnits } from '../../platform/credits/credits';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createExtractService } from '../../platform/extract/extract.service';

/** Routes of POST /extract-flowchart (SPEC 4.7). */
export function extractRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createExtractService(rt);
  mount(
    r,
    endpoints.extractFlowchart,
    async ({ auth, body, requestId, idFor, charged, req }) => {
      const result = await service.extract({
        accountId: auth.account._id,
        requestId,
        request: body,
        idFor,
        retry: req.get('idempotency-key') !== undefined,
      });
      charged(toUnits(result.charged));
      return result;
    },
    deps,
  );
  return r;
}
