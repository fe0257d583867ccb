import { z } from 'zod';
import { httpUrl, line, listEnvelope, listQuery, text, Version } from './common';

/**
 * Projects (SPEC 4.3, 2.7). One collection holds every kind; `kind` says what the project is and
 * `projectType` is SPEC 2.7's coarser enum (flowcharts and whiteboards are `chart`).
 * WARNING: kinds and project types are public contract and persisted.
 */
export const PROJECT_KINDS = ['flowchart', 'whiteboard', 'notes', 'presentation', 'sheet', 'code'] as const;
export type ProjectKind = (typeof PROJECT_KINDS)[number];

/** SPEC 2.7 ChatArtifact.projectType. */
export const PROJECT_TYPES = ['chart', 'notes', 'presentation', 'code', 'sheet', 'simulation'] as const;
export type ProjectType = (typeof PROJECT_TYPES)[number];

export const PROJECT_TYPE_OF_KIND = {
  flowchart: 'chart',
  whiteboard: 'chart',
  notes: 'notes',
  presentation: 'presentation',
  sheet: 'sheet',
  code: 'code',
} as const satisfies Record<ProjectKind, ProjectType>;

/** SPEC 2.7 openUrl path shapes, per kind (made absolute with PUBLIC_BASE_URL). */
export const OPEN_PATH_OF_KIND = {
  flowchart: '/editor/',
  whiteboard: '/editor/',
  notes: '/notes/',
  presentation: '/presentations/',
  sheet: '/sheets/',
  code: '/code-editor/',
} as const satisfies Record<ProjectKind, string>;

export const openUrlOf = (publicBaseUrl: string, kind: ProjectKind, id: string) =>
  `${publicBaseUrl}${OPEN_PATH_OF_KIND[kind]}${id}`;

// ---- Flowchart content -------------------------------------------------------------------

/** Node shapes a flowchart draws. WARNING: persisted in project content. */
export const FLOWCHART_SHAPES = ['start', 'end', 'process', 'decision', 'input', 'output', 'document', 'note'] as const;

/** A flowchart node id: 1 to 64 letters, digits, `_`, `-` (edges refer to nodes by it). */
export const NodeId = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must not be empty' })
  .max(64, { error: 'must be at most 64 characters' })
  .regex(/^[A-Za-z0-9_-]+$/, { error: 'must be letters, digits, _ and -' });

export const FlowchartNode = z
  .strictObject({
    id: NodeId,
    label: text(500).describe('What the step says.'),
    shape: z.enum(FLOWCHART_SHAPES, { error: `must be one of ${FLOWCHART_SHAPES.join(', ')}` }).default('process'),
    x: z
      .number({ error: 'must be a number' })
      .finite()
      .optional()
      .describe('Canvas position, pixels; laid out top to bottom when omitted.'),
    y: z.number({ error: 'must be a number' }).finite().optional(),
  })
  .meta({ id: 'FlowchartNode' });
export type FlowchartNode = z.infer<typeof FlowchartNode>;

export const FlowchartEdge = z
  .strictObject({
    id: NodeId.optional().describe('Assigned (e1, e2, …) when omitted.'),
    from: NodeId.describe('Id of an existing node.'),
    to: NodeId.describe('Id of an existing node.'),
    label: text(200).optional().describe('e.g. yes / no on a decision.'),
  })
  .meta({ id: 'FlowchartEdge' });
export type FlowchartEdge = z.infer<typeof FlowchartEdge>;

/** Most nodes and edges one flowchart holds. */
export const FLOWCHART_MAX_NODES = 500;
export const FLOWCHART_MAX_EDGES = 1000;

