import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { AppError, boundedMessage, clip } from '../../platform/infra/errors';
import { funnelError } from '../../platform/infra/error-funnel';
import { faultPoint } from '../../platform/infra/faults';
import { newId, stableId } from '../../platform/infra/ids';
import type { Logger } from '../../platform/infra/log';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import { formatIssues } from '../../platform/infra/validation';
import type { AuthContext } from '../http/context';
import { IDEMPOTENCY_KEY } from '../http/route';
import type { Idempotency } from '../../platform/idempotency/idempotency.repository';
import { argNamesOf, MCP_AUDIT_ROUTE } from './mcp.audit';
import { hasScopeFor, type McpTool } from './mcp.tools';

/** Name and version the server announces in `initialize`. */
export const MCP_SERVER_INFO = { name: 'svc-mcp', version: '1.0.0' } as const;

/**
 * A tool's input as JSON Schema (draft 2020-12, the input side of the contract, as in /openapi).
 * MCP wants `type: "object"` at the top, so a contract that zod emits as a `$ref` to its
 * registry id is inlined, its other definitions kept beside it.
 */
export function toolInputSchema(schema: z.ZodObject): Tool['inputSchema'] {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any', io: 'input' }) as Record<
    string,
    unknown
  > & {
    $ref?: string;
    $defs?: Record<string, Record<string, unknown>>;
  };
  delete json.$schema;
  const top = json.$ref?.startsWith('#/$defs/') ? json.$defs?.[json.$ref.slice('#/$defs/'.length)] : undefined;
  if (!top) return json as Tool['inputSchema'];
  const { $ref: _ref, ...rest } = json;
  return { ...rest, ...top } as Tool['inputSchema'];
}

/**
 * The argument that stands for the REST API's Idempotency-Key header (MCP has no per-call
 * headers), on every tool whose endpoint honours the header. It is not part of the endpoint's
 * contract: it is taken out of the arguments before they are validated, and its record is the
 * REST one (same account, same key, same route and body → the same answer, charged once).
 */
export const IDEMPOTENCY_ARG = 'idempotencyKey';
const IDEMPOTENCY_ARG_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: '^[\\x21-\\x7e]{1,255}$',
  description:
    "Optional, like the REST API's Idempotency-Key header: 1 to 255 visible ASCII characters of your choice. A retry of this call with the same key and arguments answers what the first call made, charged once (kept for at least 24 hours); the same key with other arguments is refused (idempotency_key_reused).",
} as const;

const described = new WeakMap<McpTool, Tool>();

/** A tool as tools/list shows it; computed once per tool (JSON Schema generation is not free). */
function describeTool(t: McpTool): Tool {
  let d = described.get(t);
  if (!d) {
    d = {
      name: t.name,
      description: `${t.endpoint.summary} Scope: ${t.endpoint.scopes.join(' or ')}.`,
      inputSchema: t.endpoint.idempotent ? withIdempotencyArg(toolInputSchema(t.input)) : toolInputSchema(t.input),
      // No tool deletes anything; every create makes something new.
      annotations: {
        readOnlyHint: t.endpoint.method === 'get',
        destructiveHint: false,
        idempotentHint: t.endpoint.method === 'get',
        openWorldHint: false,
      },
    };
    described.set(t, d);
  }
  return d;
}

/** A tool's JSON Schema with the optional `idempotencyKey` property added. */
function withIdempotencyArg(schema: Tool['inputSchema']): Tool['inputSchema'] {
  return { ...schema, properties: { ...(schema.properties ?? {}), [IDEMPOTENCY_ARG]: IDEMPOTENCY_ARG_SCHEMA } };
}

/**
 * Take the `idempotencyKey` argument out of a call's arguments: what is left is validated with the
 * endpoint's contract. A key that breaks the header's rule is a validation error naming it.
 */
function splitIdempotencyKey(
  t: McpTool,
  args: Record<string, unknown>,
): { key?: string; rest: Record<string, unknown> } {
  if (!t.endpoint.idempotent || !(IDEMPOTENCY_ARG in args)) return { rest: args };
  const { [IDEMPOTENCY_ARG]: key, ...rest } = args;
  // Tool-calling models often fill an optional argument with null: that is no key.
  if (key === null) return { rest };
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key)) {
    throw new AppError('validation_error', `${IDEMPOTENCY_ARG}: must be 1 to 255 visible ASCII characters`);
  }
  return { key, rest };
}

/** What one MCP request's server works with. */
export interface McpCallContext {
  auth: AuthContext;
  requestId: string;
  audit: AuditRecorder;
  /** The REST API's Idempotency-Key records, for the `idempotencyKey` argument. */
  idempotency: Idempotency;
  log: Logger;
}

/** A tool error result: the Error shape's code and message, so clients can branch on `code`. */
const toolError = (err: AppError, requestId: string): CallToolResult => {
  const message = boundedMessage(err.message);
  return {
    isError: true,
    content: [{ type: 'text', text: `${err.code}: ${message}` }],
    structuredContent: { error: { code: err.code, message, requestId } },
  };
};

