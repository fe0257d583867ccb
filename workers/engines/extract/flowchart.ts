import type { TitleSource } from '../../../contracts/extract';
import {
  FLOWCHART_MAX_EDGES,
  FLOWCHART_MAX_NODES,
  type FlowchartEdge,
  type FlowchartNode,
} from '../../../contracts/projects';

/**
 * text-structure-v1: document text in, a flowchart out. Pure and deterministic: the same text
 * gives the same nodes, edges and positions.
 *
 * Reading rules, one line at a time (list markers are stripped first):
 * - `# Heading` (Markdown; extractors write headings so: larger type in a PDF or an image, slide
 *   title placeholders), a short line ending with ":" or a short ALL-CAPS line is a heading. The
 *   first heading before any step titles the flowchart; later ones become `note` nodes beside the
 *   first node of their section (not connected).
 * - Numbered lines ("1.", "2)", "(3)", "Step 4:"), bullets ("-", "*", "+", "•", "–") and plain
 *   lines are process nodes, in document order. A plain line starting in lower case continues
 *   the line before it (a wrapped line).
 * - "A -> B -> C" (also →, =>, ⇒) is a chain of process nodes.
 * - A line ending with "?" is a decision: the next steps follow its `yes` edge, `no` goes to the
 *   end, unless "yes: …" / "no: …" lines (also "if yes, …", "if not, …", "otherwise …") follow
 *   it. "If <condition>, then <A>[, else <B>]" is a decision "<Condition>?" with A on yes and B
 *   on no (no without B skips ahead to the next step).
 * - A branch whose text says the flow ends ("reject", "stop", "end", "cancel", …) goes to the
 *   end; "go (back) to step N" links to step N; any other branch joins the next step.
 * - "Start" / "End" lines are the start and end nodes, which every flowchart has.
 *
 * Layout: a grid, top to bottom. Column 1 (x = 280) is the main flow, column 2 (x = 560) the
 * `no` branches, column 0 (x = 0) the section notes; a row is 120 px.
 */

export const LAYOUT_NAME = 'text-structure-v1';
export const GRID = { colWidth: 280, rowHeight: 120 } as const;
export const DEFAULT_TITLE = 'Extracted flowchart';
/** Longest node label (FlowchartNode.label allows 500). */
const LABEL_MAX = 500;
/** Longest title (a project name allows 255). */
const TITLE_MAX = 255;

export interface TextToFlowchartInput {
  text: string;
  /** Title from the document's metadata (PDF Title), used when it has no heading. */
  metadataTitle?: string | null;
  /** The uploaded file's name; without extension it titles a document without a title. */
  fileName?: string | null;
}

export interface TextToFlowchartResult {
  title: string;
  titleSource: TitleSource;
  content: { nodes: FlowchartNode[]; edges: FlowchartEdge[] };
  steps: number;
  decisions: number;
  truncated: boolean;
  notes: string[];
}

// ---- Reading ----------------------------------------------------------------------------

type Branch = { text: string; goto: number | null };
type Item =
  | { t: 'heading'; text: string }
  | { t: 'step'; text: string; marked: boolean; n: number | null }
  | { t: 'chain'; parts: string[]; n: number | null }
  | {
      t: 'decision';
      text: string;
      yes: Branch | null;
      no: Branch | null /** "if … then" without else: no skips ahead. */;
      skipOnNo: boolean;
      n: number | null;
    }
  | { t: 'end' };

const NUMBERED = /^\(?(\d{1,3})\s*[.):]\s*(?=[^\d\s.)])|^\(?(\d{1,3})[.)]\s+/;
const STEP_WORD = /^step\s*(\d{1,3})\b\s*[-–—:.)]?\s*/i;
const BULLET = /^(?:[-*+]\s+|[•·▪◦●○‣⁃∙■□➢►▶]\s*|[–—]\s+)/;
const ARROW = /\s*(?:-{1,2}>|—>|=>|[→⇒⟶➔➜➝➞])\s*/;
const BRANCH = /^(yes|no)\b\s*(?:[:)>→,-]|–|—)+\s*(.*)$/i;
const BRANCH_IF = /^if\s+(yes|so|not|no)\b\s*[,:]?\s*(?:then\s+)?(.*)$/i;
const OTHERWISE = /^(?:otherwise|else)\b\s*[,:]?\s*(.+)$/i;
const IF_THEN = /^if\s+(.+?)(?:\s*,\s*then\s+|\s+then\s+|\s*,\s+|\s*:\s+)(.+)$/i;
const ELSE_SPLIT = /\s*[,;.]?\s+(?:else|otherwise)\b\s*[,:]?\s*/i;
const GOTO =
  /^(?:go\s+(?:back\s+)?to|back\s+to|return\s+to|repeat(?:\s+from)?|loop\s+(?:back\s+)?to)\s+step\s+(\d{1,3})\b/i;
