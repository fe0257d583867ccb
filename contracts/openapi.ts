import { z } from 'zod';
import { CodeBuildResult } from './code-builds';
import { ErrorBody, JobResult, PathId } from './common';
import { endpoints, type Endpoint } from './endpoints';
import { DeckResult, PresentationRequest } from './presentations';
import { ResearchResult } from './research';
import { SongResult } from './songs';
import { SpaceResult } from './spaces';
import { VideoResult } from './videos';
import { WebhookEventPayload } from './webhooks';

/** Codes that every authenticated endpoint can answer, with their HTTP status. */
const COMMON_ERRORS: Record<string, string> = {
  '401': 'Missing or invalid API key (unauthorized).',
  '403': 'Key lacks the scope (forbidden) or the plan lacks API access (plan_required).',
  '404': 'Unknown resource, or one owned by another account (not_found).',
  '429': 'Per-key rate limit exceeded (rate_limited); see Retry-After.',
  '500': 'Server failure (internal_error); idempotent requests are safe to retry.',
  '503':
    'The database is not answering (service_unavailable), answered at once: retry after the Retry-After header (1 s), with the same Idempotency-Key; what the request had done is found again, nothing is charged twice.',
};

/** What every operation can answer: the path rules and the JSON body parser (after the key and scope checks). */
const REQUEST_ERRORS: Record<string, string> = {
  '400':
    'The request was refused before it was served: validation_error (the message names the field: a malformed path id, a field of the wrong type, an unknown field, a NUL, nesting deeper than 32 levels; details lists each failed rule with its dotted path), invalid_json, or bad_request (a body that does not match its Content-Encoding).',
  '413': 'The body is larger than the accepted limit (payload_too_large).',
  '415': 'A body that is not application/json in UTF-8, or an unsupported Content-Encoding (unsupported_media_type).',
};

/** The job result shapes, listed as `result` of the job envelopes. */
const JOB_RESULTS = [CodeBuildResult, VideoResult, SongResult, ResearchResult, DeckResult, SpaceResult];

const ref = (schema: z.ZodType) => {
  const id = z.globalRegistry.get(schema)?.id;
  if (!id) throw new Error('a schema referenced by the OpenAPI document has no registry id');
  return { $ref: `#/components/schemas/${id}` };
};

/**
 * Adjustments of zod's JSON Schema where it under-describes what the server does:
 * - an exhaustive record (`z.record(z.enum([...]), v)`: every key present) lists its keys as
 *   properties, instead of `required` names the schema does not define;
 * - a job `result` lists the result shapes;
 * - PresentationRequest's refinement (a non-blank brief or a non-empty outline) as anyOf: here and
 *   not in the contract's meta, because the MCP tool of the same contract must keep a plain object
 *   at its top level (clients refuse anyOf there).
 */
const override = (ctx: { zodSchema: unknown; jsonSchema: Record<string, unknown> }) => {
  const js = ctx.jsonSchema as Record<string, unknown> & {
    propertyNames?: { enum?: string[] };
    additionalProperties?: unknown;
    required?: string[];
  };
  if (ctx.zodSchema === JobResult) {
    for (const k of Object.keys(js)) if (k !== 'description') delete js[k];
    js.anyOf = JOB_RESULTS.map(ref);
    return;
  }
  if (ctx.zodSchema === PresentationRequest) {
    js.anyOf = [
      { required: ['brief'], properties: { brief: { pattern: '\\S' } } },
      { required: ['outline'], properties: { outline: { minItems: 1 } } },
    ];
    return;
  }
  const keys = js.propertyNames?.enum;
  if (
    js.type === 'object' &&
    Array.isArray(keys) &&
    js.additionalProperties &&
    typeof js.additionalProperties === 'object' &&
    !js.properties
  ) {
    js.properties = Object.fromEntries(keys.map((k) => [k, js.additionalProperties]));
    js.required = [...keys];
    js.additionalProperties = false;
    delete js.propertyNames;
  }
};

