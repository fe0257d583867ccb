import type { Request, Response, Router } from 'express';
import type { z } from 'zod';
import { PATH_ID_RULE_TEXT, PathId } from '../../contracts/common';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { AppError, databaseUnavailable } from '../../platform/infra/errors';
import { faultPoint } from '../../platform/infra/faults';
import { newId, stableId } from '../../platform/infra/ids';
import type { Idempotency } from '../../platform/idempotency/idempotency.repository';
import type { JobCache } from '../../platform/jobs/job-cache';
import type { JobWatch } from '../jobs/job-watch';
import { locals, type AuthContext } from './context';
import { parseOrThrow } from '../../platform/infra/validation';

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface HandlerContext<E extends Endpoint> {
  auth: AuthContext;
  body: Infer<E['body']>;
  query: Infer<E['query']>;
  params: Record<string, string>;
  requestId: string;
  /** Record millicredits charged by this request (audit log). */
  charged(millicredits: number): void;
  /**
   * An id for what this request creates: derived from its Idempotency-Key record when the
   * request carries a key, so a retry after a crash names the same job and finds it; random
   * otherwise (and for a new request after the key's record expired).
   */
  idFor(prefix: string): string;
  /**
   * The version named by an `If-Match: "<version>"` header (optimistic concurrency, see
   * platform/infra/versioned.ts); undefined without the header or with `If-Match: *`.
   */
  ifMatch: number | undefined;
  req: Request;
  res: Response;
}

/** A handler returns the success body; `undefined` for 204. Throw AppError for the rest. */
export type Handler<E extends Endpoint> = (ctx: HandlerContext<E>) => Promise<unknown>;

/** `"3"`, `W/"3"` or `3`: the ETag this service sends for version 3. */
const IF_MATCH = /^(?:W\/)?"?([1-9][0-9]{0,14})"?$/;

/** The version an If-Match header names; 400 when it is not an ETag of this service. */
export function parseIfMatch(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const v = raw.trim();
  if (v === '*') return undefined;
  const m = IF_MATCH.exec(v);
  if (!m) throw new AppError('validation_error', 'If-Match: must be the ETag of the resource as returned, e.g. "3"');
  return Number(m[1]);
}

/** A success body that carries a numeric `version` also carries it as `ETag: "<version>"`. */
const etagOf = (payload: unknown): string | undefined => {
  const v = payload && typeof payload === 'object' ? (payload as { version?: unknown }).version : undefined;
  return typeof v === 'number' && Number.isInteger(v) ? `"${v}"` : undefined;
};

