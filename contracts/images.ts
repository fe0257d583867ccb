import { z } from 'zod';
import { httpUrl, intBetween, text } from './common';

/**
 * SPEC 2.10 and 2.11: synchronous image generation. Both endpoints hand the render to the image
 * pool over RabbitMQ request/reply (ARCHITECTURE) and answer 200 with the finished image.
 */

/** SPEC 2.10 engine names. WARNING: public contract. */
export const IMAGE_ENGINES = [
  'auto',
  'svc-creative',
  'svc-imagine',
  'svc-photo',
  'svc-rapid',
  'svc-design',
  'svc-studio',
  'svc-type',
  'svc-ultra',
  'partner-svc',
] as const;
export type ImageEngineName = (typeof IMAGE_ENGINES)[number];

/** SPEC 2.10 aspect ratios. */
export const IMAGE_ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4'] as const;
export type ImageAspectRatio = (typeof IMAGE_ASPECT_RATIOS)[number];

/** Exact pixel size rendered per /images aspect ratio (multiples of 64, about one megapixel). */
export const IMAGE_SIZES: Record<ImageAspectRatio, { width: number; height: number }> = {
  '1:1': { width: 1024, height: 1024 },
  '16:9': { width: 1344, height: 768 },
  '9:16': { width: 768, height: 1344 },
  '4:3': { width: 1152, height: 896 },
  '3:4': { width: 896, height: 1152 },
};

/** SPEC 8: at most 5 reference images. */
export const MAX_REFERENCE_IMAGES = 5;

const url = (field: string) => httpUrl(`${field} must be an absolute http(s) URL`);

/** SPEC 2.10 request of POST /images. */
export const ImageRequest = z
  .strictObject({
    prompt: text(4000).min(1, { error: 'must not be empty' }).describe('What to draw.'),
    engine: z
      .enum(IMAGE_ENGINES, { error: `must be one of ${IMAGE_ENGINES.join(', ')}` })
      .optional()
      .describe(
        'Default svc-ultra on paid plans. A Free-plan call falls back to svc-creative (with a note); an explicit svc-ultra on Free is 403. partner-svc only where the workspace enables partner images, else the default with a note.',
      ),
    aspectRatio: z
      .enum(IMAGE_ASPECT_RATIOS, { error: `must be one of ${IMAGE_ASPECT_RATIOS.join(', ')}` })
      .optional()
      .describe('Default 1:1. Sizes: 1:1 1024x1024, 16:9 1344x768, 9:16 768x1344, 4:3 1152x896, 3:4 896x1152.'),
    style: text(200).optional().describe('Free-text style, e.g. "watercolour"; shapes palette and texture.'),
    referenceImageUrls: z
      .array(url('each item'), { error: 'must be an array of URLs' })
      .max(MAX_REFERENCE_IMAGES, { error: `at most ${MAX_REFERENCE_IMAGES} URLs` })
      .optional()
      .describe(
        'Up to 5 public http(s) images; their colours steer the palette. Each is fetched through the SSRF guard.',
      ),
    includeBase64: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('Also return the PNG inline as a data URL in `base64`.'),
  })
  .meta({ id: 'ImageRequest' });
export type ImageRequest = z.infer<typeof ImageRequest>;

/** 200 answer of POST /images. */
export const ImageResult = z
  .object({
    url: z.string().describe('Absolute, public, signed URL of the PNG (valid ASSET_URL_TTL_SECONDS).'),
    mimeType: z.literal('image/png'),
    width: z.number().int().describe('Exact pixel width of the PNG.'),
    height: z.number().int().describe('Exact pixel height of the PNG.'),
    aspectRatio: z.enum(IMAGE_ASPECT_RATIOS),
    engine: z
      .enum(IMAGE_ENGINES)
      .describe('The engine that served the request after plan and workspace rules (never auto).'),
    renderer: z
      .string()
      .describe('What actually drew the pixels, e.g. local-scene-v2 or openai-compatible:gpt-image-1.'),
    style: z.string().nullable(),
    seed: z
      .number()
      .int()
      .describe('Seed of the render (the local renderer reproduces a render from prompt, engine, style and seed).'),
    sizeBytes: z.number().int(),
    referenceImagesUsed: z.number().int().describe('Reference images fetched and used for the palette.'),
    notes: z.array(z.string()).describe('Plain-language notes: engine fallbacks, provider size changes.'),
    base64: z.string().optional().describe('data:image/png;base64,… when includeBase64 was true.'),
    charged: z.number().describe('Credits charged for this render.'),
  })
  .meta({ id: 'ImageResult' });
export type ImageResult = z.infer<typeof ImageResult>;

/** SPEC 2.11 aspect ratios of the in-house model. */
export const MOONLIGHT_ASPECT_RATIOS = ['1:1', '3:4', '4:3', '2:3', '3:2', '9:16', '16:9'] as const;
export type MoonlightAspectRatio = (typeof MOONLIGHT_ASPECT_RATIOS)[number];

/**
 * Exact size per aspect ratio: every shape about one megapixel (0.98 to 1.05 MP), both sides
 * multiples of 32 (of 64 except 2:3 and 3:2, kept exact at 832x1248 and 1248x832).
 * WARNING: public contract (documented sizes).
 */