/** Node ids are unique and every edge names existing nodes (issues at nodes.N.id, edges.N.from / .to). */
export function checkFlowchart(
  v: { nodes: readonly { id: string }[]; edges: readonly { id?: string; from: string; to: string }[] },
  ctx: z.RefinementCtx,
): void {
  const ids = new Set<string>();
  v.nodes.forEach((n, i) => {
    if (ids.has(n.id))
      ctx.addIssue({ code: 'custom', path: ['nodes', i, 'id'], message: `duplicate node id "${n.id}"` });
    ids.add(n.id);
  });
  const edgeIds = new Set<string>();
  v.edges.forEach((e, i) => {
    if (!ids.has(e.from))
      ctx.addIssue({ code: 'custom', path: ['edges', i, 'from'], message: `names no node ("${e.from}")` });
    if (!ids.has(e.to))
      ctx.addIssue({ code: 'custom', path: ['edges', i, 'to'], message: `names no node ("${e.to}")` });
    if (e.id !== undefined) {
      if (edgeIds.has(e.id))
        ctx.addIssue({ code: 'custom', path: ['edges', i, 'id'], message: `duplicate edge id "${e.id}"` });
      edgeIds.add(e.id);
    }
  });
}

/**
 * A flowchart's content: nodes and edges; every edge must reference existing nodes and node ids
 * are unique (400 naming the edge or node otherwise).
 */
export const FlowchartContent = z
  .strictObject({
    nodes: z
      .array(FlowchartNode, { error: 'must be an array of nodes' })
      .max(FLOWCHART_MAX_NODES, { error: `must have at most ${FLOWCHART_MAX_NODES} nodes` }),
    edges: z
      .array(FlowchartEdge, { error: 'must be an array of edges' })
      .max(FLOWCHART_MAX_EDGES, { error: `must have at most ${FLOWCHART_MAX_EDGES} edges` })
      .default([]),
  })
  .superRefine(checkFlowchart)
  .meta({ id: 'FlowchartContent' });
export type FlowchartContent = z.infer<typeof FlowchartContent>;

/** Tags of a project: at most 20, each one line of at most 64 characters. */
export const Tags = z
  .array(line(64), { error: 'must be an array of strings' })
  .max(20, { error: 'must have at most 20 tags' });

// ---- Limits ------------------------------------------------------------------------------

/**
 * Limits of projects and their content. WARNING: public contract (README, /openapi).
 */
export const PROJECT_LIMITS = {
  nameMax: 255,
  descriptionMax: 2000,
  tagsMax: 20,
  tagMax: 64,
  /** Characters of a search (`q`) on the list. */
  searchMax: 100,
  /** Characters of a notes project's Markdown. */
  notesMax: 200_000,
  /** Elements (shapes, text, images and connectors together) of one whiteboard. */
  whiteboardElementsMax: 1000,
  /** Characters of the text of one whiteboard element. */
  elementTextMax: 5000,
  /** People one project is shared with; the next new email is 409 limit_exceeded. */
  sharesMax: 50,
} as const;

const name = line(PROJECT_LIMITS.nameMax)
  .trim()
  .min(1, { error: 'must not be empty' })
  .describe(`The project's name, 1 to ${PROJECT_LIMITS.nameMax} characters on one line.`);
const description = text(PROJECT_LIMITS.descriptionMax).describe(
  `Free text, at most ${PROJECT_LIMITS.descriptionMax} characters.`,
);
const tags = Tags.describe(
  `At most ${PROJECT_LIMITS.tagsMax} tags of at most ${PROJECT_LIMITS.tagMax} characters each; duplicates are dropped.`,
);

// ---- Whiteboard content ------------------------------------------------------------------

/** Element types of a whiteboard. WARNING: persisted in project content. */
export const WHITEBOARD_ELEMENT_TYPES = ['shape', 'text', 'image', 'connector'] as const;
/** Shapes a `shape` element draws. WARNING: persisted in project content. */
export const WHITEBOARD_SHAPES = ['rectangle', 'rounded', 'ellipse', 'diamond', 'triangle', 'sticky'] as const;

