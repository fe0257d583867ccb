import { z } from 'zod';
import { JobAccepted, httpUrl, line } from './common';

/** SPEC 2.14 / 8: at most 8 photos of one room. */
export const SPACE_LIMITS = { maxPhotos: 8, titleMax: 80 } as const;
export const SPACE_QUALITIES = ['preview', 'full'] as const;
export const SPACE_SOURCES = ['photo', 'photos', 'video'] as const;

const uri = httpUrl();
const INPUTS = ['imageUrl', 'imageUrls', 'videoUrl'] as const;

/** SPEC 2.14 request of POST /real-world/spaces. WARNING: public contract. */
export const SpaceRequest = z
  .strictObject({
    imageUrl: uri
      .optional()
      .describe(
        'One photo (JPEG, PNG, WebP; 20 MB or less), wide and level, with the floor and a wall in view: a one-photo space.',
      ),
    imageUrls: z
      .array(uri, { error: 'must be an array of URLs' })
      .min(1, { error: 'at least 1 URL' })
      .max(SPACE_LIMITS.maxPhotos, { error: `at most ${SPACE_LIMITS.maxPhotos} URLs` })
      .optional()
      .describe(
        '1 to 8 photos of ONE room (JPEG, PNG, WebP; 20 MB or less each), in the order taken from one spot, each overlapping the last. Built by the room engine: a deployment configured without it answers 503 room_engine_unavailable (nothing charged).',
      ),
    videoUrl: uri
      .optional()
      .describe(
        'One slow, level sweep of the room from one spot (MP4, MOV, WebM; 30 s and 100 MB or less, checked when fetched: a longer or larger video fails the job, refunded). Built by the room engine: a deployment configured without it answers 503 room_engine_unavailable (nothing charged).',
      ),
    quality: z
      .enum(SPACE_QUALITIES, { error: 'must be one of preview, full' })
      .optional()
      .describe('Default full (costs more). preview stops at the first tier.'),
    title: line(SPACE_LIMITS.titleMax).optional().describe('Job label, at most 80 characters.'),
  })
  .superRefine((b, ctx) => {
    const given = INPUTS.filter((k) => b[k] !== undefined);
    if (given.length === 1) return;
    const message =
      given.length === 0
        ? 'send exactly one of imageUrl, imageUrls, videoUrl'
        : `send exactly one of imageUrl, imageUrls, videoUrl (got ${given.join(' and ')})`;
    ctx.addIssue({ code: 'custom', message, path: [given[1] ?? 'imageUrl'] });
  })
  .meta({
    id: 'SpaceRequest',
    oneOf: [{ required: ['imageUrl'] }, { required: ['imageUrls'] }, { required: ['videoUrl'] }],
  }); // exactly one, as the refinement says
export type SpaceRequest = z.infer<typeof SpaceRequest>;

/** 202 answer of POST /real-world/spaces (SPEC 2.14 behaviour 4). */
export const SpaceAccepted = JobAccepted.extend({
  source: z.enum(SPACE_SOURCES).describe('What the space is built from: photo (one imageUrl), photos, video.'),
  imagined: z.literal(true).describe('Always true: what the input did not show is generated.'),
}).meta({ id: 'SpaceAccepted' });

/** What the dispatch stores as the job input; the worker builds exactly this (one input per source). */
export const SpacePlan = z.object({
  source: z.enum(SPACE_SOURCES),
  imageUrl: z.string().optional(),
  imageUrls: z.array(z.string()).optional(),
  videoUrl: z.string().optional(),
  quality: z.enum(SPACE_QUALITIES),
  title: z.string().nullable(),
});
export type SpacePlan = z.infer<typeof SpacePlan>;

export const Measurement = z
  .object({
    value: z.number().describe('Metres (square metres for an area).'),
    confidence: z.number().min(0).max(1),
    lowerBound: z
      .boolean()
      .describe('True when the value is a floor because an unseen wall caps what the photo showed.'),
  })
  .meta({ id: 'Measurement' });
export type Measurement = z.infer<typeof Measurement>;

export const SpaceDimensions = z.object({
  widthM: Measurement,
  depthM: Measurement,
  ceilingM: Measurement,
  cameraHeightM: Measurement,
  floorAreaM2: Measurement,
  fovDeg: z.object({ x: z.number(), y: z.number() }).nullable(),
  wallsSeen: z.number().int(),
  summary: z.string(),
});
export type SpaceDimensions = z.infer<typeof SpaceDimensions>;

/** SPEC 2.15: `result` of a `space` job (present at stage preview while processing). */
export const SpaceResult = z
  .object({
    stage: z.enum(['preview', 'space']),
    imagined: z.literal(true),
    source: z.enum(SPACE_SOURCES),
    photoCount: z.number().int(),
    panoramaUrl: z.string().nullable(),
    spaceUrl: z.string().nullable(),
    spaceFullUrl: z.string().nullable(),
    format: z.literal('spz').nullable(),
    metricScale: z.number().nullable(),
    floorOffsetM: z.number().nullable(),
    colliderUrl: z.string().nullable(),
    depthUrl: z.string().nullable(),
    posterUrl: z.string().nullable(),
    gaussians: z.number().int().nullable(),
    dimensions: SpaceDimensions.nullable(),
    engine: z.string(),
    notes: z.array(z.string()),
  })
  .meta({ id: 'SpaceResult' });
export type SpaceResult = z.infer<typeof SpaceResult>;
