import { z } from 'zod';
import { line, text } from '../../../contracts/common';
import {
  FlowchartContent,
  NotesContent,
  PROJECT_LIMITS,
  WhiteboardContent,
  type FlowchartContent as Flowchart,
} from '../../../contracts/projects';
import { AppError, notFound } from '../../infra/errors';
import { createProjectsService } from '../../projects/projects.service';
import { kindOf, versionOf } from '../../projects/projects.repository';
import type { Runtime } from '../../runtime';
import { parseOrThrow } from '../../infra/validation';
import type { ToolDefinition } from '../tool';
import { projectArtifact } from './artifacts';
import { flowchartFromSteps, insertSteps } from './flowchart';

const title = line(PROJECT_LIMITS.nameMax)
  .trim()
  .min(1, { error: 'must not be empty' })
  .describe('Title of what is made, one line.');
const step = line(500).trim().min(1, { error: 'must not be empty' });
const markdown = text(PROJECT_LIMITS.notesMax)
  .min(1, { error: 'must not be empty' })
  .describe('CommonMark Markdown: a heading, then the content.');

/** Tries of add_flowchart_steps against concurrent changes of the same chart. */
const UPDATE_TRIES = 5;

/** Project-backed tools: flowcharts, whiteboards, notes and documents (stored as notes). */
// Length: a list of tool definitions (input schemas and descriptions) sharing the services built above them;
// the longest run is 38 lines.
export function projectTools(rt: Runtime): ToolDefinition[] {
  const projects = createProjectsService(rt);
  const base = rt.config.PUBLIC_BASE_URL;

  const createFlowchart: ToolDefinition<{ title: string; steps: string[] }> = {
    name: 'create_flowchart',
    description:
      'Create a flowchart project from its steps in order. A step that ends with "?" is a decision (yes goes on, no goes back a step).',
    input: z.strictObject({
      title,
      steps: z
        .array(step, { error: 'must be an array of step labels' })
        .min(2, { error: 'must have at least 2 steps' })
        .max(30, { error: 'must have at most 30 steps' })
        .describe('2 to 30 step labels, in order; decisions end with "?".'),
    }),
    scope: 'ai',
    spends: [],
    async run(args, ctx) {
      const content = parseOrThrow(FlowchartContent, flowchartFromSteps(args.steps));
      const doc = await projects.create({
        accountId: ctx.account._id,
        kind: 'flowchart',
        name: args.title,
        content,
        idFor: ctx.idFor,
      });
      return projectArtifact({
        type: 'flowchart',
        title: doc.name,
        kind: 'flowchart',
        projectId: doc._id,
        publicBaseUrl: base,
        data: { stepCount: args.steps.length },
      });
    },
  };

  const addFlowchartSteps: ToolDefinition<{ projectId: string; steps: string[]; after?: string }> = {
    name: 'add_flowchart_steps',
    description:
      'Add steps to an existing flowchart (projectId from an earlier flowchart artifact), after the step labelled `after` or at the end.',
    input: z.strictObject({
      projectId: line(64).min(1, { error: 'must not be empty' }).describe('The flowchart project id (prj_…).'),
      steps: z
        .array(step, { error: 'must be an array of step labels' })
        .min(1, { error: 'must have at least 1 step' })
        .max(30, { error: 'must have at most 30 steps' }),
      after: line(500)
        .trim()
        .min(1, { error: 'must not be empty' })
        .optional()
        .describe('Label of the step the new ones follow; default the end of the chart.'),
    }),
    scope: 'write',
    spends: [],
    async run(args, ctx) {
      const accountId = ctx.account._id;
      // The new nodes' ids carry the call's id: a repeated call (after a crash) finds them and changes nothing.
      const mark = ctx.idFor('fcs');
      for (let attempt = 1; ; attempt++) {
        const doc = await projects.repository.forAccount(accountId).get(args.projectId);
        if (!doc) throw notFound('project');
        if (kindOf(doc) !== 'flowchart')
          throw new AppError('validation_error', `projectId: ${args.projectId} is a ${kindOf(doc)}, not a flowchart`);
        const artifact = () =>
          projectArtifact({
            type: 'flowchart',
            title: doc.name,
            kind: 'flowchart',
            projectId: doc._id,
            publicBaseUrl: base,
            data: { stepsAdded: args.steps.length },
          });
        const content = (doc.content ?? { nodes: [], edges: [] }) as Flowchart;
        if (content.nodes.some((n) => n.id.startsWith(`${mark}-`))) return artifact();
        const next = insertSteps(content, args.steps, args.after, mark);
        try {
          await projects.update(accountId, doc._id, { content: next }, versionOf(doc));
          return artifact();
        } catch (err) {
          if (err instanceof AppError && err.code === 'version_conflict' && attempt < UPDATE_TRIES) continue;
          throw err;
        }
      }
    },
  };

  const createWhiteboard: ToolDefinition<{ title: string; notes?: string[] }> = {
    name: 'create_whiteboard',
    description: 'Create a whiteboard with a title and optional sticky notes.',
    input: z.strictObject({
      title,
      notes: z
        .array(line(PROJECT_LIMITS.elementTextMax).trim().min(1, { error: 'must not be empty' }), {
          error: 'must be an array of strings',
        })
        .max(100, { error: 'must have at most 100 notes' })
        .optional()
        .describe('Sticky notes, placed four to a row.'),
    }),
    scope: 'ai',
    spends: [],
    async run(args, ctx) {
      const notes = args.notes ?? [];
      const elements = [
        {
          type: 'text',
          id: 'title',
          text: args.title,
          x: 40,
          y: 20,
          width: 720,
          style: { fontSize: 28, fontWeight: 'bold' },
        },
        ...notes.map((t, i) => ({
          type: 'shape',
          shape: 'sticky',
          id: `note${i + 1}`,
          text: t,
          x: 40 + (i % 4) * 190,
          y: 90 + Math.floor(i / 4) * 190,
        })),
      ];
      const content = parseOrThrow(WhiteboardContent, { background: '#ffffff', elements });
      const doc = await projects.create({
        accountId: ctx.account._id,
        kind: 'whiteboard',
        name: args.title,
        content,
        idFor: ctx.idFor,
      });
      return projectArtifact({
        type: 'whiteboard',
        title: doc.name,
        kind: 'whiteboard',
        projectId: doc._id,
        publicBaseUrl: base,
        data: { noteCount: notes.length },
      });
    },
  };

  const notesTool = (
    name: 'create_notes' | 'create_document',
    type: 'notes' | 'document',
    description: string,
  ): ToolDefinition<{ title: string; markdown: string }> => ({
    name,
    description,
    input: z.strictObject({ title, markdown }),
    scope: 'ai',
    spends: [],
    async run(args, ctx) {
      const content = parseOrThrow(NotesContent, { markdown: args.markdown });
      const doc = await projects.create({
        accountId: ctx.account._id,
        kind: 'notes',
        name: args.title,
        content,
        idFor: ctx.idFor,
      });
      return projectArtifact({
        type,
        title: doc.name,
        kind: 'notes',
        projectId: doc._id,
        publicBaseUrl: base,
        data: { characters: args.markdown.length },
      });
    },
  });

  return [
    createFlowchart,
    addFlowchartSteps,
    createWhiteboard,
    notesTool('create_notes', 'notes', 'Create a notes project from Markdown.'),
    notesTool('create_document', 'document', 'Write a document (stored as a notes project) from Markdown.'),
  ];
}
