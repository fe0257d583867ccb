import { z } from 'zod';
import { JobAccepted } from './common';
import { httpUrl, intBetween, text } from './common';

/** SPEC 2.12 enums. WARNING: public contract. */
export const VIDEO_ASPECT_RATIOS = ['21:9', '16:9', '4:3', '1:1', '3:4', '9:16'] as const;
export type VideoAspectRatio = (typeof VIDEO_ASPECT_RATIOS)[number];
export const VIDEO_TIERS = ['fast', 'max', 'cinema', 'cinema-ultra'] as const;
export type VideoTier = (typeof VIDEO_TIERS)[number];
export const VIDEO_RESOLUTIONS = ['480p', '720p', '1080p', '4k'] as const;
export type VideoResolution = (typeof VIDEO_RESOLUTIONS)[number];

/**
 * What each tier can serve (SPEC 2.12). Standard tiers: 16:9 or 9:16 only, always 1080p, a fixed
 * clip of about 8 s, 1 reference image. `cinema`: up to 4k and 15 s, 9 references.
 * `cinema-ultra`: up to 720p and 30 s, 30 references.
 */
export const VIDEO_TIER_LIMITS: Record<
  VideoTier,
  {
    premium: boolean;
    aspectRatios: readonly VideoAspectRatio[];
    maxResolution: VideoResolution;
    defaultResolution: VideoResolution;
    maxSeconds: number;
    defaultSeconds: number;
    referenceBudget: number;
    fps: number;
  }
> = {
  fast: {
    premium: false,
    aspectRatios: ['16:9', '9:16'],
    maxResolution: '1080p',
    defaultResolution: '1080p',
    maxSeconds: 8,
    defaultSeconds: 8,
    referenceBudget: 1,
    fps: 24,
  },
  max: {
    premium: false,
    aspectRatios: ['16:9', '9:16'],
    maxResolution: '1080p',
    defaultResolution: '1080p',
    maxSeconds: 8,
    defaultSeconds: 8,
    referenceBudget: 1,
    fps: 24,
  },
  cinema: {
    premium: true,
    aspectRatios: VIDEO_ASPECT_RATIOS,
    maxResolution: '4k',
    defaultResolution: '1080p',
    maxSeconds: 15,
    defaultSeconds: 8,
    referenceBudget: 9,
    fps: 24,
  },
  'cinema-ultra': {
    premium: true,
    aspectRatios: VIDEO_ASPECT_RATIOS,
    maxResolution: '720p',
    defaultResolution: '720p',
    maxSeconds: 30,
    defaultSeconds: 8,
    referenceBudget: 30,
    fps: 24,
  },
};

/** Short side in pixels per resolution. */
export const RESOLUTION_LINES: Record<VideoResolution, number> = {
  '480p': 480,
  '720p': 720,
  '1080p': 1080,
  '4k': 2160,
};

const uri = httpUrl();

/** SPEC 2.12 request of POST /videos. */
export const VideoRequest = z
  .strictObject({
    prompt: text(4000).min(1, { error: 'must not be empty' }).describe('What happens in the clip.'),
    aspectRatio: z
      .enum(VIDEO_ASPECT_RATIOS, { error: `must be one of ${VIDEO_ASPECT_RATIOS.join(', ')}` })
      .optional()
      .describe(
        'Default 16:9. Standard tiers render only 16:9 and 9:16; another shape resolves to the nearest of those (note).',
      ),
    modelTier: z
      .enum(VIDEO_TIERS, { error: `must be one of ${VIDEO_TIERS.join(', ')}` })
      .optional()
      .describe(
        'Default max. cinema and cinema-ultra need the workspace premium-video feature; elsewhere max, with a note.',
      ),
    resolution: z
      .enum(VIDEO_RESOLUTIONS, { error: `must be one of ${VIDEO_RESOLUTIONS.join(', ')}` })
      .optional()
      .describe(
        'Premium tiers only (standard tiers always render 1080p). cinema reaches 4k (default 1080p); cinema-ultra tops out at 720p.',
      ),
    clipSeconds: intBetween(4, 30)
      .optional()
      .describe(
        '4 to 30. Premium tiers only (standard tiers render about 8 s). cinema reaches 15, cinema-ultra 30; above the ceiling it clamps (note). Default 8.',
      ),
    referenceImageUrls: z
      .array(uri, { error: 'must be an array of URLs' })
      .max(30, { error: 'at most 30 URLs' })
      .optional()
      .describe(
        'One: the opening frame. Several: how the subject looks. Trimmed to the tier budget (1 / 9 / 30), with a note.',
      ),
    referenceImageUrl: uri
      .optional()
      .describe('Single first-frame anchor (compatibility). When both are given, this one goes first.'),
  })
  .meta({ id: 'VideoRequest' });
export type VideoRequest = z.infer<typeof VideoRequest>;

/** What the request resolves to: stored as the job input; the worker renders exactly this. */
export const VideoPlan = z.object({
  prompt: z.string(),
  tier: z.enum(VIDEO_TIERS),
  aspectRatio: z.enum(VIDEO_ASPECT_RATIOS),
  resolution: z.enum(VIDEO_RESOLUTIONS),
  width: z.number().int(),
  height: z.number().int(),
  clipSeconds: z.number().int(),
  fps: z.number().int(),
  /** The opening frame, when exactly one reference survived. */
  openingFrameUrl: z.string().nullable(),
  /** Subject references, when several survived. */
  referenceImageUrls: z.array(z.string()),
  notes: z.array(z.string()),
  seed: z.number().int(),
});
export type VideoPlan = z.infer<typeof VideoPlan>;

/** 202 answer of POST /videos: the job envelope plus the notes of stepped-down knobs. */
export const VideoAccepted = JobAccepted.extend({
  notes: z
    .array(z.string())
    .describe('Why a knob was stepped down (tier, shape, resolution, length, references). Empty when nothing was.'),
}).meta({ id: 'VideoAccepted' });

/** `result` of a complete `video` job. */
export const VideoResult = z
  .object({
    videoUrl: z.string().describe('Absolute, public, signed URL of the MP4 (H.264); served with HTTP Range.'),
    posterUrl: z.string().describe('Absolute, public, signed URL of a PNG poster frame.'),
    mimeType: z.literal('video/mp4'),
    width: z.number().int().describe('Real width of the file produced (ffprobe).'),
    height: z.number().int().describe('Real height of the file produced (ffprobe).'),
    durationSeconds: z.number().describe('Real duration of the file produced (ffprobe).'),
    fps: z.number(),
    sizeBytes: z.number().int(),
    tier: z.enum(VIDEO_TIERS),
    aspectRatio: z.enum(VIDEO_ASPECT_RATIOS),
    resolution: z.enum(VIDEO_RESOLUTIONS).describe('Resolution the tier served (the plan).'),
    clipSeconds: z.number().int().describe('Clip length the tier served (the plan).'),
    engine: z.string().describe('What rendered it, e.g. local-ffmpeg-v1 or openai-compatible:sora-2.'),
    openingFrameUsed: z.boolean(),
    referenceImagesUsed: z.number().int(),
    notes: z.array(z.string()),
  })
  .meta({ id: 'VideoResult' });
export type VideoResult = z.infer<typeof VideoResult>;
