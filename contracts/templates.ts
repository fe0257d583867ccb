import { z } from 'zod';
import { line, listEnvelope, listQuery, text } from './common';
import { PROJECT_KINDS, PROJECT_LIMITS, PROJECT_TYPES, Tags } from './projects';

/**
 * Templates (SPEC 4.3): a built-in set of ready-made projects across kinds (flowcharts, whiteboards,
 * notes, sheets). GET /templates lists
 * them with a preview; POST /templates/{id}/use makes a new project of the caller's account from one.
 * WARNING: template ids are public contract (stable, readable: tpl_hiring_process).
 */
export const TemplatePreview = z
  .object({
    summary: z.string().describe('One line saying what the template makes, e.g. "9 steps, 2 decisions".'),
    counts: z
      .record(z.string(), z.number().int())
      .describe(
        'Counts of what the content holds: nodes, edges, decisions (flowchart); elements, shapes, text, images, connectors (whiteboard); words, headings, lines (notes); columns, rows (sheet).',
      ),
    firstLines: z.array(z.string()).describe('The first few labels or lines of the content.'),
    previewSvg: z
      .string()
      .describe(
        'A picture of the content: an SVG image as a data: URL (data:image/svg+xml;base64,…), usable as an <img> src.',
      ),
  })
  .meta({ id: 'TemplatePreview' });
export type TemplatePreview = z.infer<typeof TemplatePreview>;

export const Template = z
  .object({
    id: z.string().describe('Stable, readable id, e.g. tpl_hiring_process.'),
    name: z.string().describe('Also the name of a project made from it when the use request names none.'),
    description: z.string(),
    kind: z.enum(PROJECT_KINDS),
    projectType: z.enum(PROJECT_TYPES),
    tags: z.array(z.string()).describe('Given to the project made from it unless the use request sends tags.'),
    preview: TemplatePreview,
    content: z
      .record(z.string(), z.unknown())
      .describe(
        'The content a project made from it starts with: FlowchartContent, WhiteboardContent, NotesContent, or for a sheet { columns: [{ name, type }], rows: [[cell, …], …] } (the grid POST /sheets takes).',
      ),
  })
  .meta({ id: 'Template' });
export type Template = z.infer<typeof Template>;

export const TemplateList = listEnvelope(Template).meta({ id: 'TemplateList' });

/** GET /templates. */
export const TemplateListQuery = listQuery({
  kind: z.enum(PROJECT_KINDS, { error: `must be one of ${PROJECT_KINDS.join(', ')}` }).optional(),
  projectType: z.enum(PROJECT_TYPES, { error: `must be one of ${PROJECT_TYPES.join(', ')}` }).optional(),
});
export type TemplateListQuery = z.output<typeof TemplateListQuery>;

/** POST /templates/{id}/use: every field optional (send {} to take the template's name and tags). */
export const TemplateUse = z
  .strictObject({
    name: line(PROJECT_LIMITS.nameMax)
      .trim()
      .min(1, { error: 'must not be empty' })
      .optional()
      .describe("The new project's name; default the template's name."),
    description: text(PROJECT_LIMITS.descriptionMax).optional().describe("Default the template's description."),
    tags: Tags.optional().describe("Default the template's tags."),
  })
  .meta({ id: 'TemplateUse' });
export type TemplateUse = z.output<typeof TemplateUse>;
