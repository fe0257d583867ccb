import type {
  ElementStyle,
  FlowchartContent,
  ProjectKind,
  WhiteboardContent,
  WhiteboardElementInput,
} from '../../contracts/projects';

/**
 * Content as stored: what the contracts accepted, completed by the server so every reader (the
 * API, previews, the assistant, the flowchart extraction worker) sees the same full shape:
 * flowchart nodes get positions (laid out top to bottom) and edges ids; whiteboard elements get
 * their size, rotation and full style, connectors their box. Applying it twice changes nothing.
 */

/** The box a flowchart node is drawn in (x, y is its top-left corner). */
export const FLOWCHART_NODE = { width: 180, height: 64, gapX: 60, gapY: 80, margin: 40 } as const;

/**
 * Positions for the nodes that have none: layers from the top (roots first, a node below every
 * node that leads to it; edges that close a cycle are ignored for this), each layer centred.
 * Nodes that already have x and y keep them.
 */
export function layoutFlowchart(content: FlowchartContent): FlowchartContent {
  const { nodes, edges } = content;
  if (nodes.every((n) => n.x !== undefined && n.y !== undefined)) return content;
  const index = new Map(nodes.map((n, i) => [n.id, i]));
  const out: number[][] = nodes.map(() => []);
  for (const e of edges) {
    const a = index.get(e.from);
    const b = index.get(e.to);
    if (a !== undefined && b !== undefined && a !== b) out[a]!.push(b);
  }
  // Back edges (closing a cycle) by an iterative depth-first walk, roots first.
  const state = new Uint8Array(nodes.length); // 0 new, 1 on the stack, 2 done
  const back = new Set<string>();
  const hasIncoming = new Uint8Array(nodes.length);
  for (const targets of out) for (const b of targets) hasIncoming[b] = 1;
  const starts = [...nodes.keys()].sort((a, b) => hasIncoming[a]! - hasIncoming[b]! || a - b);
  for (const s of starts) {
    if (state[s]) continue;
    const stack: [number, number][] = [[s, 0]];
    state[s] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const [v, i] = top;
      if (i < out[v]!.length) {
        top[1]++;
        const w = out[v]![i]!;
        if (state[w] === 1) back.add(`${v}>${w}`);
        else if (state[w] === 0) {
          state[w] = 1;
          stack.push([w, 0]);
        }
      } else {
        state[v] = 2;
        stack.pop();
      }
    }
  }
  // Longest-path layers over the acyclic edges (Kahn's order).
  const indeg = new Array<number>(nodes.length).fill(0);
  for (let a = 0; a < nodes.length; a++) for (const b of out[a]!) if (!back.has(`${a}>${b}`)) indeg[b]!++;
  const layer = new Array<number>(nodes.length).fill(0);
  const queue = [...nodes.keys()].filter((i) => indeg[i] === 0);
  for (let q = 0; q < queue.length; q++) {
    const a = queue[q]!;
    for (const b of out[a]!) {
      if (back.has(`${a}>${b}`)) continue;
      layer[b] = Math.max(layer[b]!, layer[a]! + 1);
      if (--indeg[b]! === 0) queue.push(b);
    }
  }
  // Within a layer: by the mean column of the nodes leading to it, then by input order.
  const layers: number[][] = [];
  for (const i of nodes.keys()) {
    const l = layer[i]!;
    layers[l] ??= [];
    layers[l]!.push(i);
  }
  const column = new Array<number>(nodes.length).fill(0);
  const parents: number[][] = nodes.map(() => []);
  for (let a = 0; a < nodes.length; a++) for (const b of out[a]!) if (!back.has(`${a}>${b}`)) parents[b]!.push(a);
  const stepX = FLOWCHART_NODE.width + FLOWCHART_NODE.gapX;
  const stepY = FLOWCHART_NODE.height + FLOWCHART_NODE.gapY;
  const widest = Math.max(...layers.map((l) => l?.length ?? 0));
  const pos = new Map<number, { x: number; y: number }>();
  layers.forEach((members, depth) => {
    if (!members) return;
    const key = (i: number) =>
      parents[i]!.length ? parents[i]!.reduce((s, p) => s + column[p]!, 0) / parents[i]!.length : i;
    const ordered = depth === 0 ? members : [...members].sort((a, b) => key(a) - key(b) || a - b);
    const offset = (widest - ordered.length) / 2;
    ordered.forEach((i, k) => {
      column[i] = k + offset;
      pos.set(i, {
        x: FLOWCHART_NODE.margin + Math.round((k + offset) * stepX),
        y: FLOWCHART_NODE.margin + depth * stepY,
      });
    });
  });
  return { nodes: nodes.map((n, i) => ({ ...n, x: n.x ?? pos.get(i)!.x, y: n.y ?? pos.get(i)!.y })), edges };
}

