import type { ChatArtifact } from '../../../contracts/conversations';

/**
 * The local engine's planner: which tool a plain request asks for, with its arguments. Pure and
 * deterministic (no randomness, no clock): the same request always gives the same plan. It
 * recognises the request by the earliest keyword of each kind of thing it can make ("write notes
 * about our video plan" is notes, not a video), then pulls the subject out of the words around it.
 */

export interface PlannedCall {
  name: string;
  args: Record<string, unknown>;
}

export interface PlanContext {
  /** Names of the tools on offer; a plan only uses those. */
  tools: ReadonlySet<string>;
  /** Artifacts of earlier turns and steps, oldest first (for "that flowchart"). */
  artifacts: readonly ChatArtifact[];
}

/** What the planner decided: tool calls, or a text answer when no tool fits. */
export type Plan = { calls: PlannedCall[] } | { text: string };

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

const PROCESSES: { match: RegExp; title: string; steps: string[] }[] = [
  {
    match: /\b(hiring|recruit(ing|ment)?)\b/,
    title: 'Hiring process',
    steps: [
      'Open the role',
      'Write the job description',
      'Source candidates',
      'Screen applications',
      'Interview candidates',
      'Strong candidate?',
      'Make an offer',
      'Onboard the new hire',
    ],
  },
  {
    match: /\bonboard(ing)?\b/,
    title: 'Onboarding process',
    steps: [
      'Sign the contract',
      'Prepare accounts and equipment',
      'Welcome on day one',
      'Meet the team',
      'Set 30-60-90 day goals',
      'Check in after the first month',
    ],
  },
  {
    match: /\b(release|deploy(ment)?|ship(ping)?)\b/,
    title: 'Release process',
    steps: [
      'Freeze the code',
      'Run the test suite',
      'All tests pass?',
      'Build the release',
      'Deploy to staging',
      'Deploy to production',
      'Announce the release',
    ],
  },
  {
    match: /\b(support|ticket|helpdesk|help desk)\b/,
    title: 'Support ticket process',
    steps: [
      'Customer opens a ticket',
      'Triage and set priority',
      'Investigate the issue',
      'Resolved?',
      'Reply to the customer',
      'Close the ticket',
    ],
  },
  {
    match: /\b(purchase order|purchasing|procurement|\bpo\b)/,
    title: 'Purchase order process',
    steps: [
      'Raise a purchase request',
      'Manager approves?',
      'Create the purchase order',
      'Send it to the supplier',
      'Receive the goods',
      'Match the invoice to the order',
      'Pay the supplier',
    ],
  },
];

/** Words that lead into the subject: "a flowchart of our hiring process" → "hiring process". */
const LEAD = /\b(?:of|about|on|for|into|regarding|covering|called|named|titled)\s+(.+)$/i;
const FILLER = /^(?:(?:a|an|the|our|my|your|their|some|this|that|me|us|please|new|quick|short|simple|nice)\s+)+/i;