const TERMINAL =
  /\b(?:end|ends|stop|stops|reject|rejected|rejects|rejection|decline|declined|cancel|cancelled|canceled|abort|aborted|exit|finish|finished|terminate|terminated|close the case|done)\b/i;
const START_WORD = /^(?:start|begin|started)[.!]?$/i;
const END_WORD = /^(?:end|finish|finished|stop|done)[.!]?$/i;

/** One line: control characters and invisible ones out, whitespace collapsed. */
const clean = (s: string) =>
  s
    .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\ufeff]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1).trimEnd()}…` : s);
const capitalise = (s: string) => (s ? s[0]!.toUpperCase() + s.slice(1) : s);
const stripEndPunct = (s: string) => s.replace(/[\s.;,]+$/, '');

const branchOf = (text: string): Branch => {
  const t = stripEndPunct(text);
  const g = GOTO.exec(t);
  return { text: t, goto: g ? Number(g[1]) : null };
};

/** Markers off; the step number when there was one. */
function unmark(line: string): { body: string; n: number | null; marked: boolean } {
  let m = STEP_WORD.exec(line);
  if (m) return { body: line.slice(m[0].length).trim(), n: Number(m[1]), marked: true };
  m = NUMBERED.exec(line);
  if (m) return { body: line.slice(m[0].length).trim(), n: Number(m[1] ?? m[2]), marked: true };
  m = BULLET.exec(line);
  if (m) return { body: line.slice(m[0].length).trim(), n: null, marked: true };
  return { body: line, n: null, marked: false };
}

const isHeadingLike = (body: string) =>
  (body.length <= 60 && /^[^:]{2,}:$/.test(body) && body.split(' ').length <= 6) ||
  (body.length <= 60 &&
    body.split(' ').length <= 6 &&
    /[A-Z]{2}/.test(body) &&
    !/[a-z]/.test(body) &&
    !/[?>→]/.test(body));

/** The document's lines as items (headings, steps, chains, decisions with their branches). */
export function readItems(text: string): Item[] {
  const items: Item[] = [];
  /** The last decision while its branches may still follow. */
  let open: Extract<Item, { t: 'decision' }> | null = null;
  let prev: Item | null = null;
  const push = (it: Item) => {
    items.push(it);
    prev = it;
    open = it.t === 'decision' ? it : null;
  };

  for (const raw of text.split(/\r\n|\r|\n/)) {
    const line = clean(raw);
    if (!line) continue;
    const h = /^(#{1,6})\s+(.+)$/.exec(line);
    if (h) {
      push({ t: 'heading', text: stripEndPunct(h[2]!.replace(/#+$/, '').trim()) });
      continue;
    }
    const { body, n, marked } = unmark(line);
    if (!body) continue;

    // A wrapped line: lower-case start, no marker, right after a step or a decision.
    const last = prev as Item | null;
    if (
      !marked &&
      /^[a-z]/.test(body) &&
      last &&
      (last.t === 'step' || last.t === 'decision') &&
      !BRANCH.test(body) &&
      !BRANCH_IF.test(body) &&
      !/^if\s/i.test(body) &&
      !OTHERWISE.test(body)
    ) {
      if (last.t === 'decision' && (last.yes || last.no)) {
        const b = (last.no ?? last.yes)!;
        Object.assign(b, branchOf(`${b.text} ${body}`));
      } else last.text = `${last.text} ${body}`;
      continue;
    }

    // A branch of the open decision.
    const br = BRANCH.exec(body) ?? BRANCH_IF.exec(body);
    const other = br ? null : OTHERWISE.exec(body);
    if (br || other) {
      const answer = other ? 'no' : /^(yes|so)$/i.test(br![1]!) ? 'yes' : 'no';
      const rest = (other ? other[1]! : br![2]!).trim();
      const d = open as Extract<Item, { t: 'decision' }> | null;
      if (d && !d[answer] && rest) {
        d[answer] = branchOf(rest);
        continue;
      }
      if (rest) {
        push({ t: 'step', text: stripEndPunct(body), marked, n });
        continue;
      }
    }

    if (START_WORD.test(body)) continue;
    if (END_WORD.test(body)) {
      push({ t: 'end' });
      continue;
    }
    if (!marked && isHeadingLike(body)) {
      push({ t: 'heading', text: body.replace(/:$/, '') });
      continue;
    }

    const ifThen = IF_THEN.exec(body);
    if (ifThen) {
      const [cond, rest] = [stripEndPunct(ifThen[1]!), ifThen[2]!];
      const [yes, no] = rest.split(ELSE_SPLIT, 2);
      push({
        t: 'decision',
        text: `${capitalise(cond.replace(/\?$/, ''))}?`,
        yes: yes ? branchOf(yes) : null,
        no: no ? branchOf(no) : null,
        skipOnNo: !no,
        n,
      });
      continue;
    }
    const parts = body.split(ARROW).map(stripEndPunct).filter(Boolean);
    if (parts.length >= 2) {
      push({ t: 'chain', parts, n });
      continue;
    }
    const single = parts[0] ?? stripEndPunct(body);
    if (/\?$/.test(single) || /^if\s/i.test(single)) {
      push({
        t: 'decision',
        text: /\?$/.test(single) ? single : `${capitalise(single.replace(/^if\s+/i, ''))}?`,
        yes: null,
        no: null,
        skipOnNo: false,
        n,
      });
      continue;
    }
    push({ t: 'step', text: single, marked, n });
  }
  return items;
}

// ---- Title ------------------------------------------------------------------------------

const baseName = (fileName: string) => {
  const base = clean(fileName).split(/[\\/]/).pop() ?? '';
  return base.replace(/\.[A-Za-z0-9]{1,5}$/, '').trim();
};

function chooseTitle(items: Item[], input: TextToFlowchartInput): { title: string; source: TitleSource; used: number } {
  const firstNode = items.findIndex((i) => i.t !== 'heading');
  const headingAt = items.findIndex((i) => i.t === 'heading');
  if (headingAt >= 0 && (firstNode < 0 || headingAt < firstNode))
    return { title: (items[headingAt] as { text: string }).text, source: 'heading', used: headingAt };
  const meta = clean(input.metadataTitle ?? '');
  if (meta) return { title: meta, source: 'metadata', used: -1 };
  // A short, unmarked first line above structured content reads as its title.
  const first = items[0];
  if (
    first?.t === 'step' &&
    !first.marked &&
    first.text.length <= 80 &&
    !/[.!?;,:]$/.test(first.text) &&
    items.slice(1).some((i) => i.t !== 'step' || i.marked)
  ) {
    return { title: first.text, source: 'first-line', used: 0 };
  }
  const file = input.fileName ? baseName(input.fileName) : '';
  if (file) return { title: file, source: 'fileName', used: -1 };
  return { title: DEFAULT_TITLE, source: 'default', used: -1 };
}

// ---- Building ---------------------------------------------------------------------------

type Source = { from: string; label?: string };
const partsOf = (b: Branch | null) => (b ? b.text.split(ARROW).filter(Boolean).length : 0);
const COL = { note: 0, main: 1, no: 2 } as const;

/** Text to a flowchart: see the rules at the top of this file. */
// Length: the builder's state (nodes, edges, the current row, the pending sources, the counters) is shared by
// its closures (node, connect, mainNode, branch …, the longest 22 lines) and by the one loop over the items
// that drives them.
export function textToFlowchart(input: TextToFlowchartInput): TextToFlowchartResult {
  const items = readItems(input.text);
  const t = chooseTitle(items, input);
  if (t.used >= 0) items.splice(t.used, 1);
  // Nothing but a title: the title is the one step.
  if (!items.some((i) => i.t !== 'heading') && t.source !== 'default')
    items.push({ t: 'step', text: t.title, marked: false, n: null });

  const nodes: FlowchartNode[] = [];
  const edges: { from: string; to: string; label?: string }[] = [];
  const notes: string[] = [];
  const stepNode = new Map<number, string>();
  const gotos: { from: string; label: string; step: number }[] = [];
  let pending: Source[] = [];
  const toEnd: Source[] = [];
  let row = 0;
  let lastMain = 'start';
  let lastNoteRow = -1;
  let seq = 0;
  let truncated = false;
  let steps = 0;
  let decisions = 0;

  const node = (label: string, shape: FlowchartNode['shape'], col: number, r: number, id = `n${++seq}`) => {
    nodes.push({ id, label: clip(label, LABEL_MAX), shape, x: col * GRID.colWidth, y: r * GRID.rowHeight });
    if (shape === 'process') steps++;
    if (shape === 'decision') decisions++;
    return id;
  };
  const connect = (sources: Source[], to: string) => {
    for (const s of sources) edges.push({ from: s.from, to, ...(s.label ? { label: s.label } : {}) });
  };
  /** Room for `n` more nodes and their edges, keeping one node and its edges for the end. */
  const room = (n: number) =>
    nodes.length + n + 1 <= FLOWCHART_MAX_NODES &&
    edges.length + toEnd.length + pending.length + gotos.length + 3 * n + 4 <= FLOWCHART_MAX_EDGES;
  /** A node on the main flow, fed by what is pending (or by the last main node when nothing is). */
  const mainNode = (label: string, shape: FlowchartNode['shape']) => {
    const id = node(label, shape, COL.main, row++);
    connect(pending.length ? pending : [{ from: lastMain }], id);
    pending = [{ from: id }];
    lastMain = id;
    return id;
  };
  const remember = (n: number | null, id: string) => {
    if (n !== null && !stepNode.has(n)) stepNode.set(n, id);
  };
  /** A branch's nodes from `from` (edge labelled), in `col` from `r`: its tail, or null when it ended the flow. */
  const branch = (b: Branch, from: string, label: string, col: number, r: number): { tail: Source[]; rows: number } => {
    if (b.goto !== null) {
      gotos.push({ from, label, step: b.goto });
      return { tail: [], rows: 0 };
    }
    if (END_WORD.test(b.text)) {
      toEnd.push({ from, label });
      return { tail: [], rows: 0 };
    }
    const parts = b.text.split(ARROW).map(stripEndPunct).filter(Boolean);
    let prevSrc: Source = { from, label };
    for (const [i, p] of parts.entries()) {
      const id = node(capitalise(p), 'process', col, r + i);
      connect([prevSrc], id);
      prevSrc = { from: id };
    }
    if (TERMINAL.test(b.text)) {
      toEnd.push(prevSrc);
      return { tail: [], rows: parts.length };
    }
    return { tail: [prevSrc], rows: parts.length };
  };

  node('Start', 'start', COL.main, row++, 'start');
  pending = [{ from: 'start' }];

  for (const it of items) {
    const need = it.t === 'chain' ? it.parts.length : it.t === 'decision' ? 1 + partsOf(it.yes) + partsOf(it.no) : 1;
    if (!room(need)) {
      truncated = true;
      break;
    }
    switch (it.t) {
      case 'heading': {
        const r = Math.max(row, lastNoteRow + 1);
        node(it.text, 'note', COL.note, r);
        lastNoteRow = r;
        if (r > row) row = r;
        break;
      }
      case 'step':
        remember(it.n, mainNode(it.text, 'process'));
        break;
      case 'chain':
        for (const [i, p] of it.parts.entries()) {
          if (/\?$/.test(p)) {
            // A question inside a chain: yes goes on along the chain, no to the end.
            const d = mainNode(p, 'decision');
            if (i === 0) remember(it.n, d);
            pending = [{ from: d, label: 'yes' }];
            toEnd.push({ from: d, label: 'no' });
          } else {
            const id = mainNode(p, 'process');
            if (i === 0) remember(it.n, id);
          }
        }
        break;
      case 'decision': {
        const d = mainNode(it.text, 'decision');
        remember(it.n, d);
        const dRow = row - 1;
        const yes = it.yes
          ? branch(it.yes, d, 'yes', COL.main, dRow + 1)
          : { tail: [{ from: d, label: 'yes' }], rows: 0 };
        let no: { tail: Source[]; rows: number };
        if (it.no) no = branch(it.no, d, 'no', COL.no, dRow + 1);
        else if (it.skipOnNo) no = { tail: [{ from: d, label: 'no' }], rows: 0 };
        else {
          toEnd.push({ from: d, label: 'no' });
          no = { tail: [], rows: 0 };
        }
        row = dRow + 1 + Math.max(yes.rows, no.rows);
        pending = [...yes.tail, ...no.tail];
        // The flow goes on from the yes branch's last node (or the decision).
        const yesTail = yes.tail[0];
        lastMain = yesTail && !yesTail.label ? yesTail.from : d;
        break;
      }
      case 'end':
        toEnd.push(...pending);
        pending = [];
        break;
    }
  }
  if (truncated)
    notes.push(
      `The document holds more than a flowchart can (${FLOWCHART_MAX_NODES} nodes, ${FLOWCHART_MAX_EDGES} edges): the steps after the ${steps + decisions}th were left out.`,
    );

  const end = node('End', 'end', COL.main, row, 'end');
  connect([...pending, ...toEnd], end);
  for (const g of gotos) {
    const target = stepNode.get(g.step);
    if (target) edges.push({ from: g.from, to: target, label: g.label });
    else {
      edges.push({ from: g.from, to: end, label: g.label });
      notes.push(`"go to step ${g.step}" names no step of the document; that branch goes to the end.`);
    }
  }
  // The end is reached from somewhere even when every branch looped back.
  if (!edges.some((e) => e.to === end)) edges.push({ from: lastMain, to: end });

  const seen = new Set<string>();
  const unique = edges.filter((e) => {
    const k = `${e.from}\u0000${e.to}\u0000${e.label ?? ''}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  return {
    title: clip(t.title, TITLE_MAX),
    titleSource: t.source,
    content: { nodes, edges: unique.map((e, i) => ({ id: `e${i + 1}`, ...e })) },
    steps,
    decisions,
    truncated,
    notes,
  };
}