/**
 * The MCP server of one HTTP request, for one authenticated key.
 *
 * Built on the SDK's low-level `Server` rather than `McpServer.registerTool`: McpServer validates
 * arguments before the tool's callback runs, so a call without the key's scope would be answered
 * with a schema error instead of the missing scope, and a call refused by validation would never
 * reach the audit log. Here each tools/call goes: scope check → the contract's zod parse (errors
 * name the field, as the REST API's do) → the service → one audit entry, written before the
 * answer leaves (as the REST audit middleware does).
 */
export function createMcpServer(tools: readonly McpTool[], ctx: McpCallContext): Server {
  const { auth, requestId } = ctx;
  const server = new Server(MCP_SERVER_INFO, { capabilities: { tools: {} } });
  const byName = new Map(tools.map((t) => [t.name, t]));
  // Only the tools this key may call (SPEC §5); a tools/call of another is refused below.
  const visible = tools.filter((t) => hasScopeFor(t, auth.key.scopes));

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: visible.map(describeTool) }));

  /** One audit entry per tools/call, written before the answer leaves; `tool` only for a tool that exists. */
  const record = (e: { tool?: string; args: unknown; status: number; charged: number; started: bigint }) =>
    ctx.audit.record({
      _id: newId('aud'),
      at: new Date(),
      accountId: auth.account._id,
      keyId: auth.key._id,
      method: 'POST',
      route: MCP_AUDIT_ROUTE,
      status: e.status,
      durationMs: Number(process.hrtime.bigint() - e.started) / 1e6,
      millicreditsCharged: e.charged,
      requestId,
      via: 'mcp',
      ...(e.tool ? { tool: e.tool } : {}),
      argNames: argNamesOf(e.args),
    });

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const started = process.hrtime.bigint();
    const args = request.params.arguments ?? {};
    const t = byName.get(request.params.name);
    if (!t) {
      // Audited like any call (a probe for tools is worth seeing), without `tool`: the name is caller input.
      await record({ args, status: 400, charged: 0, started });
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool: ${clip(request.params.name)}; tools/list names the tools of this key`,
      );
    }
    let status = t.endpoint.status as number;
    let charged = 0;
    let replayed = false;
    let result: CallToolResult;
    try {
      if (!hasScopeFor(t, auth.key.scopes)) {
        throw new AppError(
          'forbidden',
          `this key lacks the scope for ${t.name}: needs ${t.endpoint.scopes.join(' or ')}`,
        );
      }
      const { key, rest } = splitIdempotencyKey(t, args);
      const parsed = t.input.safeParse(rest, { reportInput: true });
      if (!parsed.success) throw new AppError('validation_error', formatIssues(parsed.error.issues));
      let payload: Record<string, unknown>;
      if (key === undefined) {
        const out = await t.run({ auth, requestId, idFor: newId }, parsed.data as never);
        charged = out.charged;
        payload = out.payload as Record<string, unknown>;
      } else {
        // The REST route's record (api/http/route.ts mount): same route name, same validated body.
        const start = await ctx.idempotency
          .forAccount(auth.account._id)
          .start(key, `${t.endpoint.method} ${t.endpoint.path}`, parsed.data)
          .catch((err: unknown) => {
            // The record's refusals name the REST header; here the key is an argument.
            if (err instanceof AppError && err.message.startsWith('Idempotency-Key:'))
              throw new AppError(err.code, `${IDEMPOTENCY_ARG}:${err.message.slice('Idempotency-Key:'.length)}`);
            throw err;
          });
        if (start.kind === 'replay') {
          status = start.status;
          payload = start.body as Record<string, unknown>;
          replayed = true;
        } else {
          let out: Awaited<ReturnType<typeof t.run>>;
          try {
            out = await t.run(
              { auth, requestId, idFor: (prefix) => stableId(prefix, start.seed) },
              parsed.data as never,
            );
          } catch (err) {
            await ctx.idempotency.abort(start.id);
            throw err;
          }
          charged = out.charged;
          payload = out.payload as Record<string, unknown>;
          faultPoint('idempotency.before-finish');
          await ctx.idempotency.finish(start.id, t.endpoint.status, payload);
        }
      }
      // A replay says so, as REST's Idempotent-Replayed header does.
      result = {
        content: [{ type: 'text', text: JSON.stringify(payload) }],
        structuredContent: payload,
        ...(replayed ? { _meta: { idempotentReplayed: true } } : {}),
      };
    } catch (err) {
      const appErr = funnelError(err, {
        source: 'mcp',
        log: ctx.log,
        msg: 'mcp tool failed',
        fields: { requestId, tool: t.name },
      });
      status = appErr.status;
      result = toolError(appErr, requestId);
    }
    await record({ tool: t.name, args, status, charged, started });
    return result;
  });
  return server;
}
