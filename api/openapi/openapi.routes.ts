import { Router } from 'express';
import { buildOpenApi } from '../../contracts/openapi';

/** GET /api/v1/openapi without a key. Built once, after every route is mounted. */
export function openapiRoutes(opts: { serverUrl: string; implemented: ReadonlySet<string> }) {
  const r = Router();
  let doc: unknown;
  r.get('/openapi', (_req, res) => {
    doc ??= buildOpenApi(opts);
    res.json(doc);
  });
  return r;
}
