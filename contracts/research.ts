import { z } from 'zod';
import { text } from './common';

/**
 * SPEC 2.16: `query` is required; "additional members are allowed". The one exception to the
 * unknown-field rule (every other request body refuses unknown fields with 400): they are
 * accepted and dropped, never stored or used (a plain zod object strips them); the body parser
 * still refuses field names starting with `$` or holding `.` or NUL, like everywhere.
 * The job input is the parsed `{ query }` plus `drive`, recorded by the service (ResearchJobInput).
 */
export const ResearchRequest = z
  .object({
    query: text(4000).trim().min(1, { error: 'must not be empty' }).describe('What to research.'),
  })
  .meta({
    id: 'ResearchRequest',
    description: 'Additional members are accepted, as SPEC 2.16 allows, and ignored: only query is used and stored.',
  });
export type ResearchRequest = z.infer<typeof ResearchRequest>;

/**
 * What Drive the dispatching key may read, recorded on the job at dispatch (the job runs later,
 * without the key): `null` when the key lacks `drive:read` (SPEC 5.3: Drive scopes are opt-in),
 * else the key's folder pins (empty = the whole personal drive; pins apply everywhere).
 */
export const ResearchDriveAccess = z.object({ pins: z.array(z.string()) });
export type ResearchDriveAccess = z.infer<typeof ResearchDriveAccess>;

/**
 * The stored input of a `research` job (never a request body). `drive` absent (jobs recorded
 * before it existed) reads as `null`: no Drive, the safe default.
 */
export const ResearchJobInput = z.object({
  query: ResearchRequest.shape.query,
  drive: ResearchDriveAccess.nullable()
    .optional()
    .transform((d) => d ?? null),
});
export type ResearchJobInput = z.infer<typeof ResearchJobInput>;

export const ResearchSource = z
  .object({ url: z.string(), title: z.string(), domain: z.string() })
  .meta({ id: 'ResearchSource' });
export type ResearchSource = z.infer<typeof ResearchSource>;

/** Result of a complete `research` job (job envelope `result`). */
export const ResearchResult = z
  .object({
    engine: z.string().describe('Engine that wrote the report, e.g. local-workspace-v1.'),
    content: z.string().describe('Markdown report.'),
    sources: z.array(ResearchSource),
    searchCount: z.number().int(),
    readCount: z.number().int(),
    failedReads: z.number().int().describe('Sources found but not readable; > 0 makes the report partial.'),
    totalTokens: z.number().int().describe('Tokens read and written (approximate BPE count, see the engine docs).'),
    partial: z.boolean(),
  })
  .meta({ id: 'ResearchResult' });
export type ResearchResult = z.infer<typeof ResearchResult>;

/** SPEC 2.16 legacy poll shape, only at GET /research/{jobId}. */
export const ResearchLegacy = z
  .object({
    jobId: z.string().describe('Raw pipeline id, without the res_ prefix.'),
    status: z
      .string()
      .describe(
        'Raw token: queued, started, searching, reading, writing, complete, partial, failed…; complete, partial and failed are terminal.',
      ),
    isComplete: z.boolean().describe('True once terminal and not failed (complete or partial).'),
    content: z.string().nullable(),
    sources: z.array(ResearchSource),
    searchCount: z.number().int(),
    readCount: z.number().int(),
    totalTokens: z.number().int(),
    errorMessage: z.string().nullable(),
    startedAt: z.string().nullable(),
    completedAt: z.string().nullable(),
  })
  .meta({ id: 'ResearchLegacy' });
export type ResearchLegacy = z.infer<typeof ResearchLegacy>;
