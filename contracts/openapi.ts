import { z } from 'zod';
import { ErrorBody } from './common';
import { endpoints, type Endpoint } from './endpoints';

/** Codes that every authenticated endpoint can answer, with their HTTP status. */
const COMMON_ERRORS: Record<string, string> = {
  '400': 'Validation failed (validation_error, invalid_json); the message names the field.',
  '401': 'Missing or invalid API key (unauthorized).',
  '403': 'Key lacks the scope (forbidden) or the plan lacks API access (plan_required).',
  '404': 'Unknown resource, or one owned by another account (not_found).',
  '429': 'Per-key rate limit exceeded (rate_limited); see Retry-After.',
  '500': 'Server failure (internal_error); idempotent requests are safe to retry.',
};

const JSON_SCHEMA_OPTS = { target: 'draft-2020-12', unrepresentable: 'any' } as const;

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): unknown => {
  const id = z.globalRegistry.get(schema)?.id;
  if (id) return { $ref: `#/components/schemas/${id}` };
  const json = z.toJSONSchema(schema, { ...JSON_SCHEMA_OPTS, io }) as Record<string, unknown>;
  delete json.$schema;
  delete json.$defs; // every $def has a registry id, so it is in components already
  return JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/'));
};

const errorResponse = (description: string) => ({
  description,
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

const operation = (id: string, ep: Endpoint, implemented: ReadonlySet<string>) => {
  const pathParams = [...ep.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const headers = ep.idempotent
    ? [{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 }, description: 'A retry with the same key and body returns the original response and is not billed again; the same key with another body answers 422; while the first is in flight, 409. Kept 24 hours.' }]
    : [];
  const success: Record<string, unknown> = { description: ep.summary };
  if (ep.response) success.content = { 'application/json': { schema: toSchema(ep.response, 'output') } };
  const responses: Record<string, unknown> = { [String(ep.status)]: success };
  if (ep.scopes.length > 0) {
    for (const [status, text] of Object.entries(COMMON_ERRORS)) responses[status] = errorResponse(text);
    if (ep.scopes.includes('ai')) responses['402'] = errorResponse('Not enough AI credits (insufficient_credits).');
    if (ep.idempotent) {
      responses['409'] = errorResponse('A request with this Idempotency-Key is still in flight (idempotency_in_flight).');
      responses['422'] = errorResponse('This Idempotency-Key was used with another body (idempotency_key_reused).');
    }
  }
  for (const [status, text] of Object.entries(ep.errors ?? {})) responses[status] = errorResponse(text);
  if (!implemented.has(id)) responses['501'] = errorResponse('Not available in this deployment yet (not_implemented).');
  return {
    operationId: id,
    summary: ep.summary,
    tags: [ep.tag],
    'x-required-scopes': ep.scopes,
    'x-implemented': implemented.has(id),
    security: ep.scopes.length ? [{ apiKey: [] }] : [],
    parameters: [...pathParams, ...queryParameters(ep.query), ...headers],
    ...(ep.body ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(ep.body, 'input') } } } } : {}),
    responses,
  };
};

/**
 * The OpenAPI 3.1 document, generated from the endpoint catalogue and the zod registry.
 * `implemented` names the operations this deployment serves; the others answer 501.
 */
export function buildOpenApi(opts: { serverUrl: string; implemented: ReadonlySet<string> }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
    (paths[ep.path] ??= {})[ep.method] = operation(id, ep, opts.implemented);
  }
  // Make sure the shared schemas are registered before the registry is read.
  void ErrorBody;
  const registry = z.toJSONSchema(z.globalRegistry, {
    ...JSON_SCHEMA_OPTS,
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Record<string, unknown>> };
  for (const s of Object.values(registry.schemas)) {
    delete s.$schema;
    delete s.$id;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Media, Workspace and Agent REST Service',
      version: '1.0.0',
      description:
        'JSON REST API. Every path is relative to the server URL, which ends in /api/v1. ' +
        'Every response carries X-Request-Id; authenticated responses carry X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds until the window resets). ' +
        'Asynchronous work answers 202 with a job envelope polled at GET /jobs/{id}.',
    },
    servers: [{ url: opts.serverUrl }],
    components: {
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'API key: svc_ followed by a random part.' } },
      schemas: registry.schemas,
    },
    paths,
  };
}
