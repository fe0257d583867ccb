import { spacesRoutes } from './spaces/spaces.routes';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router } from 'express';
import { endpoints, type Endpoint } from '../contracts/endpoints';
import { registry } from '../monitoring/metrics';
import { probeHandler, READY_RETRY_AFTER_S } from '../monitoring/server';
import { loadConfig, type Config } from '../platform/infra/config';
import { AppError, databaseUnavailable } from '../platform/infra/errors';
import { serviceLogger } from '../platform/infra/log';
import { createRuntime, type Runtime } from '../platform/runtime';
import { createAuditRecorder } from '../platform/audit/audit.recorder';
import { createAuditWriter } from '../platform/audit/audit.writer';
import {
  AuthInvalidationSchema,
  createAuthCache,
  type AuthCache,
  type AuthInvalidation,
} from '../platform/accounts/accounts';
import { broker } from '../contracts/registry';
import { createJobWatch, type JobWatch } from './jobs/job-watch';
import { createJobCache, JobChangeSchema, type JobCache } from '../platform/jobs/job-cache';
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
import { lazyJsonBody } from './middleware/body';
import { databaseGate } from './middleware/database';
import { clientErrorHandler, errorHandler, notFoundRoute } from './middleware/errors';
import { httpAccess } from './middleware/http-access';
import { traceRequest } from './middleware/trace';
import { startupReport, startupStep } from '../platform/infra/startup';
import { tracingOn } from '../platform/infra/tracing';
import { joinSupervisor, joinsSupervisor, type Supervised } from './supervised';
import { createIdempotency, type Idempotency } from '../platform/idempotency/idempotency.repository';
import { rateLimit } from './middleware/rate-limit';
import { createRateLimiter } from '../platform/rate-limits/rate-limits.repository';
import { requestId } from './middleware/request-id';
import { openapiRoutes } from './openapi/openapi.routes';
import { webhooksRoutes } from './webhooks/webhooks.routes';
import { projectsRoutes } from './projects/projects.routes';
import { sheetsRoutes } from './sheets/sheets.routes';
import { boardsRoutes } from './boards/boards.routes';
import { conversationsRoutes } from './conversations/conversations.routes';
import { extractRoutes } from './extract/extract.routes';
import { DRIVE_LIMITS } from '../contracts/drive';
import { driveRoutes } from './drive/drive.routes';
import { driveContentRoutes } from './drive/content.routes';
import { driveSearchRoutes } from './drive/search.routes';
import { driveDownloadRoutes } from './drive/downloads.routes';
import { chatRoutes } from './chat/chat.routes';
import { agentsRoutes } from './agents/agents.routes';
import { speechRoutes } from './speech/speech.routes';
import { liveRoutes } from './live/live.routes';
import { attachRealtime } from './live/realtime';
import { personasRoutes } from './personas/personas.routes';
import { personasPublicRoutes } from './personas/public.routes';
import { mcpRoutes } from './mcp/mcp.routes';
import { consoleRoutes } from './console/console.routes';

export const BASE_PATH = '/api/v1';

/** This process's own metrics, as Prometheus text. */
export const ownMetrics = async () => ({ text: await registry.metrics(), contentType: registry.contentType });

/** Every capability's routes, mounted after authentication. Add a capability here. */
const ROUTE_MODULES: ((rt: Runtime, deps: RouteDeps) => Router)[] = [
  accountRoutes,
  jobsRoutes,
  codeBuildsRoutes,
  imagesRoutes,
  videosRoutes,
  songsRoutes,
  researchRoutes,
  presentationsRoutes,
  webhooksRoutes,
  projectsRoutes,
  sheetsRoutes,
  boardsRoutes,
  conversationsRoutes,
  extractRoutes,
  driveRoutes,
  driveContentRoutes,
  driveSearchRoutes,
  chatRoutes,
  agentsRoutes,
  speechRoutes,
  liveRoutes,
  personasRoutes,
  spacesRoutes,
];

/**
 * The Express app. Order: trace span (when tracing is on) → request id → metrics timer → public routes →
 * authentication → audit → rate limit → routes (scope check, then the JSON body: api/http/route.ts) →
 * 501 for catalogue endpoints not served yet → 404 → error funnel. So 401 comes before 403, and
 * both before any 4xx about the body (SPEC §5.4).
 */