function clean(s: string): string {
  return s
    .replace(/["“”]/g, '')
    .replace(/\s+/g, ' ')
    .replace(FILLER, '')
    .replace(/\s*(?:please|thanks|thank you)\s*$/i, '')
    .replace(/[\s.!?,;:]+$/, '')
    .trim();
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
function titleOf(s: string, max = 80): string {
  const t = cap(clean(s));
  return t.length > max ? `${t.slice(0, max - 1).replace(/\s+\S*$/, '')}…` : t;
}

/**
 * The subject after the keyword (after "of/about/for…" when there is one), else after the
 * keyword itself; `whole` keeps the clauses ("wake up, make coffee, then read the news").
 */
function subjectAfter(text: string, at: number, keywordLength: number, whole = false): string {
  const rest = text.slice(at + keywordLength);
  const lead = LEAD.exec(rest);
  const raw = lead ? lead[1]! : rest.replace(/^[\s:,-]+/, '');
  return clean(whole ? raw : raw.split(/\s+(?:with|in the style of|and make|and then|then)\s+/i)[0]!);
}

/** Sentence-style clauses of a request ("wake up, make coffee, then read the news"). */
function clausesOf(s: string): string[] {
  return s
    .split(/\s*(?:,|;|->|→|\bthen\b|\band then\b|\bafter that\b|\bfinally\b)\s*/i)
    .map((c) => cap(clean(c.replace(/^and\s+/i, ''))))
    .filter((c) => c.length > 1);
}

/**
 * Steps of a flowchart: a known process (hiring, onboarding, release, support ticket, purchase
 * order), else the steps the request lists ("…: wake up, make coffee, then read the news"), else
 * an outline about the subject with a check that loops back.
 */
export function flowchartPlan(
  request: string,
  subject: string,
  listed: readonly string[],
): { title: string; steps: string[] } {
  const known = PROCESSES.find((p) => p.match.test(request.toLowerCase()));
  if (known) return { title: subject ? titleOf(subject) : known.title, steps: [...known.steps] };
  if (listed.length >= 2) return { title: titleOf(subject || 'Process'), steps: listed.slice(0, 30) };
  const s = subject || 'the process';
  return {
    title: titleOf(subject || 'Process'),
    steps: [
      `Start ${s}`,
      `Gather what ${s} needs`,
      `Carry out ${s}`,
      'Result as expected?',
      `Record the outcome of ${s}`,
      `Finish ${s}`,
    ],
  };
}

export function notesMarkdown(title: string, subject: string): string {
  const s = subject || title;
  return [
    `# ${title}`,
    '',
    '## Overview',
    `- Scope: what ${s} covers, and why it matters now`,
    `- People: who is involved in ${s}, and who owns it`,
    '',
    '## Key points',
    `- Goal: what a good outcome looks like for ${s}`,
    `- Constraints: the time, budget and people available for ${s}`,
    `- Risks: what could go wrong with ${s}, and how we would notice early`,
    '',
    '## Open questions',
    `- What do we still need to find out about ${s}?`,
    '',
    '## Next steps',
    `- [ ] Collect the facts still missing about ${s}`,
    '- [ ] Agree on an owner and a date for the first review',
    '',
  ].join('\n');
}

function sheetPlan(subject: string): { title: string; columns: string[]; rows: (string | number)[][] } {
  const s = subject.toLowerCase();
  if (/\bmonthly\b/.test(s) && /\b(cost|costs|expense|expenses|spend|spending|budget)\b/.test(s)) {
    return {
      title: titleOf(subject),
      columns: ['Month', 'Category', 'Amount'],
      rows: MONTHS.map((m) => [m, 'Operating costs', 0]),
    };
  }
  if (/\b(budget|cost|costs|expenses?)\b/.test(s))
    return { title: titleOf(subject), columns: ['Item', 'Category', 'Amount'], rows: [] };
  if (/\b(tracker|tasks?|todo|to-do)\b/.test(s))
    return { title: titleOf(subject), columns: ['Task', 'Owner', 'Status', 'Due date'], rows: [] };
  if (/\b(contacts?|leads?|customers?)\b/.test(s))
    return { title: titleOf(subject), columns: ['Name', 'Company', 'Email', 'Status'], rows: [] };
  return { title: titleOf(subject || 'New sheet'), columns: ['Item', 'Details', 'Value'], rows: [] };
}

function boardPlan(subject: string): { title: string; columns: string[]; cards: { title: string; column: string }[] } {
  const s = subject || 'the project';
  const launch = /\blaunch\b/i.test(s);
  const titles = launch
    ? [
        'Set the launch date',
        'Write the announcement',
        'Prepare the landing page',
        'Brief the support team',
        'Plan launch-day social posts',
        'Review launch metrics after a week',
      ]
    : [
        `Define the scope of ${s}`,
        `List the tasks for ${s}`,
        'Assign an owner to each task',
        'Set the first milestone',
        'Review progress weekly',
      ];
  return {
    title: titleOf(launch && !/\bboard\b/i.test(s) ? `${s} board` : s),
    columns: ['To do', 'Doing', 'Done'],
    cards: titles.map((t) => ({ title: t, column: 'To do' })),
  };
}

/** The newest flowchart artifact with a project (for "that flowchart"). */
export function newestFlowchart(artifacts: readonly ChatArtifact[]): ChatArtifact | undefined {
  return [...artifacts].reverse().find((a) => a.type === 'flowchart' && a.projectId);
}

interface Intent {
  tool: string;
  /** The keywords that name this kind of thing; the earliest in the request wins. */
  keyword: RegExp;
  plan(request: string, at: number, length: number, ctx: PlanContext): PlannedCall | { text: string } | null;
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/;

const INTENTS: Intent[] = [
  {
    tool: 'send_email',
    keyword: /\b(e-?mail|write to|send (?:a )?(?:mail|message|note) to)\b/i,
    plan(request) {
      const to = EMAIL.exec(request)?.[0];
      if (!to) return null;
      const about = /\babout\s+(.+)$/i.exec(request.slice(request.indexOf(to) + to.length));
      const topic = about ? about[1]!.replace(/[\s.!?,;:]+$/, '').trim() : 'our conversation';
      return {
        name: 'send_email',
        args: {
          to,
          subject: titleOf(`About ${topic}`, 200),
          body: `Hello,\n\nI am writing to you about ${topic}. I would be glad to tell you more and to answer any questions you have.\n\nBest regards`,
        },
      };
    },
  },
  {
    tool: 'list_projects',
    keyword: /\b(?:list|show|what are|find)\b[^.?!]*\bprojects\b/i,
    plan(request) {
      const q = /\bprojects?\s+(?:about|named|called|matching|with)\s+(.+)$/i.exec(request);
      return { name: 'list_projects', args: q ? { query: clean(q[1]!) } : {} };
    },
  },
  {
    tool: 'web_search',
    keyword: /\b(search the web|web search|search online|google|look (?:it )?up online)\b/i,
    plan(request, at, length) {
      return { name: 'web_search', args: { query: subjectAfter(request, at, length) || clean(request) } };
    },
  },
  {
    tool: 'platform_action',
    keyword: /\b(?:open|go to|take me to|show me)\s+(?:my\s+|the\s+)?(drive|projects|billing|settings)\b/i,
    plan(request) {
      const which = /\b(drive|projects|billing|settings)\b/i.exec(request)![1]!.toLowerCase();
      return { name: 'platform_action', args: { action: `open_${which}` } };
    },
  },
  {
    tool: 'create_flowchart',
    keyword: /\b(flow ?charts?|flow diagram|process map|diagram)\b/i,
    plan(request, at, length) {
      const colon = request.indexOf(':', at);
      const head = colon >= 0 ? request.slice(0, colon) : request;
      const whole = subjectAfter(head, at, length, true);
      const listed = clausesOf(colon >= 0 ? request.slice(colon + 1) : whole);
      const p = flowchartPlan(
        request,
        listed.length >= 3 && colon < 0 ? '' : subjectAfter(head, at, length),
        listed.length >= 3 || colon >= 0 ? listed : [],
      );
      return { name: 'create_flowchart', args: { title: p.title, steps: p.steps } };
    },
  },
  {
    tool: 'create_whiteboard',
    keyword: /\b(whiteboard|brainstorm(?:ing)?|mood ?board)\b/i,
    plan(request, at, length) {
      const s = subjectAfter(request, at, length);
      const topic = s || 'our ideas';
      return {
        name: 'create_whiteboard',
        args: {
          title: titleOf(s || 'Whiteboard'),
          notes: [`Goals for ${topic}`, `Ideas for ${topic}`, 'Questions', 'Risks', 'Next steps'],
        },
      };
    },
  },
  {
    tool: 'create_presentation',
    keyword: /\b(deck|slides?|slideshow|presentation|pitch)\b/i,
    plan(request, at, length) {
      const s = subjectAfter(request, at, length);
      const n = /(\d{1,2})[\s-]*(?:slides?|page)/i.exec(request);
      const count = n ? Math.min(30, Math.max(3, Number(n[1]))) : undefined;
      const subject = s || 'our topic';
      return {
        name: 'create_presentation',
        args: {
          title: titleOf(subject),
          brief: `A presentation about ${subject}: ${clean(request)}.`,
          ...(count ? { slideCount: count } : {}),
        },
      };
    },
  },
  {
    tool: 'create_sheet',
    keyword: /\b(spreadsheet|sheet|table of|tracker)\b/i,
    plan(request, at, length) {
      const p = sheetPlan(subjectAfter(request, at, length) || clean(request));
      return {
        name: 'create_sheet',
        args: { title: p.title, columns: p.columns, ...(p.rows.length ? { rows: p.rows } : {}) },
      };
    },
  },
  {
    tool: 'create_board',
    keyword: /\b(kanban|task board|board)\b/i,
    plan(request, at, length) {
      const p = boardPlan(subjectAfter(request, at, length));
      return { name: 'create_board', args: p };
    },
  },
  {
    tool: 'compose_song',
    keyword: /\b(song|music|jingle|tune|compose)\b/i,
    plan(request, at, length) {
      const style = /\b(?:in the style of|style of|in a|as a)\s+(.+?)(?:\s+(?:about|for)\s+.+)?$/i.exec(request)?.[1];
      const about = /\babout\s+(.+?)(?:\s+in the style of.+)?$/i.exec(request)?.[1];
      const subject = about
        ? clean(about)
        : style
          ? `an original song in the style of ${clean(style)}`
          : subjectAfter(request, at, length) || 'a bright new day';
      return { name: 'compose_song', args: { prompt: subject, ...(style ? { style: clean(style) } : {}) } };
    },
  },
  {
    tool: 'generate_video',
    keyword: /\b(video|clip|animation|film)\b/i,
    plan(request, at, length) {
      return { name: 'generate_video', args: { prompt: subjectAfter(request, at, length) || clean(request) } };
    },
  },
  {
    tool: 'generate_image',
    keyword: /\b(draw|paint|sketch|illustrat\w*|image|picture|photo|logo|poster)\b/i,
    plan(request, at, length) {
      const l = request.toLowerCase();
      const aspectRatio = /\b(wide|landscape|banner|16:9)\b/.test(l)
        ? '16:9'
        : /\b(portrait|tall|phone wallpaper|9:16)\b/.test(l)
          ? '9:16'
          : undefined;
      const prompt =
        subjectAfter(request, at, length).replace(/^(?:an?\s+)?(?:image|picture|photo)\s+of\s+/i, '') || clean(request);
      return { name: 'generate_image', args: { prompt, ...(aspectRatio ? { aspectRatio } : {}) } };
    },
  },
  {
    tool: 'build_code',
    keyword:
      /\b(build|code|program|develop)\b(?=[^.?!]*\b(app|application|website|site|web page|page|game|tool|calculator|widget|dashboard|timer|tracker)\b)/i,
    plan(request) {
      const prompt = clean(
        request.replace(
          /^\s*(?:please\s+)?(?:can you\s+)?(?:build|code|program|develop|make|create)\s+(?:me\s+|us\s+)?/i,
          '',
        ),
      );
      return { name: 'build_code', args: { prompt: cap(prompt || clean(request)) } };
    },
  },
  {
    tool: 'start_research',
    keyword: /\b(research|investigate|look into|find out)\b/i,
    plan(request, at, length) {
      const q = clean(request.slice(at + length).replace(/^\s*(?:on|about|into|whether)\s+/i, ''));
      return { name: 'start_research', args: { query: cap(q || clean(request)) } };
    },
  },
  {
    tool: 'brand_theme',
    keyword: /\b(brand theme|brand colou?rs|colou?r palette|palette|colou?r scheme|brand kit)\b/i,
    plan(request, at, length) {
      const brand = titleOf(subjectAfter(request, at, length) || 'My brand', 120);
      const colors = [...request.matchAll(/#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b/g)].map((m) => m[0]).slice(0, 5);
      return { name: 'brand_theme', args: { brand, ...(colors.length ? { colors } : {}) } };
    },
  },
  {
    tool: 'create_document',
    keyword: /\b(document|doc|memo|report|write-?up|one-pager|proposal|essay|article)\b/i,
    plan(request, at, length) {
      const s = subjectAfter(request, at, length) || clean(request);
      const title = titleOf(s);
      return { name: 'create_document', args: { title, markdown: notesMarkdown(title, s) } };
    },
  },
  {
    tool: 'create_notes',
    keyword: /\b(notes?|jot down|summary|summari[sz]e|outline)\b/i,
    plan(request, at, length) {
      const s = subjectAfter(request, at, length) || clean(request);
      const title = titleOf(s);
      return { name: 'create_notes', args: { title, markdown: notesMarkdown(title, s) } };
    },
  },
];

/** "add a step for reference checks (after X) to that flowchart". */
const ADD_STEP =
  /\badd\s+(?:an?\s+|another\s+|one\s+more\s+|a\s+new\s+)?(?:new\s+)?steps?\b\s*(?:for|called|named|:)?\s*(.*?)\s+(?:to|in|on|into)\s+(?:that|the|this|my|our)\s+(?:flow ?chart|chart|diagram|process)\b/i;

function addStepPlan(request: string, ctx: PlanContext): PlannedCall | { text: string } | null {
  const m = ADD_STEP.exec(request);
  if (!m) return null;
  const chart = newestFlowchart(ctx.artifacts);
  if (!chart)
    return {
      text: 'I could not find a flowchart in this conversation to add to. Ask me to make one first, for example "make a flowchart of our hiring process".',
    };
  let what = m[1]!;
  let after: string | undefined;
  const split = /^(.*?)\s+(?:after|following)\s+(?:the\s+)?(.+?)(?:\s+step)?$/i.exec(what);
  if (split) {
    what = split[1]!;
    after = cap(clean(split[2]!));
  }
  const steps = what
    .split(/\s*(?:,|\band\b)\s*/i)
    .map((s) => cap(clean(s.replace(/^(?:a|an|the)\s+step\s+(?:for|called)\s+/i, ''))))
    .filter(Boolean);
  if (!steps.length)
    return { text: 'Which step should I add? For example: "add a step for reference checks to that flowchart".' };
  return { name: 'add_flowchart_steps', args: { projectId: chart.projectId, steps, ...(after ? { after } : {}) } };
}

/** Plan the first step of a turn from the user's request. */
export function plan(request: string, ctx: PlanContext): Plan {
  const text = request.trim();
  if (!text)
    return {
      text: 'What would you like me to make? I can draw flowcharts, write notes and documents, build decks, sheets and boards, draw images, compose songs, render videos, build small apps and start research.',
    };
  if (ctx.tools.has('add_flowchart_steps')) {
    const add = addStepPlan(text, ctx);
    if (add) return 'text' in add ? add : { calls: [add] };
  }
  let best: { intent: Intent; at: number; length: number } | undefined;
  for (const intent of INTENTS) {
    if (!ctx.tools.has(intent.tool)) continue;
    const m = intent.keyword.exec(text);
    if (m && (!best || m.index < best.at)) best = { intent, at: m.index, length: m[0].length };
  }
  if (best) {
    const out = best.intent.plan(text, best.at, best.length, ctx);
    if (out) return 'text' in out ? out : { calls: [out] };
  }
  return { text: helpText(ctx.tools) };
}

const OFFER: [string, string][] = [
  ['create_flowchart', 'flowcharts ("make a flowchart of our hiring process")'],
  ['create_notes', 'notes ("write notes about the Q3 plan")'],
  ['create_presentation', 'decks ("make a 5-slide deck about our roadmap")'],
  ['create_sheet', 'sheets ("a sheet of monthly costs")'],
  ['create_board', 'boards ("make a board for the launch")'],
  ['generate_image', 'images ("draw an image of a lighthouse at dusk")'],
  ['compose_song', 'songs ("compose a song in the style of sea shanties")'],
  ['generate_video', 'videos ("make a video of waves on a beach")'],
  ['build_code', 'small apps ("build me a todo app")'],
  ['start_research', 'research ("research remote onboarding practices")'],
  ['send_email', 'emails ("email alice@example.com about the launch")'],
  ['list_projects', 'a list of your projects ("list my projects")'],
];

export function helpText(tools: ReadonlySet<string>): string {
  const can = OFFER.filter(([t]) => tools.has(t)).map(([, d]) => d);
  if (!can.length)
    return 'I can answer here, but no tools are available to me in this conversation, so I cannot make anything for you.';
  return `I am not sure what to make from that. I can make ${can.slice(0, -1).join(', ')}${can.length > 1 ? ' and ' : ''}${can[can.length - 1]}. Tell me what you need in one sentence.`;
}
