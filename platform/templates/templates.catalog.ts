import { z } from 'zod';
import {
  FlowchartContent,
  NotesContent,
  PROJECT_TYPE_OF_KIND,
  WhiteboardContent,
  type ProjectKind,
} from '../../contracts/projects';
import { ColumnDef } from '../../contracts/sheets';
import type { Template } from '../../contracts/templates';
import { normalizeFlowchart, normalizeWhiteboard } from '../projects/content';
import { flowchartPreview, notesPreview, sheetPreview, whiteboardPreview } from './preview';

/**
 * The built-in templates (GET /templates). Each content is checked by its kind's contract when
 * this module loads, so a broken template stops the process at start instead of making broken
 * projects. WARNING: ids are public and stable; add templates, never rename an id.
 */
interface Source {
  id: `tpl_${string}`;
  name: string;
  description: string;
  tags: string[];
  kind: Extract<ProjectKind, 'flowchart' | 'whiteboard' | 'notes' | 'sheet'>;
  content: unknown;
}

const node = (id: string, label: string, shape = 'process') => ({ id, label, shape });
const edge = (from: string, to: string, label?: string) => (label ? { from, to, label } : { from, to });

const SOURCES: Source[] = [
  {
    id: 'tpl_hiring_process',
    name: 'Hiring process',
    description: 'From an opening to a signed offer: screening, interviews and the two decisions on the way.',
    tags: ['hr', 'hiring'],
    kind: 'flowchart',
    content: {
      nodes: [
        node('open', 'Role approved', 'start'),
        node('post', 'Write and post the job ad'),
        node('screen', 'Screen applications'),
        node('fit', 'Meets the requirements?', 'decision'),
        node('phone', 'Phone screen'),
        node('loop', 'Interview loop'),
        node('hire', 'Hire?', 'decision'),
        node('offer', 'Send the offer', 'output'),
        node('reject', 'Send a kind rejection'),
        node('done', 'Position filled', 'end'),
      ],
      edges: [
        edge('open', 'post'),
        edge('post', 'screen'),
        edge('screen', 'fit'),
        edge('fit', 'phone', 'yes'),
        edge('fit', 'reject', 'no'),
        edge('phone', 'loop'),
        edge('loop', 'hire'),
        edge('hire', 'offer', 'yes'),
        edge('hire', 'reject', 'no'),
        edge('offer', 'done'),
      ],
    },
  },
  {
    id: 'tpl_incident_response',
    name: 'Incident response',
    description: 'What happens between an alert and the postmortem: triage, escalation, mitigation and follow-up.',
    tags: ['engineering', 'operations'],
    kind: 'flowchart',
    content: {
      nodes: [
        node('alert', 'Alert fires', 'start'),
        node('ack', 'On-call acknowledges'),
        node('triage', 'Assess impact and severity'),
        node('sev', 'Customer impact?', 'decision'),
        node('declare', 'Declare an incident, open a channel'),
        node('status', 'Post a status page update', 'output'),
        node('ticket', 'File a ticket for business hours'),
        node('mitigate', 'Mitigate: roll back, fail over, scale'),
        node('resolved', 'Resolved?', 'decision'),
        node('postmortem', 'Blameless postmortem', 'document'),
        node('closed', 'Closed', 'end'),
      ],
      edges: [
        edge('alert', 'ack'),
        edge('ack', 'triage'),
        edge('triage', 'sev'),
        edge('sev', 'declare', 'yes'),
        edge('sev', 'ticket', 'no'),
        edge('declare', 'status'),
        edge('declare', 'mitigate'),
        edge('mitigate', 'resolved'),
        edge('resolved', 'mitigate', 'no'),
        edge('resolved', 'postmortem', 'yes'),
        edge('ticket', 'closed'),
        edge('postmortem', 'closed'),
      ],
    },
  },
  {
    id: 'tpl_customer_onboarding',
    name: 'Customer onboarding',
    description: 'A new customer from signed contract to first value, with a check-in loop.',
    tags: ['customer success'],
    kind: 'flowchart',
    content: {
      nodes: [
        node('signed', 'Contract signed', 'start'),
        node('kickoff', 'Kick-off call'),
        node('setup', 'Account set-up and data import', 'input'),
        node('train', 'Train the team'),
        node('live', 'Using it weekly?', 'decision'),
        node('checkin', 'Check-in and unblock'),
        node('value', 'First value reached', 'end'),
      ],
      edges: [
        edge('signed', 'kickoff'),
        edge('kickoff', 'setup'),
        edge('setup', 'train'),
        edge('train', 'live'),
        edge('live', 'value', 'yes'),
        edge('live', 'checkin', 'no'),
        edge('checkin', 'live'),
      ],
    },
  },
  {
    id: 'tpl_sprint_retrospective',
    name: 'Sprint retrospective',
    description: 'Three columns (went well, to improve, actions) with sticky notes to start from.',
    tags: ['agile', 'team'],
    kind: 'whiteboard',
    content: {
      background: '#f8fafc',
      elements: [
        {
          id: 'title',
          type: 'text',
          text: 'Sprint retrospective',
          x: 40,
          y: 20,
          width: 600,
          height: 48,
          style: { fontSize: 32, fontWeight: 'bold' },
        },
        {
          id: 'col_well',
          type: 'shape',
          shape: 'rounded',
          text: 'What went well',
          x: 40,
          y: 90,
          width: 280,
          height: 60,
          style: { fill: '#dcfce7', fontWeight: 'bold' },
        },
        {
          id: 'col_improve',
          type: 'shape',
          shape: 'rounded',
          text: 'What to improve',
          x: 360,
          y: 90,
          width: 280,
          height: 60,
          style: { fill: '#fee2e2', fontWeight: 'bold' },
        },
        {
          id: 'col_actions',
          type: 'shape',
          shape: 'rounded',
          text: 'Action items',
          x: 680,
          y: 90,
          width: 280,
          height: 60,
          style: { fill: '#dbeafe', fontWeight: 'bold' },
        },
        {
          id: 'n1',
          type: 'shape',
          shape: 'sticky',
          text: 'Shipped the release on time',
          x: 60,
          y: 180,
          width: 240,
          height: 120,
        },
        {
          id: 'n2',
          type: 'shape',
          shape: 'sticky',
          text: 'Too many meetings',
          x: 380,
          y: 180,
          width: 240,
          height: 120,
        },
        {
          id: 'n3',
          type: 'shape',
          shape: 'sticky',
          text: 'Owner: one focus day a week',
          x: 700,
          y: 180,
          width: 240,
          height: 120,
          style: { fill: '#bfdbfe' },
        },
        { id: 'c1', type: 'connector', from: 'n2', to: 'n3', label: 'becomes', style: { strokeStyle: 'dashed' } },
      ],
    },
  },
  {
    id: 'tpl_swot_analysis',
    name: 'SWOT analysis',
    description: 'A two-by-two grid of strengths, weaknesses, opportunities and threats.',
    tags: ['strategy'],
    kind: 'whiteboard',
    content: {
      background: '#ffffff',
      elements: [
        {
          id: 'title',
          type: 'text',
          text: 'SWOT analysis',
          x: 40,
          y: 10,
          width: 560,
          height: 48,
          style: { fontSize: 32, fontWeight: 'bold' },
        },
        {
          id: 'strengths',
          type: 'shape',
          shape: 'rectangle',
          text: 'Strengths',
          x: 40,
          y: 70,
          width: 360,
          height: 240,
          style: { fill: '#dcfce7', fontSize: 22, fontWeight: 'bold' },
        },
        {
          id: 'weaknesses',
          type: 'shape',
          shape: 'rectangle',
          text: 'Weaknesses',
          x: 420,
          y: 70,
          width: 360,
          height: 240,
          style: { fill: '#fef9c3', fontSize: 22, fontWeight: 'bold' },
        },
        {
          id: 'opportunities',
          type: 'shape',
          shape: 'rectangle',
          text: 'Opportunities',
          x: 40,
          y: 330,
          width: 360,
          height: 240,
          style: { fill: '#dbeafe', fontSize: 22, fontWeight: 'bold' },
        },
        {
          id: 'threats',
          type: 'shape',
          shape: 'rectangle',
          text: 'Threats',
          x: 420,
          y: 330,
          width: 360,
          height: 240,
          style: { fill: '#fee2e2', fontSize: 22, fontWeight: 'bold' },
        },
        {
          id: 'internal',
          type: 'text',
          text: 'internal',
          x: 800,
          y: 170,
          width: 120,
          height: 40,
          style: { textColor: '#6b7280' },
        },
        {
          id: 'external',
          type: 'text',
          text: 'external',
          x: 800,
          y: 430,
          width: 120,
          height: 40,
          style: { textColor: '#6b7280' },
        },
      ],
    },
  },
  {
    id: 'tpl_mind_map',
    name: 'Mind map',
    description: 'A central idea with four branches joined by connectors, and a place for a reference image.',
    tags: ['brainstorm'],
    kind: 'whiteboard',
    content: {
      background: '#ffffff',
      elements: [
        {
          id: 'core',
          type: 'shape',
          shape: 'ellipse',
          text: 'Central idea',
          x: 380,
          y: 260,
          width: 200,
          height: 100,
          style: { fill: '#ede9fe', fontWeight: 'bold', fontSize: 20 },
        },
        { id: 'b1', type: 'shape', shape: 'rounded', text: 'Who is it for?', x: 100, y: 80, width: 180, height: 64 },
        { id: 'b2', type: 'shape', shape: 'rounded', text: 'What problem?', x: 680, y: 80, width: 180, height: 64 },
        {
          id: 'b3',
          type: 'shape',
          shape: 'rounded',
          text: 'How will it work?',
          x: 100,
          y: 480,
          width: 180,
          height: 64,
        },
        {
          id: 'b4',
          type: 'shape',
          shape: 'rounded',
          text: 'How do we know it works?',
          x: 680,
          y: 480,
          width: 200,
          height: 64,
        },
        {
          id: 'ref',
          type: 'image',
          url: 'https://placehold.co/320x240.png?text=Reference',
          alt: 'Reference image (replace me)',
          x: 400,
          y: 460,
          width: 160,
          height: 120,
        },
        { id: 'l1', type: 'connector', from: 'core', to: 'b1', arrow: 'none' },
        { id: 'l2', type: 'connector', from: 'core', to: 'b2', arrow: 'none' },
        { id: 'l3', type: 'connector', from: 'core', to: 'b3', arrow: 'none' },
        { id: 'l4', type: 'connector', from: 'core', to: 'b4', arrow: 'none' },
      ],
    },
  },
  {
    id: 'tpl_meeting_notes',
    name: 'Meeting notes',
    description: 'Agenda, attendees, decisions and action items with owners and dates.',
    tags: ['meetings'],
    kind: 'notes',
    content: {
      markdown: [
        '# Meeting notes',
        '',
        '**Date:** YYYY-MM-DD  ',
        '**Facilitator:** ',
        '',
        '## Attendees',
        '- ',
        '',
        '## Agenda',
        '1. Updates since last time',
        '2. Topic to decide',
        '3. Open questions',
        '',
        '## Decisions',
        '- ',
        '',
        '## Action items',
        '- [ ] Owner: what, by when',
        '',
        '## Next meeting',
        '',
      ].join('\n'),
    },
  },
  {
    id: 'tpl_project_brief',
    name: 'Project brief',
    description: 'One page that says why, what and when: problem, goals, non-goals, milestones and risks.',
    tags: ['planning'],
    kind: 'notes',
    content: {
      markdown: [
        '# Project brief',
        '',
        '## Problem',
        'Who has the problem, how often, and what it costs them today.',
        '',
        '## Goals',
        '- A measurable outcome, with the number that tells us we got there',
        '',
        '## Non-goals',
        '- What we deliberately leave out',
        '',
        '## Milestones',
        '| Milestone | Date | Owner |',
        '|---|---|---|',
        '| Prototype | | |',
        '| Beta | | |',
        '| Launch | | |',
        '',
        '## Risks and open questions',
        '- ',
        '',
      ].join('\n'),
    },
  },
  {
    id: 'tpl_weekly_report',
    name: 'Weekly status report',
    description: 'Highlights, progress against plan, blockers and next week, ready to send every Friday.',
    tags: ['reporting'],
    kind: 'notes',
    content: {
      markdown: [
        '# Weekly status: week of YYYY-MM-DD',
        '',
        '## Highlights',
        '- ',
        '',
        '## Progress against plan',
        '- On track / at risk / off track, and why',
        '',
        '## Blockers',
        '- What is blocked, who can unblock it',
        '',
        '## Next week',
        '- ',
        '',
      ].join('\n'),
    },
  },
  {
    id: 'tpl_budget_tracker',
    name: 'Budget tracker',
    description: 'Planned against actual spend per item and category, with dates, to sort and total.',
    tags: ['finance'],
    kind: 'sheet',
    content: {
      columns: [
        { name: 'Item', type: 'string' },
        { name: 'Category', type: 'string' },
        { name: 'Planned', type: 'number' },
        { name: 'Actual', type: 'number' },
        { name: 'Date', type: 'date' },
        { name: 'Paid', type: 'boolean' },
      ],
      rows: [
        ['Office rent', 'Premises', 2400, 2400, '2026-01-01', true],
        ['Laptops', 'Equipment', 3000, 2875.5, '2026-01-12', true],
        ['Team offsite', 'Events', 1500, 1720, '2026-02-20', false],
        ['Design tool seats', 'Software', 600, 600, '2026-01-05', true],
        ['Conference tickets', 'Events', 900, null, '2026-03-14', false],
      ],
    },
  },
  {
    id: 'tpl_content_calendar',
    name: 'Content calendar',
    description: 'What goes out when, on which channel, who writes it and whether it is published.',
    tags: ['marketing'],
    kind: 'sheet',
    content: {
      columns: [
        { name: 'Publish on', type: 'date' },
        { name: 'Title', type: 'string' },
        { name: 'Channel', type: 'string' },
        { name: 'Owner', type: 'string' },
        { name: 'Status', type: 'string' },
      ],
      rows: [
        ['2026-01-06', 'Year ahead: what we are building', 'Blog', 'Sam', 'draft'],
        ['2026-01-08', 'Customer story: faster onboarding', 'Newsletter', 'Ana', 'idea'],
        ['2026-01-13', 'Five tips for better flowcharts', 'Social', 'Lee', 'scheduled'],
        ['2026-01-20', 'Product update: January', 'Blog', 'Sam', 'idea'],
      ],
    },
  },
];