export function createApp(
  rt: Runtime,
  parts: {
    authCache: AuthCache;
    idempotency: Idempotency;
    jobCache: JobCache;
    jobWatch: JobWatch;
    metrics?: () => Promise<{ text: string; contentType: string }>;
  },
) {
  const { authCache } = parts;
  const { config, log } = rt;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', false);

  // The request's trace span first (while tracing is on), so everything after runs inside it.
  if (tracingOn) app.use(traceRequest);
  app.use(requestId, httpAccess(log));

  // Operational endpoints, outside the versioned API and without a key.
  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/readyz', async (_req, res) => {
    const failures = await probeHandler(rt.probes);
    if (failures.length) res.setHeader('Retry-After', String(READY_RETRY_AFTER_S));
    res
      .status(failures.length ? 503 : 200)
      .json(failures.length ? { status: 'unavailable', failures } : { status: 'ready' });
  });
  // Metrics are served on METRICS_PORT (api/main.ts, or the supervisor); on this port only when
  // METRICS_ON_API_PORT (the tests' stack): else GET /metrics is a 404 like any unknown path.
  // Under the supervisor, every API process's metrics (gathered over IPC); else this process's.
  if (config.METRICS_ON_API_PORT) {
    app.get('/metrics', async (_req, res) => {
      const { text, contentType } = parts.metrics ? await parts.metrics() : await ownMetrics();
      res.setHeader('Content-Type', contentType);
      res.send(text);
    });
  }

  const deps: RouteDeps = {
    idempotency: parts.idempotency,
    jobCache: parts.jobCache,
    jobWatch: parts.jobWatch,
    jobEventsHeartbeatMs: config.JOB_EVENTS_HEARTBEAT_MS,
    implemented: new Set<string>(['getOpenapi']),
    // Read by each route after the scope check (api/http/route.ts mount), not before authentication.
    readBody: lazyJsonBody(config.BODY_LIMIT_BYTES, [
      { method: 'POST', path: '/drive/files', limitBytes: DRIVE_LIMITS.createBodyBytesMax },
    ]),
  };

  // Audit before the rate limit, so refused (429) calls are recorded too; the entry is inserted
  // (group commit) before the answer goes out, or queued to the audit writer when the database is away.
  const auditRecorder = createAuditRecorder({
    store: rt.store,
    health: rt.dbHealth,
    amqp: rt.amqp,
    log,
    prefix: config.QUEUE_PREFIX,
  });
  // One limiter for REST and MCP: each instance leases its own share of a key's window.
  const limiter = rateLimit(
    createRateLimiter(rt.store, { max: config.RATE_LIMIT_MAX, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS }),
  );

  // Outside the versioned API: the MCP server (svc_ keys) and the developer console (its own sessions).
  app.use(
    '/mcp',
    databaseGate(rt.dbHealth),
    mcpRoutes(rt, { authCache, audit: auditRecorder, rateLimit: limiter, idempotency: parts.idempotency }),
  );
  app.use('/console', consoleRoutes(rt, { audit: auditRecorder }));

  const v1 = Router();
  v1.use(openapiRoutes({ serverUrl: `${config.PUBLIC_BASE_URL}${BASE_PATH}`, implemented: deps.implemented }));
  v1.use(assetsRoutes(rt.blobs));
  v1.use(driveDownloadRoutes(rt));
  v1.use(personasPublicRoutes());
  // While the database is away, authenticated calls answer 503 at once from their route (audited).
  v1.use(authenticate(authCache), audit(auditRecorder), databaseGate(rt.dbHealth, { inRoute: true }), limiter);
  for (const routes of ROUTE_MODULES) v1.use(routes(rt, deps));

  // Every catalogue endpoint this deployment does not serve yet answers 501, after auth.
  for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
    if (deps.implemented.has(id)) continue;
    v1[ep.method](expressPath(ep.path), () => {
      throw new AppError(
        'not_implemented',
        `${ep.method.toUpperCase()} ${ep.path} is not available in this deployment yet`,
      );
    });
  }
  app.use(BASE_PATH, v1);
  app.use(notFoundRoute);
  app.use(errorHandler(log));
  return app;
}

