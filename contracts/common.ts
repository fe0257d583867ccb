import { z } from 'zod';
import { JOB_TYPES } from './registry';

/** An integer within [min, max] whose error message reads "must be between min and max". */
export const intBetween = (min: number, max: number) =>
  z
    .number({ error: `must be an integer between ${min} and ${max}` })
    .int({ error: `must be an integer between ${min} and ${max}` })
    .min(min, { error: `must be between ${min} and ${max}` })
    .max(max, { error: `must be between ${min} and ${max}` });

/** A string of at most `max` characters. */
export const text = (max?: number) => {
  const s = z.string({ error: 'must be a string' });
  return max === undefined ? s : s.max(max, { error: `must be at most ${max} characters` });
};

/** SPEC 2.2. */
export const ErrorBody = z
  .object({
    error: z.object({
      code: z.string().describe('Stable machine code, e.g. validation_error, not_found.'),
      message: z.string().describe('Human text; for validation errors it names the field.'),
      requestId: z.string().describe('Same as the X-Request-Id header.'),
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

export const JOB_STATUSES = ['queued', 'processing', 'complete', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** SPEC 2.4. `result` is shaped per job type. */
export const JobEnvelope = z
  .object({
    jobId: z.string().describe('Type-prefixed id: vid_, song_, code_, res_, space_, deck_.'),
    type: z.enum(JOB_TYPES).optional(),
    status: z.enum(JOB_STATUSES),
    rawStatus: z.string().optional().describe("The pipeline's own status token."),
    pollUrl: z.string().describe('Path of the form /api/v1/jobs/<jobId>.'),
    progressMessage: z.string().optional().describe('Human progress text.'),
    result: z.record(z.string(), z.unknown()).nullable().optional(),
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
