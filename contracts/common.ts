import { z } from 'zod';
import { JOB_TYPES } from './registry';

/** An integer within [min, max] whose error message reads "must be between min and max". */
export const intBetween = (min: number, max: number) =>
  z
    .number({ error: `must be an integer between ${min} and ${max}` })
    .int({ error: `must be an integer between ${min} and ${max}` })
    .min(min, { error: `must be between ${min} and ${max}` })
    .max(max, { error: `must be between ${min} and ${max}` });

/** No NUL anywhere: PostgreSQL (under FerretDB) cannot store it, and no text needs it. */
const NO_NUL = /^[^\u0000]*$/;
/** No C0 or C1 control character (NUL, tab, newline, escape, DEL…): for names, ids and URLs. */
const NO_CONTROL = /^[^\u0000-\u001f\u007f-\u009f]*$/;

/**
 * Free text (a prompt, lyrics, a description) of at most `max` characters. NUL is refused
 * (400 naming the field); other characters, newlines included, are kept as sent.
 */
export const text = (max?: number) => {
  const s = z.string({ error: 'must be a string' });
  return (max === undefined ? s : s.max(max, { error: `must be at most ${max} characters` })).regex(NO_NUL, {
    error: 'must not contain NUL characters',
  });
};

/**
 * One line of text (a name, a title, a tag, a URL) of at most `max` characters: no control
 * characters at all (NUL, tab, newline, escape, DEL, C1).
 */
export const line = (max: number) =>
  z
    .string({ error: 'must be a string' })
    .max(max, { error: `must be at most ${max} characters` })
    .regex(NO_CONTROL, { error: 'must not contain control characters' });

/** An absolute http(s) URL of at most 2048 characters, without control characters. */
export const httpUrl = (error = 'must be an absolute http(s) URL') =>
  z
    .url({ error, protocol: /^https?$/ })
    .max(2048, { error: 'must be at most 2048 characters' })
    .regex(NO_CONTROL, { error: 'must not contain control characters' })
    .meta({ format: 'uri' });

/** What a path id may be (`/jobs/{id}`, `/webhooks/{id}`, `/assets/{id}/…`). */
export const ID_RULE = { maxLength: 128, pattern: '^[A-Za-z0-9_-]+$' } as const;

/**
 * A resource id in a path: 1 to 128 letters, digits, `_` and `-` (every id this service makes is
 * `prefix_` + 20 base32 characters). Anything else (`../`, NUL, 300 characters, non-ASCII) is
 * refused with 400 validation_error naming the parameter, before any lookup; a well-formed id
 * that names nothing of the caller's is 404 not_found.
 */
export const PathId = z
  .string()
  .min(1)
  .max(ID_RULE.maxLength)
  .regex(new RegExp(ID_RULE.pattern))
  .describe(
    '1 to 128 letters, digits, _ and -; anything else is 400 validation_error, an id that names nothing of yours 404.',
  );
export const PATH_ID_RULE_TEXT = `must be 1 to ${ID_RULE.maxLength} letters, digits, _ and -`;