const JSON_SCHEMA_OPTS = { target: 'draft-2020-12', unrepresentable: 'any', override } as const;

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): unknown => {
  const id = z.globalRegistry.get(schema)?.id;
  if (id) return { $ref: `#/components/schemas/${id}` };
  const json = z.toJSONSchema(schema, { ...JSON_SCHEMA_OPTS, io }) as Record<string, unknown>;
  delete json.$schema;
  delete json.$defs; // every $def has a registry id, so it is in components already
  return JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/'));
};

/** Response headers of this API, in components.headers. */
const HEADERS: Record<string, { description: string; schema: Record<string, unknown> }> = {
  Location: {
    description:
      'Where the created resource (201) or the accepted job (202) lives: a path under /api/v1, e.g. /api/v1/projects/prj_… or /api/v1/jobs/vid_…; for a redirect (302), the absolute URL to follow with a plain GET.',
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'Bearer realm="api"; with error="invalid_token" when a key was sent but is not valid (RFC 6750).',
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  'X-RateLimit-Limit': { description: 'Requests the key may make per window.', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'Seconds until the window ends.', schema: { type: 'integer' } },
  'RateLimit-Policy': {
    description: 'The limit as draft-ietf-httpapi-ratelimit-headers: "default";q=<requests>;w=<window seconds>.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'The state as draft-ietf-httpapi-ratelimit-headers: "default";r=<remaining>;t=<seconds to reset>.',
    schema: { type: 'string' },
  },
};
const headerRefs = (...names: string[]) =>
  Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]));
const RATE_LIMIT_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
];
/** The headers of the shared error responses, by status. */
const ERROR_HEADERS: Record<string, string[]> = {
  '401': ['WWW-Authenticate'],
  '429': ['Retry-After', ...RATE_LIMIT_HEADERS],
  '503': ['Retry-After'],
  '504': ['Retry-After'],
};