/** What a sheet template holds: typed columns and rows of cells in column order. */
const SheetTemplateContent = z.strictObject({
  columns: z.array(ColumnDef).min(1),
  rows: z.array(z.array(z.union([z.string(), z.number(), z.boolean(), z.null()]))),
});
export type SheetTemplateContent = z.infer<typeof SheetTemplateContent>;

/** The stored form of a template's content (the same as a project made from it). */
function contentOf(s: Source): Record<string, unknown> {
  const where = `template ${s.id}`;
  if (s.kind === 'flowchart')
    return normalizeFlowchart(check(FlowchartContent, s.content, where)) as unknown as Record<string, unknown>;
  if (s.kind === 'whiteboard')
    return normalizeWhiteboard(check(WhiteboardContent, s.content, where)) as unknown as Record<string, unknown>;
  if (s.kind === 'sheet') return check(SheetTemplateContent, s.content, where);
  return check(NotesContent, s.content, where);
}

function check<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: Error } },
  value: unknown,
  where: string,
): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new Error(`${where}: ${r.error.message}`);
  return r.data;
}

export const TEMPLATES: readonly Template[] = SOURCES.map((s) => {
  const content = contentOf(s);
  const preview = {
    flowchart: flowchartPreview,
    whiteboard: whiteboardPreview,
    notes: notesPreview,
    sheet: sheetPreview,
  }[s.kind](content as never);
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    kind: s.kind,
    projectType: PROJECT_TYPE_OF_KIND[s.kind],
    tags: s.tags,
    preview,
    content,
  };
});

export const templateById = (id: string) => TEMPLATES.find((t) => t.id === id);