/** SPEC 2.2. */
export const ErrorBody = z
  .object({
    error: z.object({
      code: z.string().describe('Stable machine code, e.g. validation_error, not_found.'),
      message: z.string().describe('Human text; for validation errors it names the field.'),
      requestId: z.string().describe('Same as the X-Request-Id header.'),
      details: z
        .array(
          z.object({
            path: z
              .string()
              .describe('The field, dotted from the body or query root (ops.2.column); body or query for the whole.'),
            code: z
              .string()
              .describe("The rule that failed (zod's issue code: invalid_type, too_big, unrecognized_keys…)."),
            message: z.string().describe('Human text for this field alone.'),
          }),
        )
        .optional()
        .describe('validation_error only: one entry per failed rule (at most 10), the same fields message names.'),
    }),
  })
  .meta({ id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBody>;

/** SPEC 2.3: the list envelope around any item schema. */
export const listEnvelope = <T extends z.ZodType>(item: T) =>
  z.object({
    data: z.array(item),
    total: z.number().int().describe('Total item count.'),
    cursor: z.string().nullable().optional().describe('Present only when more pages exist. Opaque.'),
  });

/** Page size of every list endpoint: `limit` 1 to LIST_LIMIT_MAX, default LIST_LIMIT_DEFAULT. */
export const LIST_LIMIT_DEFAULT = 20;
export const LIST_LIMIT_MAX = 100;

/**
 * `limit` of every list (SPEC 4 rule 2), one rule: an integer from 1 to `max` (LIST_LIMIT_MAX
 * unless the list says less); anything else (-1, 0, abc, 101) is 400 validation_error naming
 * `limit`. No default here: each query sets its own.
 */
export const listLimit = (max: number = LIST_LIMIT_MAX) =>
  z.coerce
    .number({ error: `must be an integer between 1 and ${max}` })
    .int({ error: `must be an integer between 1 and ${max}` })
    .min(1, { error: `must be between 1 and ${max}` })
    .max(max, { error: `must be between 1 and ${max}` });

const listCursor = z
  .string()
  .max(512, { error: 'must be at most 512 characters' })
  .optional()
  .describe('Opaque: pass back the cursor of the previous page verbatim.');

/**
 * The query of a list endpoint (SPEC 4 rule 2): `limit` (1 to 100, default 20; more is 400) and
 * `cursor` (opaque, from the previous page), plus the list's own filters.
 */
export const listQuery = <S extends z.ZodRawShape>(filters: S) =>
  z.object({
    limit: listLimit()
      .default(LIST_LIMIT_DEFAULT)
      .describe(`Page size, 1 to ${LIST_LIMIT_MAX}; default ${LIST_LIMIT_DEFAULT}.`),
    cursor: listCursor,
    ...filters,
  });

/**
 * The query of a list small enough to answer whole (the folder tree, webhooks, voices, persona
 * faces): the same `limit` and `cursor` rule, but without `limit` every item comes in one page.
 */
export const wholeListQuery = <S extends z.ZodRawShape>(filters: S) =>
  z.object({
    limit: listLimit().optional().describe(`Page size, 1 to ${LIST_LIMIT_MAX}; default: every item in one page.`),
    cursor: listCursor,
    ...filters,
  });

/** The query of a whole list without filters of its own. */
export const WholeListQuery = wholeListQuery({});

/** `version` of a mutable resource: 1 at creation, +1 per change; also sent as `ETag: "<version>"`. */
export const Version = z
  .number()
  .int()
  .describe(
    '1 at creation, +1 on every change; also the ETag header. Send it back as If-Match: "<version>" to update only if nobody changed it meanwhile (else 412 precondition_failed).',
  );

export const JOB_STATUSES = ['queued', 'processing', 'complete', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/**
 * A job's `result`, shaped per job type (CodeBuildResult, VideoResult, SongResult,
 * ResearchResult, DeckResult); the OpenAPI document lists those shapes (contracts/openapi.ts).
 */
export const JobResult = z
  .record(z.string(), z.unknown())
  .describe('Present once the job is complete; shaped per job type.');

/** SPEC 2.4. `result` is shaped per job type. */
export const JobEnvelope = z
  .object({
    jobId: z.string().describe('Type-prefixed id: vid_, song_, code_, res_, space_, deck_.'),
    type: z.enum(JOB_TYPES).optional(),
    status: z.enum(JOB_STATUSES),
    rawStatus: z.string().optional().describe("The pipeline's own status token."),
    pollUrl: z.string().describe('Path of the form /api/v1/jobs/<jobId>.'),
    progressMessage: z.string().optional().describe('Human progress text.'),
    result: JobResult.nullable().optional(),
    error: z.string().nullable().optional().describe('Failure text.'),
    createdAt: z.string().optional(),
    updatedAt: z.string().optional(),
  })
  .meta({ id: 'JobEnvelope' });
export type JobEnvelope = z.infer<typeof JobEnvelope>;

/** A 202 dispatch answer: the job envelope plus `notes` when a knob was stepped down. */
export const JobAccepted = JobEnvelope.extend({
  notes: z.array(z.string()).optional().describe('Plain-language notes on knobs that were stepped down.'),
}).meta({ id: 'JobAccepted' });

/** The body of GET /openapi: an OpenAPI 3.1 document (its own rules are the OpenAPI Specification's). */
export const OpenApiDocument = z
  .looseObject({
    openapi: z.string().describe('The OpenAPI version, 3.1.0.'),
    info: z
      .looseObject({ title: z.string(), version: z.string() })
      .describe('Title, version and description of this API.'),
    paths: z.record(z.string(), z.unknown()).describe('Every operation, by path relative to the server URL.'),
  })
  .describe(
    'An OpenAPI 3.1 document (https://spec.openapis.org/oas/v3.1.0); besides openapi, info and paths it has jsonSchemaDialect, servers, components and webhooks.',
  )
  .meta({ id: 'OpenApiDocument' });

/**
 * JSON Schema `if`/`then`/`else` for a zod meta: where `field` is `value`, `then` applies, else
 * `otherwise`. It states a rule a refinement checks, for /openapi; it changes no validation.
 */
export const whenField = (
  field: string,
  value: string,
  then: Record<string, unknown>,
  otherwise?: Record<string, unknown>,
) => ({
  if: { properties: { [field]: { const: value } }, required: [field] },
  then, // the JSON Schema keyword, not a thenable
  ...(otherwise ? { else: otherwise } : {}),
});