const COLOR = /^(#[0-9a-fA-F]{3}|#[0-9a-fA-F]{4}|#[0-9a-fA-F]{6}|#[0-9a-fA-F]{8}|transparent)$/;
const Color = z
  .string({ error: 'must be a string' })
  .regex(COLOR, { error: 'must be a #rgb, #rgba, #rrggbb or #rrggbbaa colour, or transparent' });
const coord = z
  .number({ error: 'must be a number' })
  .min(-1_000_000, { error: 'must be between -1000000 and 1000000' })
  .max(1_000_000, { error: 'must be between -1000000 and 1000000' });
const size = z
  .number({ error: 'must be a number' })
  .min(1, { error: 'must be between 1 and 100000' })
  .max(100_000, { error: 'must be between 1 and 100000' });

/** How an element is drawn; what is not sent takes the element type's default (stored filled in). */
export const ElementStyle = z
  .strictObject({
    fill: Color.optional().describe(
      'Fill colour; default #ffffff for shapes, #fef08a for sticky notes, transparent for text, images and connectors.',
    ),
    stroke: Color.optional().describe('Outline or line colour; default #1f2937.'),
    strokeWidth: z
      .number({ error: 'must be a number' })
      .min(0, { error: 'must be between 0 and 50' })
      .max(50, { error: 'must be between 0 and 50' })
      .optional()
      .describe('Pixels; default 2 (0 for text).'),
    strokeStyle: z
      .enum(['solid', 'dashed', 'dotted'], { error: 'must be one of solid, dashed, dotted' })
      .optional()
      .describe('Default solid.'),
    opacity: z
      .number({ error: 'must be a number' })
      .min(0, { error: 'must be between 0 and 1' })
      .max(1, { error: 'must be between 0 and 1' })
      .optional()
      .describe('0 to 1; default 1.'),
    textColor: Color.optional().describe('Default #111827.'),
    fontSize: z
      .number({ error: 'must be a number' })
      .min(6, { error: 'must be between 6 and 200' })
      .max(200, { error: 'must be between 6 and 200' })
      .optional()
      .describe('Pixels; default 16.'),
    fontWeight: z.enum(['normal', 'bold'], { error: 'must be normal or bold' }).optional().describe('Default normal.'),
    textAlign: z
      .enum(['left', 'center', 'right'], { error: 'must be one of left, center, right' })
      .optional()
      .describe('Default center (left for text).'),
  })
  .meta({ id: 'WhiteboardElementStyle' });
export type ElementStyle = z.infer<typeof ElementStyle>;

const elementId = NodeId.describe('Unique within the whiteboard; connectors refer to elements by it.');
const placed = {
  id: elementId,
  x: coord.describe('Left edge, canvas pixels (-1000000 to 1000000).'),
  y: coord.describe('Top edge, canvas pixels (-1000000 to 1000000).'),
  width: size
    .optional()
    .describe('Pixels, 1 to 100000; default per type (shape 160, sticky 160, text 240, image 320).'),
  height: size.optional().describe('Pixels, 1 to 100000; default per type (shape 80, sticky 160, text 40, image 240).'),
  rotation: z
    .number({ error: 'must be a number' })
    .min(-360, { error: 'must be between -360 and 360' })
    .max(360, { error: 'must be between -360 and 360' })
    .optional()
    .describe('Degrees clockwise; default 0.'),
  style: ElementStyle.optional(),
};
const elementText = text(PROJECT_LIMITS.elementTextMax);

export const WhiteboardShape = z
  .strictObject({
    type: z.literal('shape'),
    shape: z.enum(WHITEBOARD_SHAPES, { error: `must be one of ${WHITEBOARD_SHAPES.join(', ')}` }).default('rectangle'),
    text: elementText.optional().describe('Text drawn inside the shape.'),
    ...placed,
  })
  .meta({ id: 'WhiteboardShape' });

export const WhiteboardText = z
  .strictObject({
    type: z.literal('text'),
    text: elementText.describe(`The text, at most ${PROJECT_LIMITS.elementTextMax} characters.`),
    ...placed,
  })
  .meta({ id: 'WhiteboardText' });

export const WhiteboardImage = z
  .strictObject({
    type: z.literal('image'),
    url: httpUrl().describe('An absolute http(s) URL of the image, stored as given; the server never fetches it.'),
    alt: line(500).optional().describe('Alternative text.'),
    ...placed,
  })
  .meta({ id: 'WhiteboardImage' });

export const WhiteboardConnector = z
  .strictObject({
    type: z.literal('connector'),
    id: elementId,
    from: elementId.describe('Id of the shape, text or image the connector starts at.'),
    to: elementId.describe('Id of another shape, text or image the connector ends at.'),
    label: line(200).optional().describe('Text on the line.'),
    arrow: z
      .enum(['none', 'end', 'both'], { error: 'must be one of none, end, both' })
      .default('end')
      .describe('Arrow heads; default end.'),
    style: ElementStyle.optional(),
    // Computed by the server; accepted so that content read with GET can be sent back as it is.
    x: coord.optional().describe('Computed: ignored when sent.'),
    y: coord.optional().describe('Computed: ignored when sent.'),
    width: size.optional().describe('Computed: ignored when sent.'),
    height: size.optional().describe('Computed: ignored when sent.'),
    rotation: z.number({ error: 'must be a number' }).optional().describe('Always 0: ignored when sent.'),
  })
  .meta({
    id: 'WhiteboardConnector',
    description:
      'A line between two elements. Its x, y, width and height are computed by the server (the box between the centres of the two ends) and returned; values sent for them are ignored.',
  });

export const WhiteboardElement = z
  .discriminatedUnion('type', [WhiteboardShape, WhiteboardText, WhiteboardImage, WhiteboardConnector], {
    error: `must be one of ${WHITEBOARD_ELEMENT_TYPES.join(', ')}`,
  })
  .meta({ id: 'WhiteboardElement' });
export type WhiteboardElementInput = z.infer<typeof WhiteboardElement>;

const whiteboardShape = {
  background: Color.default('#ffffff').describe('Canvas colour; default #ffffff.'),
  elements: z
    .array(WhiteboardElement, { error: 'must be an array of elements' })
    .max(PROJECT_LIMITS.whiteboardElementsMax, {
      error: `must have at most ${PROJECT_LIMITS.whiteboardElementsMax} elements`,
    })
    .describe(
      `Shapes, text, images and connectors, drawn in this order; at most ${PROJECT_LIMITS.whiteboardElementsMax}.`,
    ),
};

/** Element ids are unique; a connector joins two other existing elements that are not connectors. */
export function checkWhiteboard(
  v: { elements: readonly { id: string; type: string; from?: string; to?: string }[] },
  ctx: z.RefinementCtx,
): void {
  const kinds = new Map<string, string>();
  v.elements.forEach((el, i) => {
    if (kinds.has(el.id))
      ctx.addIssue({ code: 'custom', path: ['elements', i, 'id'], message: `duplicate element id "${el.id}"` });
    else kinds.set(el.id, el.type);
  });
  v.elements.forEach((el, i) => {
    if (el.type !== 'connector') return;
    for (const end of ['from', 'to'] as const) {
      const target = el[end]!;
      const kind = kinds.get(target);
      if (kind === undefined)
        ctx.addIssue({ code: 'custom', path: ['elements', i, end], message: `names no element ("${target}")` });
      else if (kind === 'connector')
        ctx.addIssue({
          code: 'custom',
          path: ['elements', i, end],
          message: `names a connector ("${target}"); connectors join shapes, text and images`,
        });
    }
    if (el.from === el.to)
      ctx.addIssue({ code: 'custom', path: ['elements', i, 'to'], message: 'must name another element than from' });
  });
}

/** A whiteboard's content: the canvas colour and its elements. */
export const WhiteboardContent = z
  .strictObject(whiteboardShape)
  .superRefine(checkWhiteboard)
  .meta({ id: 'WhiteboardContent' });
export type WhiteboardContent = z.infer<typeof WhiteboardContent>;

// ---- Notes content -----------------------------------------------------------------------

const markdown = text(PROJECT_LIMITS.notesMax).describe(
  `CommonMark Markdown, at most ${PROJECT_LIMITS.notesMax} characters.`,
);

/** A notes project's content: Markdown. */
export const NotesContent = z.strictObject({ markdown }).meta({ id: 'NotesContent' });
export type NotesContent = z.infer<typeof NotesContent>;

// ---- Presentation content (read only) ----------------------------------------------------

/** What GET /projects/{id} shows of a presentation (read only; PATCH cannot set it). */
export const PresentationContent = z
  .object({
    generationStatus: z.enum(['generating', 'pending_editor_open']),
    slideMode: z.string(),
    requestedSlides: z.number().int(),
    themeId: z.string().nullable(),
    visualStyle: z.string(),
    brief: z.string().nullable(),
    outline: z.array(z.object({ title: z.string(), bullets: z.array(z.string()) })).nullable(),
    jobId: z.string().nullable().describe('The deck_ job; null when pending_editor_open.'),
    pollUrl: z.string().nullable().describe('Path of the job, /api/v1/jobs/<jobId>.'),
    build: z
      .object({
        status: z.enum(['built', 'partial']),
        builtAt: z.string(),
        manifestUrl: z.string().describe('Signed link to the deck manifest (JSON), freshly signed on each read.'),
        slides: z.array(
          z.object({
            index: z.number().int(),
            title: z.string(),
            bullets: z.array(z.string()),
            status: z.enum(['built', 'failed']),
            imageUrl: z.string().nullable().describe('Signed link, freshly signed on each read.'),
            contentUrl: z.string().nullable(),
            width: z.number().int(),
            height: z.number().int(),
          }),
        ),
      })
      .nullable()
      .describe('Null until the deck job has built the slides.'),
  })
  .meta({ id: 'PresentationContent' });
export type PresentationContent = z.infer<typeof PresentationContent>;

// ---- Creation bodies ---------------------------------------------------------------------

const common = { name, description: description.optional(), tags: tags.optional() };

/** POST /flowcharts. */
export const FlowchartCreate = z
  .strictObject({
    ...common,
    nodes: FlowchartContent.shape.nodes,
    edges: FlowchartContent.shape.edges,
  })
  .superRefine(checkFlowchart)
  .meta({
    id: 'FlowchartCreate',
    description:
      'A flowchart: nodes (ids unique) and edges between them. Nodes without x and y are laid out top to bottom; edges without id get e1, e2, …',
  });
export type FlowchartCreate = z.output<typeof FlowchartCreate>;

/** POST /whiteboards. */
export const WhiteboardCreate = z
  .strictObject({ ...common, ...whiteboardShape })
  .superRefine(checkWhiteboard)
  .meta({ id: 'WhiteboardCreate' });
export type WhiteboardCreate = z.output<typeof WhiteboardCreate>;

/** POST /notes. */
export const NotesCreate = z.strictObject({ ...common, markdown: markdown.default('') }).meta({ id: 'NotesCreate' });
export type NotesCreate = z.output<typeof NotesCreate>;

// ---- Update, share ------------------------------------------------------------------------

/** PATCH /projects/{id}: only the fields sent change. */
export const ProjectUpdate = z
  .strictObject({
    name: name.optional(),
    description: description.optional(),
    tags: tags.optional().describe('Replaces the whole list.'),
    isStarred: z.boolean({ error: 'must be a boolean' }).optional(),
    content: z
      .record(z.string(), z.unknown(), { error: 'must be an object' })
      .optional()
      .describe(
        "Replaces the whole content, validated for the project's kind: FlowchartContent (flowchart), WhiteboardContent (whiteboard), NotesContent (notes). A presentation's or sheet's content is not patchable (400).",
      ),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'name a field to change: name, description, tags, isStarred or content',
  })
  .meta({ id: 'ProjectUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type ProjectUpdate = z.output<typeof ProjectUpdate>;

/** Roles a project is shared with. WARNING: persisted. */
export const SHARE_ROLES = ['viewer', 'commenter', 'editor'] as const;
export type ShareRole = (typeof SHARE_ROLES)[number];

/** POST /projects/{id}/share. */
export const ProjectShareRequest = z
  .strictObject({
    email: z
      .email({ error: 'must be an email address' })
      .max(254, { error: 'must be at most 254 characters' })
      .transform((s) => s.toLowerCase())
      .describe('Who to share with; compared case-insensitively and stored in lower case.'),
    role: z
      .enum(SHARE_ROLES, { error: `must be one of ${SHARE_ROLES.join(', ')}` })
      .describe('viewer reads, commenter reads and comments, editor changes the project.'),
  })
  .meta({ id: 'ProjectShareRequest' });
export type ProjectShareRequest = z.output<typeof ProjectShareRequest>;

export const ProjectShare = z
  .object({
    email: z.string(),
    role: z.enum(SHARE_ROLES),
    sharedAt: z.string().describe('When this email was first shared with.'),
  })
  .meta({ id: 'ProjectShare' });

// ---- Responses, list query ---------------------------------------------------------------

export const ProjectSummary = z
  .object({
    id: z.string().describe('prj_ followed by a random part.'),
    name: z.string(),
    description: z.string(),
    projectType: z.enum(PROJECT_TYPES).describe('SPEC 2.7: flowcharts and whiteboards are chart.'),
    kind: z.enum(PROJECT_KINDS),
    tags: z.array(z.string()),
    isStarred: z.boolean(),
    version: Version,
    createdAt: z.string(),
    updatedAt: z.string(),
    openUrl: z
      .string()
      .describe(
        'Absolute editor link: /editor/{id} (flowchart, whiteboard), /notes/{id}, /presentations/{id}, /sheets/{id}, /code-editor/{id}.',
      ),
  })
  .meta({ id: 'ProjectSummary' });

export const Project = ProjectSummary.extend({
  content: z
    .union([FlowchartContent, WhiteboardContent, NotesContent, PresentationContent, z.record(z.string(), z.unknown())])
    .nullable()
    .describe(
      "The kind's content: FlowchartContent, WhiteboardContent (connector boxes and style defaults filled in), NotesContent, PresentationContent (read only); a sheet's grid is read at /sheets/{id}.",
    ),
  shares: z.array(ProjectShare).describe('People the project is shared with (POST /projects/{id}/share).'),
}).meta({ id: 'Project' });

export const ProjectList = listEnvelope(ProjectSummary).meta({ id: 'ProjectList' });

export const PROJECT_SORTS = ['updatedAt', 'createdAt', 'name'] as const;

/** GET /projects. */
export const ProjectListQuery = listQuery({
  projectType: z
    .enum(PROJECT_TYPES, { error: `must be one of ${PROJECT_TYPES.join(', ')}` })
    .optional()
    .describe('SPEC 2.7 project type.'),
  kind: z.enum(PROJECT_KINDS, { error: `must be one of ${PROJECT_KINDS.join(', ')}` }).optional(),
  tag: line(PROJECT_LIMITS.tagMax).optional().describe('Only projects carrying this tag (exact).'),
  q: line(PROJECT_LIMITS.searchMax)
    .optional()
    .describe(
      `Case-insensitive substring of the name, at most ${PROJECT_LIMITS.searchMax} characters; blank is ignored.`,
    ),
  starred: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .describe('Only starred (true) or unstarred (false) projects.'),
  sort: z
    .enum(PROJECT_SORTS, { error: `must be one of ${PROJECT_SORTS.join(', ')}` })
    .default('updatedAt')
    .describe('Sort field; default updatedAt.'),
  order: z
    .enum(['desc', 'asc'], { error: 'must be desc or asc' })
    .optional()
    .describe('Default desc for updatedAt and createdAt (newest first), asc for name (A to Z, by code point).'),
});
export type ProjectListQuery = z.output<typeof ProjectListQuery>;
