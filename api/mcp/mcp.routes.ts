import { Router, type ErrorRequestHandler, type RequestHandler, type Response } from 'express';
import type { AuthCache } from '../../platform/accounts/accounts';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import { AppError, boundedMessage } from '../../platform/infra/errors';
import { funnelError } from '../../platform/infra/error-funnel';
import { newId } from '../../platform/infra/ids';
import type { Runtime } from '../../platform/runtime';
import { locals } from '../http/context';
import { authenticate } from '../middleware/auth';
import { jsonBody } from '../middleware/body';
import { DEFAULT_RETRY_AFTER_SECONDS } from '../middleware/errors';
import type { Idempotency } from '../../platform/idempotency/idempotency.repository';
import { argNamesOf, MCP_AUDIT_ROUTE } from './mcp.audit';
import { createMcpTools } from './mcp.tools';

/** What the MCP server shares with the REST API of this process. */
export interface McpParts {
  authCache: AuthCache;
  audit: AuditRecorder;
  /** The REST API's Idempotency-Key records (the `idempotencyKey` argument of tools that create). */
  idempotency: Idempotency;
  /**
   * The REST API's rate-limit middleware, the same instance: one limiter per process leases one
   * share of a key's window, so REST and MCP calls spend one counter and report one
   * X-RateLimit-Remaining sequence.
   */
  rateLimit: RequestHandler;
}

/** JSON-RPC error code for HTTP-level refusals (the range -32000..-32099 is the server's own). */
const HTTP_REFUSED = -32000;
/** JSON-RPC 2.0's own codes (the SDK's ErrorCode.ParseError and InvalidRequest). */
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;

/**
 * The SDK (its zod protocol schemas, ajv) takes longer to load than the rest of the API: it is
 * loaded by the first MCP request, not at start.
 */
