import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router } from 'express';
import { endpoints, type Endpoint } from '../contracts/endpoints';
import { registry } from '../monitoring/metrics';
import { probeHandler } from '../monitoring/server';
import { loadConfig, type Config } from '../platform/config';
import { AppError } from '../platform/errors';
import { createLogger } from '../platform/log';
import { createRuntime, type Runtime } from '../platform/runtime';
import { accountRoutes } from './account/account.routes';
import { assetsRoutes } from './assets/assets.routes';
import { codeBuildsRoutes } from './code-builds/code-builds.routes';
import { imagesRoutes } from './images/images.routes';
import { videosRoutes } from './videos/videos.routes';
import { expressPath, type RouteDeps } from './http/route';
import { jobsRoutes } from './jobs/jobs.routes';
import { presentationsRoutes } from './presentations/presentations.routes';
import { researchRoutes } from './research/research.routes';
import { songsRoutes } from './songs/songs.routes';
import { audit } from './middleware/audit';
import { authenticate } from './middleware/auth';
import { jsonBody } from './middleware/body';
import { errorHandler, notFoundRoute } from './middleware/errors';
import { httpMetrics } from './middleware/http-metrics';
import { createIdempotency } from './middleware/idempotency';
import { rateLimit } from './middleware/rate-limit';
import { requestId } from './middleware/request-id';
import { openapiRoutes } from './openapi/openapi.routes';
import { webhooksRoutes } from './webhooks/webhooks.routes';

export const BASE_PATH = '/api/v1';

/** Every capability's routes, mounted after authentication. Add a capability here. */
const ROUTE_MODULES: ((rt: Runtime, deps: RouteDeps) => Router)[] = [accountRoutes, jobsRoutes, codeBuildsRoutes, imagesRoutes, videosRoutes, songsRoutes, researchRoutes, presentationsRoutes, webhooksRoutes];

/**
 * The Express app. Order: request id → metrics timer → JSON body → public routes →
 * authentication → audit → rate limit → routes → 501 for catalogue endpoints not served yet →
 * 404 → error funnel.
 */
export function createApp(rt: Runtime) {
  const { config, log } = rt;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', false);

  app.use(requestId, httpMetrics);

  // Operational endpoints, outside the versioned API and without a key.
  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/readyz', async (_req, res) => {
    const failures = await probeHandler(rt.probes);
    res.status(failures.length ? 503 : 200).json(failures.length ? { status: 'unavailable', failures } : { status: 'ready' });
  });
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', registry.contentType);
    res.send(await registry.metrics());
  });

  const deps: RouteDeps = {
    idempotency: createIdempotency(rt.db, { ttlHours: config.IDEMPOTENCY_TTL_HOURS, lockMs: config.IDEMPOTENCY_LOCK_MS }),
    implemented: new Set<string>(['getOpenapi']),
  };

  const v1 = Router();
  v1.use(jsonBody(config.BODY_LIMIT_BYTES));
  v1.use(openapiRoutes({ serverUrl: `${config.PUBLIC_BASE_URL}${BASE_PATH}`, implemented: deps.implemented }));
  v1.use(assetsRoutes(rt.blobs));
  // Audit before the rate limit, so refused (429) calls are recorded too; it writes on 'finish'.
  v1.use(authenticate(rt.accounts), audit(rt.db, log), rateLimit(rt.db, { max: config.RATE_LIMIT_MAX, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS }));
  for (const routes of ROUTE_MODULES) v1.use(routes(rt, deps));

  // Every catalogue endpoint this deployment does not serve yet answers 501, after auth.
  for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
    if (deps.implemented.has(id)) continue;
    v1[ep.method](expressPath(ep.path), () => {
      throw new AppError('not_implemented', `${ep.method.toUpperCase()} ${ep.path} is not available in this deployment yet`);
    });
  }
  app.use(BASE_PATH, v1);
  app.use(notFoundRoute);
  app.use(errorHandler(log));
  return app;
}

/** Start the API on config.PORT (0 in tests). `stop()` may be called twice. */
export async function start(config: Config = loadConfig()) {
  const log = createLogger(config.LOG_LEVEL, { service: 'api' });
  const rt = await createRuntime(config, log);
  const server = http.createServer(createApp(rt));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(config.PORT, resolve));
  const port = (server.address() as AddressInfo).port;
  log.info('api listening', { port });
  let stopped: Promise<void> | undefined;
  return {
    port,
    runtime: rt,
    stop(): Promise<void> {
      stopped ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await rt.close();
      })();
      return stopped;
    },
  };
}
export type ApiServer = Awaited<ReturnType<typeof start>>;
