import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { toUnits } from '../../platform/credits/credits';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createSheetsService, type Caller } from '../../platform/sheets/sheets.service';

/** Routes of sheets (SPEC 4.4). */
export function sheetsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createSheetsService(rt);
  const caller = (auth: { account: { _id: string }; key: { _id: string } }): Caller => ({
    accountId: auth.account._id,
    keyId: auth.key._id,
  });

  mount(r, endpoints.listSheets, ({ auth, query }) => service.list(auth.account._id, query), deps);
  mount(
    r,
    endpoints.createSheet,
    ({ auth, body, idFor }) =>
      service.create({ accountId: auth.account._id, authorKeyId: auth.key._id, ...body, rows: body.rows ?? [], idFor }),
    deps,
  );
  mount(r, endpoints.getSheet, ({ auth, params, query }) => service.get(auth.account._id, params.id!, query), deps);
  mount(
    r,
    endpoints.getSheetRange,
    ({ auth, params, query }) => service.range(auth.account._id, params.id!, query.range),
    deps,
  );
  mount(
    r,
    endpoints.applySheetOps,
    ({ auth, params, body, req, ifMatch }) =>
      service.applyOps(caller(auth), params.id!, body, (req.body as { ops: unknown[] }).ops, ifMatch),
    deps,
  );
  mount(
    r,
    endpoints.editSheet,
    async ({ auth, params, body, requestId, charged, ifMatch }) => {
      const out = await service.edit(caller(auth), params.id!, requestId, body, ifMatch);
      charged(toUnits(out.charged));
      return out;
    },
    deps,
  );
  mount(
    r,
    endpoints.listSheetCommits,
    ({ auth, params, query }) => service.listCommits(auth.account._id, params.id!, query),
    deps,
  );
  mount(
    r,
    endpoints.getSheetCommit,
    ({ auth, params }) => service.getCommit(auth.account._id, params.id!, params.commitId!),
    deps,
  );
  mount(
    r,
    endpoints.resolveSheetCommit,
    ({ auth, params, body, ifMatch }) =>
      service.resolve(caller(auth), params.id!, params.commitId!, body.action, ifMatch),
    deps,
  );
  mount(
    r,
    endpoints.rollbackSheet,
    ({ auth, params, body, ifMatch }) => service.rollback(caller(auth), params.id!, body, ifMatch),
    deps,
  );
  return r;
}
