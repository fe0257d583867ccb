import type { FlowchartContent, FlowchartEdge, FlowchartNode } from '../../../contracts/projects';
import { AppError } from '../../infra/errors';

/**
 * Flowcharts from plain step lists, as the assistant writes them: steps in order, a step that
 * ends with "?" is a decision (its "yes" goes on to the next step, its "no" back to the step
 * before it, the usual retry loop). The first step is drawn as the start, the last as the end.
 * Positions are left out: the projects service lays the chart out top to bottom.
 */

const isDecision = (label: string) => label.trimEnd().endsWith('?');

function shapeOf(label: string, i: number, n: number): FlowchartNode['shape'] {
  if (isDecision(label)) return 'decision';
  if (i === 0) return 'start';
  if (i === n - 1) return 'end';
  return 'process';
}

export function flowchartFromSteps(steps: readonly string[]): FlowchartContent {
  const nodes: FlowchartNode[] = steps.map((label, i) => ({
    id: `n${i + 1}`,
    label: label.trim(),
    shape: shapeOf(label, i, steps.length),
  }));
  const edges: FlowchartEdge[] = [];
  nodes.forEach((node, i) => {
    const next = nodes[i + 1];
    if (node.shape === 'decision') {
      if (next) edges.push({ from: node.id, to: next.id, label: 'yes' });
      const back = nodes[i - 1];
      if (back) edges.push({ from: node.id, to: back.id, label: 'no' });
      return;
    }
    if (next) edges.push({ from: node.id, to: next.id });
  });
  return { nodes, edges };
}

/** A node id not used yet: n1, n2, … past the highest taken. */
function freshIds(nodes: readonly FlowchartNode[], count: number): string[] {
  const taken = new Set(nodes.map((n) => n.id));
  const out: string[] = [];
  for (let k = nodes.length + 1; out.length < count; k++) if (!taken.has(`n${k}`)) out.push(`n${k}`);
  return out;
}

/** The node a step label names: exact (ignoring case), else the first whose label contains it. */
function findStep(nodes: readonly FlowchartNode[], label: string): FlowchartNode | undefined {
  const want = label.trim().toLowerCase();
  const stem = (w: string) => w.replace(/(?:es|s)$/, '');
  const words = want
    .split(/\W+/)
    .filter((w) => w.length > 2)
    .map(stem);
  return (
    nodes.find((n) => n.label.toLowerCase() === want) ??
    nodes.find((n) => n.label.toLowerCase().includes(want)) ??
    // "after interviews" finds "Interview candidates": every word of it, plural or not.
    (words.length
      ? nodes.find((n) => words.every((w) => n.label.toLowerCase().split(/\W+/).map(stem).includes(w)))
      : undefined)
  );
}

/**
 * `steps` inserted after the step labelled `after` (default: after the last step of the chart,
 * the one nothing leads on from). The new chain takes over the edges that left that step (for a
 * decision only its "yes" edge). The new nodes' ids are `<idPrefix>-1`, … when given (so a
 * caller can tell later that this insertion happened), else n<k>. Every node is laid out again (positions dropped) so the new
 * steps do not sit on top of old ones.
 */
export function insertSteps(
  content: FlowchartContent,
  steps: readonly string[],
  after?: string,
  idPrefix?: string,
): FlowchartContent {
  const nodes = content.nodes.map((n) => ({ ...n }));
  const edges = content.edges.map((e) => ({ ...e }));
  let anchor: FlowchartNode | undefined;
  if (after !== undefined) {
    anchor = findStep(nodes, after);
    if (!anchor)
      throw new AppError(
        'validation_error',
        `after: the flowchart has no step labelled "${after.slice(0, 80)}"; its steps are: ${nodes
          .map((n) => n.label)
          .slice(0, 30)
          .join('; ')}`,
      );
  } else {
    const leading = new Set(edges.map((e) => e.from));
    anchor = [...nodes].reverse().find((n) => !leading.has(n.id)) ?? nodes[nodes.length - 1];
  }
  const ids = idPrefix ? steps.map((_, i) => `${idPrefix}-${i + 1}`) : freshIds(nodes, steps.length);
  const added: FlowchartNode[] = steps.map((label, i) => ({
    id: ids[i]!,
    label: label.trim(),
    shape: isDecision(label) ? 'decision' : 'process',
  }));
  if (!anchor) return flowchartFromSteps(steps); // an empty chart: ids n1… are free

  const outgoing = edges.filter((e) => e.from === anchor.id);
  const moved =
    anchor.shape === 'decision' ? outgoing.filter((e) => e.label?.toLowerCase() === 'yes').slice(0, 1) : outgoing;
  if (anchor.shape === 'decision' && moved.length === 0 && outgoing[0]) moved.push(outgoing[0]);
  const last = added[added.length - 1]!;
  for (const e of moved) e.from = last.id;
  const firstLabel = anchor.shape === 'decision' ? moved[0]?.label : undefined;
  const chain: FlowchartEdge[] = [{ from: anchor.id, to: added[0]!.id, ...(firstLabel ? { label: firstLabel } : {}) }];
  for (let i = 1; i < added.length; i++) chain.push({ from: added[i - 1]!.id, to: added[i]!.id });
  // An end step that now leads on is an ordinary step; the new last step ends the chart instead.
  if (anchor.shape === 'end') anchor.shape = 'process';
  if (moved.length === 0 && last.shape !== 'decision') last.shape = 'end';
  const all = [...nodes, ...added].map(({ x: _x, y: _y, ...n }) => n);
  // Edges keep their ids (a moved edge is the same edge); the new ones get free ids when stored.
  return { nodes: all, edges: [...edges.filter((e) => !moved.includes(e)), ...chain, ...moved] };
}