export const MOONLIGHT_SIZES: Record<MoonlightAspectRatio, { width: number; height: number }> = {
  '1:1': { width: 1024, height: 1024 },
  '3:4': { width: 896, height: 1152 },
  '4:3': { width: 1152, height: 896 },
  '2:3': { width: 832, height: 1248 },
  '3:2': { width: 1248, height: 832 },
  '9:16': { width: 768, height: 1344 },
  '16:9': { width: 1344, height: 768 },
};

/** Render defaults of the in-house model (SPEC 2.11). */
export const MOONLIGHT_DEFAULTS = { aspectRatio: '1:1', steps: 8, cfg: 1 } as const;
export const MOONLIGHT_MAX_SEED = 999_999_999;

/** SPEC 2.11 request of POST /images/moonlight. */
export const MoonlightRequest = z
  .strictObject({
    prompt: text(1500)
      .min(1, { error: 'must not be empty' })
      .describe('Scene: subject, composition, lighting, style. Safe-for-work only: adult content is refused with 400.'),
    negativePrompt: text(1000)
      .refine((v) => v.trim() === '', { error: 'is not used by this model; omit it or send an empty string' })
      .meta({ pattern: '^\\s*$' }) // the refinement above (blank holds no NUL either)
      .optional()
      .describe('Unused by the model. Omit or send an empty string; a non-empty value is refused with 400.'),
    aspectRatio: z
      .enum(MOONLIGHT_ASPECT_RATIOS, { error: `must be one of ${MOONLIGHT_ASPECT_RATIOS.join(', ')}` })
      .optional()
      .describe(
        'Default 1:1. Sizes: 1:1 1024x1024, 3:4 896x1152, 4:3 1152x896, 2:3 832x1248, 3:2 1248x832, 9:16 768x1344, 16:9 1344x768.',
      ),
    seed: intBetween(0, MOONLIGHT_MAX_SEED)
      .optional()
      .describe('0 to 999999999; omitted gives a random seed. The same seed and prompt give a byte-identical PNG.'),
  })
  .meta({ id: 'MoonlightRequest' });
export type MoonlightRequest = z.infer<typeof MoonlightRequest>;

/** SPEC 2.11 result (every field required). */
export const MoonlightResult = z
  .object({
    engine: z
      .string()
      .describe(
        'Model that rendered, e.g. moonlight-scene-v2 (offline stand-in) or remote:<model> (MOONLIGHT_ENGINE=remote).',
      ),
    base64: z.string().describe('The PNG as a data URL (data:image/png;base64,…). Nothing is stored.'),
    mimeType: z.literal('image/png'),
    width: z.number().int(),
    height: z.number().int(),
    aspectRatio: z.enum(MOONLIGHT_ASPECT_RATIOS),
    seed: z.number().int().describe('Seed actually used.'),
    steps: z.number().int(),
    cfg: z.number().describe('Guidance scale.'),
    prompt: z.string(),
    negativePrompt: z.string().describe('Empty when none was sent.'),
    renderMs: z.number().int().describe('Render wall-clock milliseconds.'),
  })
  .meta({ id: 'MoonlightResult' });
export type MoonlightResult = z.infer<typeof MoonlightResult>;

/**
 * The image pool's request/reply messages. Internal (API → image pool), not public, but both
 * sides validate them with this schema.
 */
export const ImageRpcRequest = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('image'),
    accountId: z.string(),
    prompt: z.string(),
    engine: z.enum(IMAGE_ENGINES),
    aspectRatio: z.enum(IMAGE_ASPECT_RATIOS),
    style: z.string().nullable(),
    referenceImageUrls: z.array(z.string()),
    includeBase64: z.boolean(),
    notes: z.array(z.string()),
  }),
  z.object({
    kind: z.literal('moonlight'),
    prompt: z.string(),
    negativePrompt: z.string(),
    aspectRatio: z.enum(MOONLIGHT_ASPECT_RATIOS),
    seed: z.number().int(),
  }),
]);
export type ImageRpcRequest = z.infer<typeof ImageRpcRequest>;

/**
 * The documented adult-content prompt classifier of POST /images/moonlight (400 adult_content):
 * a prompt is adult when it holds one of ADULT_TERMS as a whole word (case-insensitive), or one of
 * ADULT_PHRASES. The output scorer that follows the render is described in
 * workers/engines/images/safety.ts.
 */
export const ADULT_TERMS = [
  'nude',
  'nudes',
  'nudity',
  'naked',
  'nsfw',
  'porn',
  'porno',
  'pornographic',
  'pornography',
  'xxx',
  'erotic',
  'erotica',
  'sex',
  'sexual',
  'sexually',
  'sexy',
  'topless',
  'bottomless',
  'hentai',
  'fetish',
  'genital',
  'genitals',
  'orgasm',
  'stripper',
  'striptease',
  'lewd',
  'obscene',
  'explicit',
  'onlyfans',
  'bdsm',
] as const;
export const ADULT_PHRASES = [
  'adult content',
  'adult film',
  'adults only',
  'without clothes',
  'no clothes',
  'fully undressed',
] as const;

const termSet = new Set<string>(ADULT_TERMS);

/** The adult term or phrase found in `prompt`, or null. */
export function adultTermIn(prompt: string): string | null {
  const p = prompt.toLowerCase();
  for (const w of p.match(/[a-z]+/g) ?? []) if (termSet.has(w)) return w;
  const squashed = p.replace(/[^a-z]+/g, ' ');
  for (const phrase of ADULT_PHRASES) if (squashed.includes(phrase)) return phrase;
  return null;
}