const errorResponse = (description: string, status?: string) => ({
  description,
  ...(status && ERROR_HEADERS[status] ? { headers: headerRefs(...ERROR_HEADERS[status]!) } : {}),
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** Query parameters from an object schema. */
const queryParameters = (schema: z.ZodType | undefined) => {
  if (!schema) return [];
  const json = z.toJSONSchema(schema, { ...JSON_SCHEMA_OPTS, io: 'input' }) as {
    properties?: Record<string, unknown>;
    required?: string[];
  };
  return Object.entries(json.properties ?? {}).map(([name, s]) => ({
    name,
    in: 'query',
    required: json.required?.includes(name) ?? false,
    schema: s,
  }));
};

/**
 * The body of a POST that reads none (api/http/route.ts: the body is parsed when sent, then not
 * read): no body, or a JSON object whose members are ignored, not refused.
 */
const NO_FIELDS = {
  type: 'object',
  description: 'Nothing is read from the body: send none, or {} (any member is ignored).',
};

const pathIdSchema = () => toSchema(PathId, 'input');

const operation = (id: string, ep: Endpoint, implemented: ReadonlySet<string>) => {
  const pathParams = [...ep.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: pathIdSchema(),
  }));
  const headers = [
    ...(ep.idempotent
      ? [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            schema: { type: 'string', maxLength: 255 },
            description:
              'A retry with the same key and body returns the original response and is not billed again; the same key with another body answers 422; while the first is in flight, 409. Kept 24 hours.',
          },
        ]
      : []),
    ...(ep.ifMatch
      ? [
          {
            name: 'If-Match',
            in: 'header',
            required: false,
            schema: { type: 'string', examples: ['"3"'] },
            description:
              'The ETag (version) as last read, e.g. "3": the request applies only while the resource is still at that version, else 412 precondition_failed and nothing changes. * or no header: no condition.',
          },
        ]
      : []),
    ...Object.entries(ep.requestHeaders ?? {}).map(([name, description]) => ({
      name,
      in: 'header',
      required: false,
      schema: { type: 'string' },
      description,
    })),
  ];
  const success: Record<string, unknown> = {
    description: ep.stream ? `${ep.summary} ${ep.stream.description}` : ep.summary,
  };
  const content: Record<string, unknown> = {};
  if (ep.response) content['application/json'] = { schema: toSchema(ep.response, 'output') };
  if (ep.stream) content[ep.stream.mediaType] = { schema: { type: 'string', description: ep.stream.description } };
  if (Object.keys(content).length) success.content = content;
  if (ep.stream?.headers)
    success.headers = Object.fromEntries(
      Object.entries(ep.stream.headers).map(([name, description]) => [
        name,
        { description, schema: { type: 'string' } },
      ]),
    );
  if (ep.successHeaders)
    success.headers = {
      ...((success.headers as object) ?? {}),
      ...Object.fromEntries(
        Object.entries(ep.successHeaders).map(([name, description]) => [
          name,
          { description, schema: { type: 'string' } },
        ]),
      ),
    };
  if (ep.status === 201 || ep.status === 202 || ep.status === 302)
    success.headers = { ...((success.headers as object) ?? {}), ...headerRefs('Location') };
  if (ep.scopes.length > 0)
    success.headers = { ...((success.headers as object) ?? {}), ...headerRefs(...RATE_LIMIT_HEADERS) };
  const responses: Record<string, unknown> = { [String(ep.status)]: success };
  for (const [status, description] of Object.entries(ep.emptyAnswers ?? {})) responses[status] = { description };
  for (const [status, text] of Object.entries(REQUEST_ERRORS)) responses[status] = errorResponse(text);
  if (ep.scopes.length > 0) {
    for (const [status, text] of Object.entries(COMMON_ERRORS)) responses[status] = errorResponse(text, status);
    if (ep.ifMatch)
      responses['412'] = errorResponse(
        'If-Match names a version the resource has moved past (precondition_failed): nothing was changed; fetch it again and re-apply.',
      );
    if (ep.scopes.includes('ai')) responses['402'] = errorResponse('Not enough AI credits (insufficient_credits).');
    if (ep.idempotent) {
      responses['409'] = errorResponse(
        'A request with this Idempotency-Key is still in flight (idempotency_in_flight).',
      );
      responses['422'] = errorResponse('This Idempotency-Key was used with another body (idempotency_key_reused).');
    }
  }
  // An endpoint's own 503 (a pool or an engine away) comes besides the database's.
  for (const [status, text] of Object.entries(ep.errors ?? {}))
    responses[status] = errorResponse(
      status === '503' && ep.scopes.length > 0 ? `${text} Or: ${COMMON_ERRORS['503']}` : text,
      status,
    );
  if (!implemented.has(id)) responses['501'] = errorResponse('Not available in this deployment yet (not_implemented).');
  responses.default = errorResponse(
    'Any other error, in the same Error shape (for example 503 service_unavailable, 504 timeout).',
  );
  return {
    operationId: id,
    summary: ep.summary,
    tags: [ep.tag],
    'x-required-scopes': ep.scopes,
    'x-implemented': implemented.has(id),
    security: ep.scopes.length ? [{ apiKey: [] }] : [],
    parameters: [...pathParams, ...queryParameters(ep.query), ...headers],
    ...(ep.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(ep.body, 'input') } } } }
      : ep.method === 'post'
        ? { requestBody: { required: false, content: { 'application/json': { schema: NO_FIELDS } } } }
        : {}),
    responses,
  };
};

/** The delivery of every webhook event (SPEC 6.2, 6.3): what a customer endpoint receives. */
const webhookDelivery = () => ({
  post: {
    operationId: 'webhookEvent',
    summary: 'An event delivered to a subscribed endpoint.',
    description:
      'Signed: X-Service-Signature is sha256=<hex HMAC-SHA256 of the raw body keyed with the webhook secret>. Any 2xx within 5 s delivers; otherwise retried after 1 s and 3 s. At least once: deduplicate on X-Service-Event-Id.',
    tags: ['webhooks'],
    // Authenticated by the signature, not by an API key.
    security: [],
    parameters: [
      {
        name: 'X-Service-Event',
        in: 'header',
        required: true,
        schema: { type: 'string' },
        description: 'The event name.',
      },
      {
        name: 'X-Service-Event-Id',
        in: 'header',
        required: true,
        schema: { type: 'string' },
        description: 'The same as eventId; repeated on retries.',
      },
      {
        name: 'X-Service-Event-Version',
        in: 'header',
        required: true,
        schema: { type: 'string' },
        description: 'Payload schema version.',
      },
      {
        name: 'X-Service-Signature',
        in: 'header',
        required: true,
        schema: { type: 'string' },
        description: 'sha256=<hex HMAC-SHA256 of the raw body>.',
      },
    ],
    requestBody: { required: true, content: { 'application/json': { schema: ref(WebhookEventPayload) } } },
    responses: {
      '200': { description: 'Any 2xx answer delivers the event.' },
      '400': { description: 'Any other answer (or none within 5 s) fails the attempt; it is retried.' },
    },
  },
});

