import { z } from 'zod';
import { line, text } from './common';

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

export const openUrlOf = (publicBaseUrl: string, kind: ProjectKind, id: string) => `${publicBaseUrl}${OPEN_PATH_OF_KIND[kind]}${id}`;

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
    x: z.number({ error: 'must be a number' }).finite().optional().describe('Canvas position, pixels; laid out top to bottom when omitted.'),
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

/**
 * A flowchart's content: nodes and edges; every edge must reference existing nodes and node ids
 * are unique (400 naming the edge or node otherwise).
 */
export const FlowchartContent = z
  .strictObject({
    nodes: z.array(FlowchartNode, { error: 'must be an array of nodes' }).max(FLOWCHART_MAX_NODES, { error: `must have at most ${FLOWCHART_MAX_NODES} nodes` }),
    edges: z.array(FlowchartEdge, { error: 'must be an array of edges' }).max(FLOWCHART_MAX_EDGES, { error: `must have at most ${FLOWCHART_MAX_EDGES} edges` }).default([]),
  })
  .superRefine((v, ctx) => {
    const ids = new Set<string>();
    v.nodes.forEach((n, i) => {
      if (ids.has(n.id)) ctx.addIssue({ code: 'custom', path: ['nodes', i, 'id'], message: `duplicate node id "${n.id}"` });
      ids.add(n.id);
    });
    v.edges.forEach((e, i) => {
      if (!ids.has(e.from)) ctx.addIssue({ code: 'custom', path: ['edges', i, 'from'], message: `names no node ("${e.from}")` });
      if (!ids.has(e.to)) ctx.addIssue({ code: 'custom', path: ['edges', i, 'to'], message: `names no node ("${e.to}")` });
    });
  })
  .meta({ id: 'FlowchartContent' });
export type FlowchartContent = z.infer<typeof FlowchartContent>;

/** Tags of a project: at most 20, each one line of at most 64 characters. */
export const Tags = z.array(line(64), { error: 'must be an array of strings' }).max(20, { error: 'must have at most 20 tags' });
