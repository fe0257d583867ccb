import { z } from 'zod';
import { JobEnvelope, intBetween, line, text } from './common';

export const SLIDE_MODES = ['creator', 'content'] as const;
export type SlideMode = (typeof SLIDE_MODES)[number];

/** Built-in themes (`themeId`). WARNING: ids are public and persisted on projects. */
export const THEME_IDS = ['default', 'midnight', 'sunrise', 'forest', 'ocean', 'mono'] as const;

export const OutlineItem = z.strictObject({
  title: text(200).trim().min(1, { error: 'must not be empty' }),
  bullets: z
    .array(text(500), { error: 'must be an array of strings' })
    .max(12, { error: 'must have at most 12 bullets' }),
});
export type OutlineItem = z.infer<typeof OutlineItem>;

/** SPEC 2.5. Rule: either `brief` or a non-empty `outline`. */
export const PresentationRequest = z
  .strictObject({
    name: line(255).trim().min(1, { error: 'must not be empty' }).describe('Deck title.'),
    description: text(2000).optional(),
    brief: text(20_000).optional().describe('Preferred. The outline is authored from it.'),
    outline: z
      .array(OutlineItem, { error: 'must be an array of {title, bullets}' })
      .max(30, { error: 'must have at most 30 slides' })
      .optional()
      .describe('Explicit slides used as written. Omit when brief is passed.'),
    slideCount: intBetween(3, 30)
      .optional()
      .describe('Default 8. Applies to brief-authored outlines; ignored with outline.'),
    themeId: z
      .enum(THEME_IDS, { error: `must be one of ${THEME_IDS.join(', ')}` })
      .optional()
      .describe('Built-in theme id.'),
    visualStyle: text(100).optional().describe('Image art style; default illustration.'),
    slideMode: z
      .enum(SLIDE_MODES, { error: 'must be one of creator, content' })
      .optional()
      .describe('creator (default): every slide is a designed image. content: editable text over image backgrounds.'),
    brandUrl: line(2048)
      .optional()
      .describe('Brand homepage; the theme colours are extracted from it (fetched through the SSRF guard).'),
    companyName: line(255).optional().describe('Brand display name, used with brandUrl.'),
    tags: z
      .array(line(64), { error: 'must be an array of strings' })
      .max(20, { error: 'must have at most 20 tags' })
      .optional(),
  })
  .superRefine((v, ctx) => {
    const hasBrief = typeof v.brief === 'string' && v.brief.trim().length > 0;
    const hasOutline = Array.isArray(v.outline) && v.outline.length > 0;
    if (!hasBrief && !hasOutline) {
      ctx.addIssue({
        code: 'custom',
        path: ['brief'],
        message: 'is required when outline is missing or empty: pass brief or a non-empty outline',
      });
    }
  })
  .meta({ id: 'PresentationRequest' }); // the refinement is in /openapi as anyOf (contracts/openapi.ts override), not in the MCP tool's top level
export type PresentationRequest = z.infer<typeof PresentationRequest>;

/** SPEC 2.6. */
export const PresentationCreated = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    projectType: z.literal('presentation'),
    canvasMode: z.string().describe('creator or content: how slides are edited.'),
    tags: z.array(z.string()),
    isStarred: z.boolean(),
    createdAt: z.string().nullable(),
    updatedAt: z.string().nullable(),
    generationStatus: z.enum(['generating', 'pending_editor_open']),
    openUrl: z.string().describe('Absolute editor link.'),
    job: JobEnvelope.nullable().describe('The deck_ job; null when generationStatus is pending_editor_open.'),
  })
  .meta({ id: 'PresentationCreated' });
export type PresentationCreated = z.infer<typeof PresentationCreated>;

export const DeckTheme = z.object({
  id: z.string(),
  source: z.enum(['builtin', 'brand']),
  background: z.string(),
  surface: z.string(),
  text: z.string(),
  accent: z.string(),
});
export type DeckTheme = z.infer<typeof DeckTheme>;

export const DeckSlide = z.object({
  index: z.number().int().describe('0-based.'),
  title: z.string(),
  bullets: z.array(z.string()),
  status: z.enum(['built', 'failed']),
  imageUrl: z.string().nullable().describe('creator: the designed slide; content: the background image.'),
  contentUrl: z.string().nullable().describe('content mode: the editable slide JSON (text boxes over the background).'),
  width: z.number().int(),
  height: z.number().int(),
  error: z.string().nullable(),
});
export type DeckSlide = z.infer<typeof DeckSlide>;

/** Result of a complete `deck` job. */
export const DeckResult = z
  .object({
    projectId: z.string(),
    name: z.string(),
    engine: z.string(),
    slideMode: z.enum(SLIDE_MODES),
    slideCount: z.number().int().describe('Slides built.'),
    requestedSlides: z.number().int(),
    partial: z.boolean().describe('True when some slides were not built.'),
    theme: DeckTheme,
    slides: z.array(DeckSlide),
    openUrl: z.string(),
    notes: z.array(z.string()),
  })
  .meta({ id: 'DeckResult' });
export type DeckResult = z.infer<typeof DeckResult>;

/** What the API hands the deck pool (job `input`). WARNING: persisted in job documents. */
export const DeckJobInput = z.object({
  projectId: z.string(),
  name: z.string(),
  description: z.string().optional(),
  brief: z.string().nullable(),
  outline: z.array(OutlineItem).nullable(),
  slideCount: z.number().int(),
  slideMode: z.enum(SLIDE_MODES),
  themeId: z.string().nullable(),
  visualStyle: z.string(),
  brandUrl: z.string().nullable(),
  companyName: z.string().nullable(),
});
export type DeckJobInput = z.infer<typeof DeckJobInput>;
