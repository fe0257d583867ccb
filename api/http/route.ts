import type { Request, Response, Router } from 'express';
import type { z } from 'zod';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { AppError } from '../../platform/errors';
import type { Idempotency } from '../middleware/idempotency';
import { locals, type AuthContext } from './context';
import { parseOrThrow } from './validation';

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface HandlerContext<E extends Endpoint> {
  auth: AuthContext;
  body: Infer<E['body']>;
  query: Infer<E['query']>;
  params: Record<string, string>;
  requestId: string;
  /** Record credits charged by this request (audit log). */
  charged(amount: number): void;
  req: Request;
  res: Response;
}

/** A handler returns the success body; `undefined` for 204. Throw AppError for the rest. */
export type Handler<E extends Endpoint> = (ctx: HandlerContext<E>) => Promise<unknown>;

export const expressPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');

/**
 * Mount one catalogue endpoint: scope check, body/query validation with the contract,
 * Idempotency-Key for job POSTs, the success status from the catalogue.
 */
export interface RouteDeps {
  idempotency: Idempotency;
  /** Operation ids this deployment serves; the rest answer 501 and say so in /openapi. */
  implemented: Set<string>;
}

export function mount<E extends Endpoint>(router: Router, ep: E, handler: Handler<E>, deps: RouteDeps) {
  const id = Object.entries(endpoints).find(([, v]) => v === ep)?.[0];
  if (id) deps.implemented.add(id);
  router[ep.method](expressPath(ep.path), async (req, res) => {
    res.locals.route = `${req.baseUrl}${expressPath(ep.path)}`;
    const l = locals(res);
    const auth = l.auth;
    if (!auth) throw new AppError('unauthorized', 'missing API key');
    if (!ep.scopes.some((s) => auth.key.scopes.includes(s))) {
      throw new AppError('forbidden', `this key lacks the scope for ${ep.method.toUpperCase()} ${ep.path}: needs ${ep.scopes.join(' or ')}`);
    }
    const body = ep.body ? parseOrThrow(ep.body, req.body, 'body') : undefined;
    const query = ep.query ? parseOrThrow(ep.query, req.query, 'query') : undefined;
    const ctx: HandlerContext<E> = {
      auth,
      body: body as Infer<E['body']>,
      query: query as Infer<E['query']>,
      params: req.params as Record<string, string>,
      requestId: l.requestId,
      charged: (n) => {
        l.creditsCharged += n;
      },
      req,
      res,
    };
    const send = (status: number, payload: unknown) => (status === 204 ? res.status(204).end() : res.status(status).json(payload));

    const idemKey = ep.idempotent ? req.get('idempotency-key') : undefined;
    if (idemKey === undefined) return send(ep.status, await handler(ctx));

    const start = await deps.idempotency.start(auth.account._id, idemKey, `${ep.method} ${ep.path}`, req.body);
    if (start.kind === 'replay') {
      res.setHeader('Idempotent-Replayed', 'true');
      return send(start.status, start.body);
    }
    let payload: unknown;
    try {
      payload = await handler(ctx);
    } catch (err) {
      await deps.idempotency.abort(start.id);
      throw err;
    }
    await deps.idempotency.finish(start.id, ep.status, payload);
    return send(ep.status, payload);
  });
}