/** Edge ids for the edges sent without one: e1, e2, … skipping ids already taken. */
export function nameEdges(content: FlowchartContent): FlowchartContent {
  if (content.edges.every((e) => e.id !== undefined)) return content;
  const taken = new Set(content.edges.map((e) => e.id).filter(Boolean));
  let n = 0;
  const next = () => {
    let id: string;
    do id = `e${++n}`;
    while (taken.has(id));
    taken.add(id);
    return id;
  };
  return { nodes: content.nodes, edges: content.edges.map((e) => (e.id === undefined ? { ...e, id: next() } : e)) };
}

export const normalizeFlowchart = (content: FlowchartContent): FlowchartContent => nameEdges(layoutFlowchart(content));

/** A whiteboard element as stored: every member filled in. */
export type StoredElement = (
  | Exclude<WhiteboardElementInput, { type: 'connector' }>
  | Extract<WhiteboardElementInput, { type: 'connector' }>
) & {
  x: number;
  y: number;
  width: number;
  height: number;
  rotation: number;
  style: Required<ElementStyle>;
};
export interface StoredWhiteboard {
  background: string;
  elements: StoredElement[];
}

const SIZE = { shape: [160, 80], sticky: [160, 160], text: [240, 40], image: [320, 240] } as const;

/** The default style of an element type (and of sticky notes). */
export function defaultStyle(type: WhiteboardElementInput['type'], shape?: string): Required<ElementStyle> {
  return {
    fill: type === 'shape' ? (shape === 'sticky' ? '#fef08a' : '#ffffff') : 'transparent',
    stroke: '#1f2937',
    strokeWidth: type === 'text' ? 0 : 2,
    strokeStyle: 'solid',
    opacity: 1,
    textColor: '#111827',
    fontSize: 16,
    fontWeight: 'normal',
    textAlign: type === 'text' ? 'left' : 'center',
  };
}

/** Sizes, rotation and styles filled in; connectors get the box between the centres of their ends. */
export function normalizeWhiteboard(content: WhiteboardContent): StoredWhiteboard {
  const placed = new Map<string, { x: number; y: number; width: number; height: number }>();
  const elements = content.elements.map((el) => {
    const style = { ...defaultStyle(el.type, el.type === 'shape' ? el.shape : undefined), ...(el.style ?? {}) };
    if (el.type === 'connector') return { ...el, x: 0, y: 0, width: 1, height: 1, rotation: 0, style } as StoredElement;
    const [w, h] = el.type === 'shape' ? SIZE[el.shape === 'sticky' ? 'sticky' : 'shape'] : SIZE[el.type];
    const full = {
      ...el,
      width: el.width ?? w,
      height: el.height ?? h,
      rotation: el.rotation ?? 0,
      style,
    } as StoredElement;
    placed.set(el.id, full);
    return full;
  });
  for (const el of elements) {
    if (el.type !== 'connector') continue;
    const a = placed.get(el.from);
    const b = placed.get(el.to);
    if (!a || !b) continue; // the contract refuses these; kept as is if an old document holds one
    const [ax, ay, bx, by] = [a.x + a.width / 2, a.y + a.height / 2, b.x + b.width / 2, b.y + b.height / 2];
    Object.assign(el, {
      x: Math.min(ax, bx),
      y: Math.min(ay, by),
      width: Math.max(1, Math.abs(bx - ax)),
      height: Math.max(1, Math.abs(by - ay)),
    });
  }
  return { background: content.background, elements };
}

/** The stored form of a kind's validated content (other kinds pass through). */
export function normalizeContent(
  kind: ProjectKind,
  content: Record<string, unknown> | null,
): Record<string, unknown> | null {
  if (!content) return content;
  if (kind === 'flowchart')
    return normalizeFlowchart(content as FlowchartContent) as unknown as Record<string, unknown>;
  if (kind === 'whiteboard')
    return normalizeWhiteboard(content as WhiteboardContent) as unknown as Record<string, unknown>;
  return content;
}
