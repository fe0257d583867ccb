import fc from 'fast-check';

/** A JSON Schema node of the OpenAPI document (loosely typed: the fuzzer only reads it). */
export type Schema = Record<string, any>;

/** One served operation, read from the OpenAPI document. */
export interface Operation {
  id: string;
  method: string;
  /** Template, e.g. /webhooks/{id}/deliveries. */
  path: string;
  pathParams: string[];
  query: { name: string; schema: Schema }[];
  /** The request body schema, $refs resolved at the top. */
  body?: Schema;
  authenticated: boolean;
}

/**
 * Every operation the deployment serves (`x-implemented: true`), from the served OpenAPI
 * document, so an endpoint added later is fuzzed without new test code.
 */
export function servedOperations(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(item)) {
      if (!op['x-implemented']) continue;
      const params = (op.parameters ?? []) as { name: string; in: string; schema: Schema }[];
      // An optional body is one the operation does not read (e.g. POST /personas/{id}/publish): nothing to refuse.
      const bodySchema = op.requestBody?.required ? op.requestBody.content?.['application/json']?.schema : undefined;
      ops.push({
        id: op.operationId,
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema })),
        body: bodySchema ? resolve(doc, bodySchema) : undefined,
        authenticated: (op.security ?? []).length > 0,
      });
    }
  }
  return ops;
}

export function resolve(doc: any, s: Schema | undefined): Schema {
  let cur = s ?? {};
  for (let i = 0; i < 10 && typeof cur.$ref === 'string'; i++) {
    cur =
      cur.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce((o: any, k: string) => o?.[k], doc) ?? {};
  }
  return cur;
}

/** A well-formed id that names nothing: the path of an operation with every parameter filled with it. */
export const WELL_FORMED_ID = 'code_00000000000000000000';
export const fillPath = (op: Operation, value = WELL_FORMED_ID) => op.path.replace(/\{(\w+)\}/g, () => value);

/** The JSON types a schema allows (anyOf/oneOf flattened). */
export function typesOf(doc: any, s: Schema): Set<string> {
  const r = resolve(doc, s);
  const out = new Set<string>();
  for (const alt of [...(r.anyOf ?? []), ...(r.oneOf ?? [])]) for (const t of typesOf(doc, alt)) out.add(t);
  if (typeof r.type === 'string') out.add(r.type);
  if (Array.isArray(r.type)) for (const t of r.type) out.add(t);
  if (r.enum) for (const v of r.enum) out.add(v === null ? 'null' : typeof v);
  if (out.has('integer')) out.add('number');
  return out;
}

/** A small value the schema accepts (required members only), as a base to mutate. */
export function example(doc: any, s: Schema, depth = 0): unknown {
  const r = resolve(doc, s);
  if (depth > 6) return null;
  if (r.enum) return r.enum[0];
  if (r.const !== undefined) return r.const;
  const alt = r.anyOf?.[0] ?? r.oneOf?.[0];
  // An object whose alternatives only add required members (exactly one of content, contentBase64): the first one's.
  if (alt && r.type === 'object')
    return example(
      doc,
      {
        ...r,
        anyOf: undefined,
        oneOf: undefined,
        required: [...(r.required ?? []), ...(resolve(doc, alt).required ?? [])],
      },
      depth,
    );
  if (alt) return example(doc, alt, depth + 1);
  switch (Array.isArray(r.type) ? r.type[0] : r.type) {
    case 'string':
      return 'x'.repeat(Math.max(1, r.minLength ?? 1));
    case 'integer':
    case 'number':
      return r.minimum ?? 1;
    case 'boolean':
      return false;
    case 'array':
      return Array.from({ length: r.minItems ?? 0 }, () => example(doc, r.items ?? {}, depth + 1));
    case 'object': {
      const o: Record<string, unknown> = {};
      for (const k of r.required ?? []) o[k] = example(doc, r.properties?.[k] ?? {}, depth + 1);
      return o;
    }
    default:
      return null;
  }
}

/** Values of every JSON type not in `allowed`. */
export function wrongType(allowed: Set<string>): fc.Arbitrary<unknown> {
  const pool: [string, fc.Arbitrary<unknown>][] = [
    ['string', fc.string({ maxLength: 40 })],
    ['number', fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }))],
    ['boolean', fc.boolean()],
    ['null', fc.constant(null)],
    ['array', fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 })],
    ['object', fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })],
  ];
  const usable = pool.filter(([t]) => !allowed.has(t)).map(([, a]) => a);
  return usable.length ? fc.oneof(...usable) : fc.jsonValue({ maxDepth: 2 });
}

/** `[[[…]]]` or `{"a":{"a":…}}` nested `levels` deep, as JSON text (never built as an object). */
export const nestedJson = (levels: number, kind: 'array' | 'object') =>
  kind === 'array'
    ? '['.repeat(levels) + ']'.repeat(levels)
    : `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;

/** Ids no route should ever take for a real one (sent as written: percent-escapes stay escapes). */
export const ODD_IDS = [
  '..',
  '../',
  '..%2F..%2Fetc%2Fpasswd',
  '%2e%2e%2f',
  '%00',
  'code_%00',
  '%ff',
  '%',
  '%C0%AF',
  '%E0%80%AF',
  '%F0%9F%92%A9',
  encodeURIComponent('日本語'),
  encodeURIComponent('é'),
  'x'.repeat(300),
  `code_${'x'.repeat(124)}`,
  '%20',
  '%0d%0aX-Injected:%201',
  'a%2Fb',
  '$where',
  '%24where',
  'a.b',
  '*',
  '%7Bid%7D',
  "'%20OR%201=1--",
];

/** Authorization values that must all answer 401 (or 431 when over the header limit). */
export const BAD_AUTHORIZATION = [
  '',
  'Bearer',
  'Bearer ',
  'Basic dXNlcjpwYXNz',
  'Token svc_abc',
  'Bearer svc_',
  `Bearer svc_${'A'.repeat(5000)}`,
  `Bearer svc_${'A'.repeat(17_000)}`,
  'bearer  svc_x  y',
  'Bearer svc_\u00ff\u00fe\u00e9',
  'Bearer svc_%00',
  'Bearer svc_x\ty',
  'Bearer Bearer svc_x',
];

/** Content-Encodings over plain (not encoded) JSON bytes. */
export const BAD_CONTENT_ENCODINGS = [
  'gzip',
  'deflate',
  'br',
  'zstd',
  'compress',
  'x-unknown',
  'gzip, br',
  'GZIP',
  'identity, gzip',
  '*',
];

/** Content-Types the JSON body parser must refuse. */
export const BAD_CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16le',
  'application/json; charset=latin1',
  'application/xml',
];