/** The registry's schemas as JSON Schema, for requests (`input`) or responses (`output`). */
const registrySchemas = (io: 'input' | 'output') => {
  const out = z.toJSONSchema(z.globalRegistry, {
    ...JSON_SCHEMA_OPTS,
    io,
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Record<string, unknown>> };
  for (const s of Object.values(out.schemas)) {
    delete s.$schema;
    delete s.$id;
  }
  return out.schemas;
};

/**
 * The components: request bodies (and the schemas they reference) as the server reads them
 * (zod `input`: strict objects say `additionalProperties: false`, defaults are optional),
 * everything else as the server writes it (`output`).
 */
const components = () => {
  const output = registrySchemas('output');
  const input = registrySchemas('input');
  const requestIds = new Set<string>();
  const pending = (Object.values(endpoints) as Endpoint[])
    .flatMap((ep) => (ep.body ? [z.globalRegistry.get(ep.body)?.id] : []))
    .filter((id): id is string => !!id);
  while (pending.length) {
    const id = pending.pop()!;
    if (requestIds.has(id)) continue;
    requestIds.add(id);
    for (const m of JSON.stringify(input[id] ?? {}).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) pending.push(m[1]!);
  }
  // By name: the registry holds them in the order modules happened to load, which differs between
  // processes that loaded other modules first (a test worker), and the committed client follows it.
  return Object.fromEntries(
    Object.keys(output)
      .sort()
      .map((id) => [id, requestIds.has(id) ? input[id]! : output[id]!]),
  );
};

/**
 * The OpenAPI 3.1 document, generated from the endpoint catalogue and the zod registry.
 * `implemented` names the operations this deployment serves; the others answer 501.
 */
export function buildOpenApi(opts: { serverUrl: string; implemented: ReadonlySet<string> }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
    paths[ep.path] ??= {};
    paths[ep.path]![ep.method] = operation(id, ep, opts.implemented);
  }
  // Make sure the shared schemas are registered before the registry is read.
  void ErrorBody;
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'Media, Workspace and Agent REST Service',
      version: '1.0.0',
      description:
        'JSON REST API. Every path is relative to the server URL, which ends in /api/v1. ' +
        'Every response carries X-Request-Id; authenticated responses carry X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the window resets), and the same as RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers); ' +
        'a 401 and GET /openapi carry none (no key, no account to count against). A 401 carries WWW-Authenticate: Bearer; every 503 and 504 Retry-After (seconds); every 201 and 202 a Location under /api/v1. ' +
        'The key (401) and its scope (403) are checked before the body is read. ' +
        'Asynchronous work answers 202 with a job envelope polled at GET /jobs/{id}. ' +
        'Input rules: request bodies are UTF-8 JSON objects nested at most 32 levels; unknown fields are refused with 400 naming them (POST /research excepted, SPEC 2.16: ignored); ' +
        'field names never start with $ or hold . or NUL; strings never hold NUL, names and ids no control characters; error messages quote at most 64 characters of any input. ' +
        'Outside /api/v1 the same keys are accepted by the Model Context Protocol server at POST /mcp (Streamable HTTP, stateless; its tools mirror these operations with the same scopes and schemas), ' +
        'and keys are created and revoked in the developer console at /console (SPEC 5.2).',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: opts.serverUrl }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'API key: svc_ followed by a random part.' },
      },
      headers: HEADERS,
      schemas: components(),
    },
    paths,
    webhooks: { event: webhookDelivery() },
  };
}