/** Start the API on config.PORT (0 in tests). `stop()` may be called twice. */
export async function start(config: Config = loadConfig()) {
  const log = serviceLogger(config, 'api');
  const rt = await createRuntime(config, log);
  // Every API process drains the audit queue into audit_log in batches.
  const auditWriter = createAuditWriter({
    store: rt.store,
    health: rt.dbHealth,
    amqp: rt.amqp,
    log: log.child({ component: 'audit' }),
    prefix: config.QUEUE_PREFIX,
  });
  // Keys and accounts cached per process, kept true by the invalidation fanout.
  // A key not in the cache while the database is away: 503 at once, not a wait for the driver.
  const authCache = createAuthCache(
    (presented) => (rt.dbHealth.up ? rt.accounts.authenticate(presented) : Promise.reject(databaseUnavailable())),
    { ttlMs: config.AUTH_CACHE_TTL_MS },
  );
  // In-flight jobs cached for GET /jobs/{id}, kept true by the job-changes fanout (this process's
  // own changes come back over it too).
  const jobCache = createJobCache({
    maxEntries: config.JOB_CACHE_ENTRIES,
    ttlMs: config.JOB_CACHE_TTL_MS,
    finishedMaxBytes: config.JOB_CACHE_FINISHED_BYTES,
  });
  // Clients waiting for a job to change (GET /jobs/{id}/events, Prefer: wait), woken by the same fanout.
  const jobWatch = createJobWatch({ maxWatchers: config.JOB_EVENT_STREAMS_MAX });
  // The three consumers side by side (each its own channel).
  const [, unsubscribe, unsubscribeJobs] = await startupStep('consumers', () =>
    Promise.all([
      auditWriter.start(),
      rt.amqp.subscribe(
        broker.authExchange(config.QUEUE_PREFIX),
        (msg) => {
          const parsed = AuthInvalidationSchema.safeParse(msg);
          if (parsed.success) authCache.invalidate(parsed.data);
          else authCache.ready(); // unreadable: forget everything, to be safe
        },
        { onReady: () => authCache.ready(), onLost: () => authCache.lost() },
      ),
      rt.amqp.subscribe(
        broker.jobChangesExchange(config.QUEUE_PREFIX),
        (msg) => {
          const parsed = JobChangeSchema.safeParse(msg);
          if (parsed.success) {
            jobCache.invalidate(parsed.data);
            jobWatch.changed(parsed.data.jobId);
          } else {
            jobCache.clear(); // unreadable: it may have named any job
            jobWatch.changedAll();
          }
        },
        {
          onReady: () => {
            jobCache.ready();
            jobWatch.changedAll();
          },
          onLost: () => {
            jobCache.lost();
            jobWatch.changedAll();
          },
        },
      ),
    ]),
  );
  const onLocalChange = (msg: AuthInvalidation) => authCache.invalidate(msg);
  rt.authChanges.on('change', onLocalChange);
  const idempotency = createIdempotency(rt.store, {
    ttlHours: config.IDEMPOTENCY_TTL_HOURS,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
  });
  let supervised: Supervised | undefined;
  const metrics = () => supervised!.metrics();
  const app = await startupStep('routes', async () =>
    createApp(rt, { authCache, idempotency, jobCache, jobWatch, metrics: joinsSupervisor() ? metrics : undefined }),
  );
  // Slow or stalled requests are answered 408 (clientErrorHandler) and their sockets destroyed; the
  // timeouts are checked a few times per headers timeout.
  const server = http.createServer(
    {
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: 300_000,
      connectionsCheckingInterval: Math.min(30_000, Math.ceil(config.HTTP_HEADERS_TIMEOUT_MS / 4)),
    },
    app,
  );
  server.keepAliveTimeout = 65_000;
  // What Node's HTTP parser refuses (raw non-ASCII in the path, headers over 16 KiB) still gets the Error shape.
  server.on('clientError', clientErrorHandler(log));
  // The realtime engine (WebSocket at /realtime) shares the API's port.
  const realtime = attachRealtime(server, rt);
  // Run by the supervisor: it owns the port and hands over the connections. Else listen.
  supervised = joinSupervisor(server, log);
  if (!supervised)
    await startupStep('listen', () => new Promise<void>((resolve) => server.listen(config.PORT, resolve)));
  const port = supervised ? config.PORT : (server.address() as AddressInfo).port;
  supervised?.ready();
  log.info('api ready', { port, handoff: !!supervised, startupMs: startupReport() });
  let stopped: Promise<void> | undefined;
  return {
    port,
    runtime: rt,
    realtime,
    stop(): Promise<void> {
      stopped ??= (async () => {
        // Handed connections: no listening socket to close; drain those the supervisor gave us.
        // Job streams end and waits answer now (their clients resume elsewhere); once they have,
        // a turn later, their connections are idle and close with the rest.
        await jobWatch.close();
        await new Promise((resolve) => setImmediate(resolve));
        const draining = supervised?.drain(config.SHUTDOWN_GRACE_MS);
        await realtime.close();
        await Promise.all([
          draining,
          supervised
            ? undefined
            : new Promise<void>((resolve) => {
                server.close(() => resolve());
                server.closeIdleConnections();
              }),
        ]);
        await auditWriter.stop(); // writes what it holds
        idempotency.close();
        rt.authChanges.off('change', onLocalChange);
        await unsubscribe();
        await unsubscribeJobs();
        await rt.close();
      })();
      return stopped;
    },
  };
}
export type ApiServer = Awaited<ReturnType<typeof start>>;