/** Idempotency-Key values: 1 to 255 visible ASCII characters (no spaces, no control characters). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export const expressPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');
/** Names of the `{param}` placeholders of a catalogue path. */
const pathParams = (p: string) => [...p.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/**
 * Mount one catalogue endpoint: scope check, path ids checked with the shared PathId rule (400
 * validation_error naming the parameter when malformed; a well-formed id that names nothing is
 * the handler's 404), body/query validation with the contract, Idempotency-Key for job POSTs,
 * the success status from the catalogue.
 */
export interface RouteDeps {
  idempotency: Idempotency;
  /** In-flight jobs of GET /jobs/{id} (platform/jobs/job-cache.ts). */
  jobCache: JobCache;
  /** Clients waiting for job changes (api/jobs/job-watch.ts), and the heartbeat of their streams. */
  jobWatch: JobWatch;
  jobEventsHeartbeatMs: number;
  /** Operation ids this deployment serves; the rest answer 501 and say so in /openapi. */
  implemented: Set<string>;
  /**
   * Reads the JSON body into req.body (api/middleware/body.ts lazyJsonBody): run after the scope
   * check, so 401 and 403 come before any 4xx about the body. Without it req.body is taken as is.
   */
  readBody?: (req: Request, res: Response) => Promise<void>;
}

/**
 * The `Location` of a 201 or 202 answer, a path under the API base path (SPEC §2.1, RFC 9110
 * §10.2.2): the endpoint's own `location`; else a job envelope's `/jobs/{jobId}`; else the
 * catalogue path one `/{param}` below the endpoint's (any method) with the answer's `id`.
 */
export function locationOf(ep: Endpoint, created: unknown, params: Record<string, string>): string | undefined {
  const c = (created && typeof created === 'object' ? created : {}) as Record<string, unknown>;
  if (ep.location) return ep.location(c, params);
  if (typeof c.jobId === 'string') return `/jobs/${encodeURIComponent(c.jobId)}`;
  if (typeof c.id !== 'string') return undefined;
  const below = (Object.values(endpoints) as Endpoint[]).find(
    (o) => o.path.startsWith(`${ep.path}/{`) && /^\/\{\w+\}$/.test(o.path.slice(ep.path.length)),
  );
  if (!below) return undefined;
  const id = c.id;
  return below.path.replace(/\{(\w+)\}/g, (_m, name: string, offset: number) =>
    encodeURIComponent(offset >= ep.path.length ? id : (params[name] ?? '')),
  );
}

/**
 * A request that sent If-Match and lost to a newer version answers 412 precondition_failed, not
 * 409: the precondition it set is what failed (RFC 9110 §13.1.1). Without If-Match it stays 409.
 */
const preconditionFailed = (err: unknown, ifMatch: number | undefined): unknown =>
  ifMatch !== undefined && err instanceof AppError && err.code === 'version_conflict'
    ? new AppError('precondition_failed', err.message, { cause: err })
    : err;

export function mount<E extends Endpoint>(router: Router, ep: E, handler: Handler<E>, deps: RouteDeps) {
  const id = Object.entries(endpoints).find(([, v]) => v === ep)?.[0];
  if (id) deps.implemented.add(id);
  router[ep.method](expressPath(ep.path), async (req, res) => {
    res.locals.route = `${req.baseUrl}${expressPath(ep.path)}`;
    const l = locals(res);
    if (l.databaseDown) throw databaseUnavailable();
    const auth = l.auth;
    if (!auth) throw new AppError('unauthorized', 'missing API key');
    if (!ep.scopes.some((s) => auth.key.scopes.includes(s))) {
      throw new AppError(
        'forbidden',
        `this key lacks the scope for ${ep.method.toUpperCase()} ${ep.path}: needs ${ep.scopes.join(' or ')}`,
      );
    }
    for (const name of pathParams(ep.path)) {
      if (!PathId.safeParse(req.params[name]).success) {
        throw new AppError('validation_error', `${name}: ${PATH_ID_RULE_TEXT}`, {
          details: [{ path: name, code: 'invalid_format', message: PATH_ID_RULE_TEXT }],
        });
      }
    }
    // Only now the body (415, 413, 400 invalid_json): after the key (401) and the scope (403).
    if (deps.readBody) await deps.readBody(req, res);
    // A request with no body at all (no Content-Type either) counts as `{}` for a body whose every
    // field is optional (POST /boards/{id}/duplicate, POST /templates/{id}/use); a JSON body that
    // is empty or not an object is still 400.
    const sentNothing = req.body === undefined && req.get('content-type') === undefined;
    const body = ep.body
      ? parseOrThrow(ep.body, sentNothing && ep.body.safeParse({}).success ? {} : req.body, 'body')
      : undefined;
    const idemKey = ep.idempotent ? req.get('idempotency-key') : undefined;
    let idemSeed: string | undefined;
    if (idemKey !== undefined && !IDEMPOTENCY_KEY.test(idemKey)) {
      throw new AppError('validation_error', 'Idempotency-Key: must be 1 to 255 visible ASCII characters');
    }
    const query = ep.query ? parseOrThrow(ep.query, req.query, 'query') : undefined;
    const ifMatch = parseIfMatch(req.get('if-match'));
    const ctx: HandlerContext<E> = {
      auth,
      body: body as Infer<E['body']>,
      query: query as Infer<E['query']>,
      params: req.params as Record<string, string>,
      requestId: l.requestId,
      charged: (n) => {
        l.millicreditsCharged += n;
      },
      idFor: (prefix) => (idemSeed === undefined ? newId(prefix) : stableId(prefix, idemSeed)),
      ifMatch,
      req,
      res,
    };
    const send = (status: number, payload: unknown) => {
      // A handler that answered itself (a stream: POST /chat) has nothing more to send.
      if (res.headersSent) return;
      if (status === 204) return res.status(204).end();
      const etag = etagOf(payload);
      if (etag) res.setHeader('ETag', etag);
      if (status === 201 || status === 202) {
        const location = locationOf(ep, payload, req.params as Record<string, string>);
        if (location) res.setHeader('Location', `${req.baseUrl}${location}`);
      }
      return res.status(status).json(payload);
    };

    const run = async () => {
      try {
        return await handler(ctx);
      } catch (err) {
        throw preconditionFailed(err, ifMatch);
      }
    };
    if (idemKey === undefined) return send(ep.status, await run());

    // The validated body is hashed (bounded, known fields only), not the raw one.
    const start = await deps.idempotency
      .forAccount(auth.account._id)
      .start(idemKey, `${ep.method} ${ep.path}`, body ?? null);
    if (start.kind === 'replay') {
      res.setHeader('Idempotent-Replayed', 'true');
      return send(start.status, start.body);
    }
    idemSeed = start.seed;
    let payload: unknown;
    try {
      payload = await run();
    } catch (err) {
      await deps.idempotency.abort(start.id);
      throw err;
    }
    faultPoint('idempotency.before-finish');
    await deps.idempotency.finish(start.id, ep.status, payload);
    return send(ep.status, payload);
  });
}