let sdk:
  | Promise<[typeof import('./mcp.server'), typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js')]>
  | undefined;
const loadSdk = () =>
  (sdk ??= Promise.all([import('./mcp.server'), import('@modelcontextprotocol/sdk/server/streamableHttp.js')]));

/**
 * Answer an HTTP-level refusal as a JSON-RPC error (what MCP clients parse), carrying the REST
 * API's Error shape in `error.data` (what our other clients parse). A 401 says how to
 * authenticate (RFC 6750 WWW-Authenticate).
 */
function sendRefusal(res: Response, status: number, err: AppError, rpcCode: number = HTTP_REFUSED): void {
  const { requestId } = locals(res);
  const message = boundedMessage(err.message);
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  // Every 503 and 504 says when to come back, as on /api/v1 (api/middleware/errors.ts).
  if ((status === 503 || status === 504) && !res.hasHeader('retry-after'))
    res.setHeader('Retry-After', String(DEFAULT_RETRY_AFTER_SECONDS));
  // RFC 6750 3.1: no error attribute when no credentials were sent.
  if (status === 401)
    res.setHeader(
      'WWW-Authenticate',
      err.message.startsWith('missing') ? 'Bearer realm="mcp"' : 'Bearer realm="mcp", error="invalid_token"',
    );
  res.status(status).json({
    jsonrpc: '2.0',
    id: null,
    error: { code: rpcCode, message, data: { code: err.code, message, requestId } },
  });
}

/** Thrown for a JSON array body: answered 400 with JSON-RPC Invalid Request (-32600). */
class BatchRefused extends AppError {
  constructor() {
    super('bad_request', 'JSON-RPC batches are not supported: send one message per POST');
  }
}

/**
 * Refuse JSON-RPC batches, before the rate limit. The SDK transport would run every message of an
 * array while the limiter counts the POST once, so a batch would multiply a key's budget. The
 * 2025-06-18 MCP revision dropped batching and the SDK client never sends one: one message per POST.
 * Any array is refused, empty or of one message alike, so there is one rule to document.
 */
const refuseBatch: RequestHandler = (req, _res, next) => next(Array.isArray(req.body) ? new BatchRefused() : undefined);

/** The single tools/call of a body, if it is one: for the audit entry of a refused request. */
const toolCallOf = (body: unknown): { name: string; args: unknown } | undefined => {
  const b = body as { method?: unknown; params?: { name?: unknown; arguments?: unknown } } | undefined;
  return b?.method === 'tools/call' && typeof b.params?.name === 'string'
    ? { name: b.params.name, args: b.params.arguments }
    : undefined;
};

/**
 * The Model Context Protocol server (Streamable HTTP transport), mounted at /mcp.
 *
 * Stateless: every POST gets a new SDK server and transport, built for the key that sent it, and
 * answers with JSON (no SSE stream is kept open). Nothing lives in this process between requests,
 * so any API process can serve any request (no sticky sessions, no session map to lose when a
 * process restarts), and a key revoked between two calls is refused on the next one. Without
 * sessions there is nothing to resume (GET) or terminate (DELETE): both answer 405, as the
 * transport specification allows.
 *
 * Order: authentication (the REST API's middleware and auth cache) → JSON body (the API's size,
 * depth and operator-name rules) → batch refusal → the REST API's rate-limit middleware itself
 * (one per-key budget and one X-RateLimit-Remaining for MCP and REST) → transport.
 */
export function mcpRoutes(rt: Runtime, parts: McpParts): Router {
  const { config, log } = rt;
  const r = Router();
  const tools = createMcpTools(rt);

  r.use((_req, res, next) => {
    res.locals.route = MCP_AUDIT_ROUTE;
    next();
  });
  // GET (a server-to-client stream) and DELETE (end a session) have nothing to act on here.
  const notAllowed: RequestHandler = (_req, res) => {
    res.setHeader('Allow', 'POST');
    sendRefusal(
      res,
      405,
      new AppError(
        'bad_request',
        'this MCP server is stateless: it keeps no stream to open (GET) or session to end (DELETE); POST JSON-RPC messages',
      ),
    );
  };
  r.get('/', notAllowed);
  r.delete('/', notAllowed);
  r.post(
    '/',
    authenticate(parts.authCache),
    ...jsonBody(config.BODY_LIMIT_BYTES),
    refuseBatch,
    parts.rateLimit,
    async (req, res) => {
      if (req.body === undefined) throw new AppError('invalid_json', 'body: a JSON-RPC message is required');
      const l = locals(res);
      const [{ createMcpServer }, { StreamableHTTPServerTransport }] = await loadSdk();
      const server = createMcpServer(tools, {
        auth: l.auth!,
        requestId: l.requestId,
        audit: parts.audit,
        idempotency: parts.idempotency,
        log,
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    },
  );
  r.all('/', notAllowed);

  const onError: ErrorRequestHandler = async (err, req, res, _next) => {
    const appErr = funnelError(err, {
      source: 'mcp',
      log,
      msg: 'mcp request failed',
      request: true,
      fields: { requestId: locals(res).requestId },
    });
    if (res.headersSent) return res.end();
    const auth = locals(res).auth;
    // A refused tools/call (rate limit) is a call too: it goes in the audit log, names only. A refused
    // batch is not a call of one tool (toolCallOf finds none in an array) and ran nothing: not audited.
    const call = auth && toolCallOf(req.body);
    const known = call && tools.some((t) => t.name === call.name);
    if (auth && call) {
      await parts.audit.record({
        _id: newId('aud'),
        at: new Date(),
        accountId: auth.account._id,
        keyId: auth.key._id,
        method: 'POST',
        route: MCP_AUDIT_ROUTE,
        status: appErr.status,
        durationMs: Number(process.hrtime.bigint() - locals(res).startedAt) / 1e6,
        millicreditsCharged: 0,
        requestId: locals(res).requestId,
        via: 'mcp',
        ...(known ? { tool: call.name } : {}),
        argNames: argNamesOf(call.args),
      });
    }
    const rpcCode =
      appErr.code === 'invalid_json' ? PARSE_ERROR : err instanceof BatchRefused ? INVALID_REQUEST : HTTP_REFUSED;
    sendRefusal(res, appErr.status, appErr, rpcCode);
  };
  r.use(onError);
  return r;
}
