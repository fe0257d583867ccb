import type { FlowchartContent, NotesContent } from '../../contracts/projects';
import type { TemplatePreview } from '../../contracts/templates';
import { FLOWCHART_NODE, normalizeFlowchart, type StoredWhiteboard } from '../projects/content';

/**
 * Previews of project content: counts, the first lines, and a small SVG picture (as a data: URL)
 * drawn from the content itself, so what a template shows is what it makes.
 */

const PREVIEW_WIDTH = 480;
const esc = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const svgUrl = (svg: string) => `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;

/** An SVG of `inner` drawn in the box (x, y, w, h), scaled to PREVIEW_WIDTH wide. */
function frame(box: { x: number; y: number; w: number; h: number }, inner: string, background = '#ffffff') {
  const pad = 20;
  const vb = [box.x - pad, box.y - pad, box.w + 2 * pad, box.h + 2 * pad];
  const height = Math.max(60, Math.round((PREVIEW_WIDTH * vb[3]!) / vb[2]!));
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${PREVIEW_WIDTH}" height="${height}" viewBox="${vb.join(' ')}" font-family="Helvetica, Arial, sans-serif">` +
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#374151"/></marker></defs>` +
    `<rect x="${vb[0]}" y="${vb[1]}" width="${vb[2]}" height="${vb[3]}" fill="${esc(background)}"/>${inner}</svg>`
  );
}

const bounds = (boxes: { x: number; y: number; width: number; height: number }[]) => {
  if (!boxes.length) return { x: 0, y: 0, w: 200, h: 100 };
  const x = Math.min(...boxes.map((b) => b.x));
  const y = Math.min(...boxes.map((b) => b.y));
  return {
    x,
    y,
    w: Math.max(...boxes.map((b) => b.x + b.width)) - x,
    h: Math.max(...boxes.map((b) => b.y + b.height)) - y,
  };
};

const label = (x: number, y: number, s: string, size = 14, color = '#111827', weight = 'normal', anchor = 'middle') =>
  `<text x="${x}" y="${y}" font-size="${size}" fill="${esc(color)}" font-weight="${weight}" text-anchor="${anchor}" dominant-baseline="middle">${esc(s)}</text>`;

/** Words wrapped to lines of about `width` pixels, at most `maxLines` (the last one clipped with …). */
function wrap(s: string, width: number, size: number, maxLines: number): string[] {
  const perLine = Math.max(4, Math.floor(width / (size * 0.56)));
  const lines: string[] = [];
  for (const para of s.split('\n')) {
    let cur = '';
    for (const word of para.split(/\s+/).filter(Boolean)) {
      if (!cur) cur = word;
      else if (cur.length + 1 + word.length <= perLine) cur += ` ${word}`;
      else {
        lines.push(cur);
        cur = word;
      }
    }
    lines.push(cur);
  }
  const out = lines.slice(0, maxLines).map((l) => clip(l, perLine));
  if (lines.length > maxLines) out[maxLines - 1] = clip(`${out[maxLines - 1]!} …`, perLine);
  return out.filter((l, i) => l || i === 0);
}

/** A block of wrapped lines centred vertically on y. */
function block(x: number, y: number, lines: string[], size: number, color: string, weight: string, anchor: string) {
  const lh = size * 1.25;
  const top = y - ((lines.length - 1) * lh) / 2;
  return lines.map((l, i) => label(x, Math.round((top + i * lh) * 10) / 10, l, size, color, weight, anchor)).join('');
}

export function flowchartPreview(input: FlowchartContent): TemplatePreview {
  const c = normalizeFlowchart(input);
  const W = FLOWCHART_NODE.width;
  const H = FLOWCHART_NODE.height;
  const at = new Map(c.nodes.map((n) => [n.id, { x: n.x!, y: n.y! }]));
  const right = Math.max(...c.nodes.map((n) => n.x! + W), 0);
  const stepY = H + FLOWCHART_NODE.gapY;
  let lanes = 0;
  const edges = c.edges
    .map((e) => {
      const a = at.get(e.from);
      const b = at.get(e.to);
      if (!a || !b) return '';
      const down = b.y - a.y;
      if (down > 0 && down <= stepY + 1) {
        // The next layer down: a straight arrow from bottom to top.
        const [x1, y1, x2, y2] = [a.x + W / 2, a.y + H, b.x + W / 2, b.y];
        const mid = e.label
          ? label((x1 + x2) / 2 + 6, (y1 + y2) / 2, clip(e.label, 12), 12, '#374151', 'normal', 'start')
          : '';
        return `<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" stroke="#374151" stroke-width="2" marker-end="url(#arrow)"/>${mid}`;
      }
      // Skips layers, goes back up, or stays level: along its own lane right of the chart.
      const lane = right + 30 + 16 * lanes++;
      const [ya, yb] = [a.y + H / 2, b.y + H / 2];
      const mid = e.label ? label(lane + 6, (ya + yb) / 2, clip(e.label, 12), 12, '#374151', 'normal', 'start') : '';
      return `<polyline points="${a.x + W},${ya} ${lane},${ya} ${lane},${yb} ${b.x + W},${yb}" fill="none" stroke="#374151" stroke-width="2" marker-end="url(#arrow)"/>${mid}`;
    })
    .join('');
  const nodes = c.nodes
    .map((n) => {
      const { x, y } = at.get(n.id)!;
      const fill =
        { start: '#dcfce7', end: '#fee2e2', decision: '#fef9c3', note: '#f3f4f6' }[n.shape as string] ?? '#dbeafe';
      const attrs = `fill="${fill}" stroke="#1f2937" stroke-width="2"`;
      let shape: string;
      if (n.shape === 'decision')
        shape = `<polygon points="${x + W / 2},${y} ${x + W},${y + H / 2} ${x + W / 2},${y + H} ${x},${y + H / 2}" ${attrs}/>`;
      else if (n.shape === 'start' || n.shape === 'end')
        shape = `<rect x="${x}" y="${y}" width="${W}" height="${H}" rx="${H / 2}" ${attrs}/>`;
      else if (n.shape === 'input' || n.shape === 'output')
        shape = `<polygon points="${x + 20},${y} ${x + W},${y} ${x + W - 20},${y + H} ${x},${y + H}" ${attrs}/>`;
      else if (n.shape === 'document')
        shape = `<path d="M${x},${y} H${x + W} V${y + H - 10} Q${x + (3 * W) / 4},${y + H - 25} ${x + W / 2},${y + H - 10} T${x},${y + H - 10} Z" ${attrs}/>`;
      else shape = `<rect x="${x}" y="${y}" width="${W}" height="${H}" rx="6" ${attrs}/>`;
      return shape + block(x + W / 2, y + H / 2, wrap(n.label, W - 24, 13, 2), 13, '#111827', 'normal', 'middle');
    })
    .join('');
  const box = bounds(c.nodes.map((n) => ({ x: n.x!, y: n.y!, width: W, height: H })));
  const svg = frame(lanes ? { ...box, w: box.w + 30 + 16 * lanes + 30 } : box, edges + nodes);
  const decisions = c.nodes.filter((n) => n.shape === 'decision').length;
  return {
    summary: `${c.nodes.length} steps, ${c.edges.length} connections, ${decisions} decision${decisions === 1 ? '' : 's'}`,
    counts: { nodes: c.nodes.length, edges: c.edges.length, decisions },
    firstLines: c.nodes.slice(0, 3).map((n) => n.label),
    previewSvg: svgUrl(svg),
  };
}

export function whiteboardPreview(c: StoredWhiteboard): TemplatePreview {
  const boxes = c.elements.filter((e) => e.type !== 'connector');
  const byId = new Map(boxes.map((e) => [e.id, e]));
  /** Where the line from the centre of `e` towards (tx, ty) leaves e's box. */
  const border = (e: { x: number; y: number; width: number; height: number }, tx: number, ty: number) => {
    const [cx, cy] = [e.x + e.width / 2, e.y + e.height / 2];
    const [dx, dy] = [tx - cx, ty - cy];
    const k = Math.min(dx ? e.width / 2 / Math.abs(dx) : Infinity, dy ? e.height / 2 / Math.abs(dy) : Infinity, 1);
    return { x: Math.round((cx + dx * k) * 10) / 10, y: Math.round((cy + dy * k) * 10) / 10 };
  };
  const ordered = [...c.elements.filter((e) => e.type === 'connector'), ...boxes];
  const parts = ordered.map((e) => {
    const s = e.style;
    const paint = `fill="${esc(s.fill)}" stroke="${esc(s.stroke)}" stroke-width="${s.strokeWidth}" opacity="${s.opacity}"${s.strokeStyle === 'dashed' ? ' stroke-dasharray="8 6"' : s.strokeStyle === 'dotted' ? ' stroke-dasharray="2 4"' : ''}`;
    const rot = e.rotation ? ` transform="rotate(${e.rotation} ${e.x + e.width / 2} ${e.y + e.height / 2})"` : '';
    const cx = e.x + e.width / 2;
    const cy = e.y + e.height / 2;
    if (e.type === 'connector') {
      const from = byId.get(e.from);
      const to = byId.get(e.to);
      if (!from || !to) return '';
      const a = border(from, to.x + to.width / 2, to.y + to.height / 2);
      const b = border(to, from.x + from.width / 2, from.y + from.height / 2);
      const heads = `${e.arrow !== 'none' ? ' marker-end="url(#arrow)"' : ''}${e.arrow === 'both' ? ' marker-start="url(#arrow)"' : ''}`;
      return `<line x1="${a.x}" y1="${a.y}" x2="${b.x}" y2="${b.y}" stroke="${esc(s.stroke)}" stroke-width="${Math.max(1, s.strokeWidth)}"${heads}/>${e.label ? label((a.x + b.x) / 2, (a.y + b.y) / 2 - 10, clip(e.label, 20), 12, s.textColor) : ''}`;
    }
    if (e.type === 'image') {
      return `<g${rot}><rect x="${e.x}" y="${e.y}" width="${e.width}" height="${e.height}" fill="#e5e7eb" stroke="#9ca3af" stroke-dasharray="6 4"/>${label(cx, cy, clip(e.alt ?? 'image', 28), 14, '#4b5563')}</g>`;
    }
    const words = e.type === 'text' ? e.text : (e.text ?? '');
    const anchor = s.textAlign === 'left' ? 'start' : s.textAlign === 'right' ? 'end' : 'middle';
    const tx = anchor === 'start' ? e.x + 8 : anchor === 'end' ? e.x + e.width - 8 : cx;
    const maxLines = Math.max(1, Math.floor((e.height - 8) / (s.fontSize * 1.25)));
    const text = words.trim()
      ? block(tx, cy, wrap(words, e.width - 16, s.fontSize, maxLines), s.fontSize, s.textColor, s.fontWeight, anchor)
      : '';
    if (e.type === 'text') return `<g${rot}>${text}</g>`;
    let shape: string;
    if (e.shape === 'ellipse')
      shape = `<ellipse cx="${cx}" cy="${cy}" rx="${e.width / 2}" ry="${e.height / 2}" ${paint}/>`;
    else if (e.shape === 'diamond')
      shape = `<polygon points="${cx},${e.y} ${e.x + e.width},${cy} ${cx},${e.y + e.height} ${e.x},${cy}" ${paint}/>`;
    else if (e.shape === 'triangle')
      shape = `<polygon points="${cx},${e.y} ${e.x + e.width},${e.y + e.height} ${e.x},${e.y + e.height}" ${paint}/>`;
    else
      shape = `<rect x="${e.x}" y="${e.y}" width="${e.width}" height="${e.height}" rx="${e.shape === 'rounded' ? 12 : e.shape === 'sticky' ? 2 : 0}" ${paint}/>`;
    return `<g${rot}>${shape}${text}</g>`;
  });
  const count = (t: string) => c.elements.filter((e) => e.type === t).length;
  const texts = c.elements.flatMap((e) => ('text' in e && e.text ? [e.text.split('\n')[0]!] : []));
  const counts = {
    elements: c.elements.length,
    shapes: count('shape'),
    text: count('text'),
    images: count('image'),
    connectors: count('connector'),
  };
  return {
    summary: `${counts.elements} elements: ${counts.shapes} shapes, ${counts.text} text, ${counts.images} images, ${counts.connectors} connectors`,
    counts,
    firstLines: texts.slice(0, 3),
    previewSvg: svgUrl(frame(bounds(boxes), parts.join(''), c.background)),
  };
}

export function notesPreview(c: NotesContent): TemplatePreview {
  const lines = c.markdown.split('\n');
  const shown = lines.filter((l) => l.trim() && !/^\s*\|?\s*:?-{3,}/.test(l)).slice(0, 14);
  let y = 0;
  const rows = shown
    .map((l) => {
      const h = /^(#{1,6})\s+(.*)$/.exec(l);
      const size = h ? Math.max(16, 28 - h[1]!.length * 4) : 14;
      y += size + 10;
      const bullet = /^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*)$/.exec(l);
      const cells = /^\s*\|(.*)\|\s*$/.exec(l);
      const textOf = h
        ? h[2]!
        : bullet
          ? `• ${bullet[1]!}`
          : cells
            ? cells[1]!
                .split('|')
                .map((x) => x.trim() || '·')
                .join('   ')
            : l.trim();
      return label(
        h || !bullet ? 0 : 12,
        y,
        clip(textOf.replace(/[*_`]/g, ''), 60),
        size,
        h ? '#111827' : '#374151',
        h ? 'bold' : 'normal',
        'start',
      );
    })
    .join('');
  const words = c.markdown.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length;
  const headings = lines.filter((l) => /^#{1,6}\s/.test(l)).length;
  return {
    summary: `${words} words, ${headings} headings`,
    counts: { words, headings, lines: lines.length },
    firstLines: shown.slice(0, 3),
    previewSvg: svgUrl(frame({ x: 0, y: 0, w: 440, h: y + 10 }, rows, '#fffdf7')),
  };
}

export function sheetPreview(c: {
  columns: { name: string; type: string }[];
  rows: (string | number | boolean | null)[][];
}): TemplatePreview {
  const colW = 110;
  const rowH = 26;
  const shown = c.rows.slice(0, 8);
  const cell = (v: string | number | boolean | null) =>
    v === null ? '' : typeof v === 'boolean' ? (v ? '✓' : '✗') : String(v);
  const parts: string[] = [];
  c.columns.forEach((col, i) => {
    const x = i * colW;
    parts.push(`<rect x="${x}" y="0" width="${colW}" height="${rowH}" fill="#e5e7eb" stroke="#9ca3af"/>`);
    parts.push(label(x + 6, rowH / 2, clip(col.name, 14), 12, '#111827', 'bold', 'start'));
    shown.forEach((r, j) => {
      const y = (j + 1) * rowH;
      const v = r[i] ?? null;
      parts.push(
        `<rect x="${x}" y="${y}" width="${colW}" height="${rowH}" fill="${j % 2 ? '#f9fafb' : '#ffffff'}" stroke="#d1d5db"/>`,
      );
      const right = col.type === 'number';
      parts.push(
        label(
          right ? x + colW - 6 : x + 6,
          y + rowH / 2,
          clip(cell(v), 15),
          12,
          '#374151',
          'normal',
          right ? 'end' : 'start',
        ),
      );
    });
  });
  return {
    summary: `${c.columns.length} columns, ${c.rows.length} rows`,
    counts: { columns: c.columns.length, rows: c.rows.length },
    firstLines: [
      c.columns.map((col) => col.name).join(' | '),
      ...shown.slice(0, 2).map((r) => r.map(cell).join(' | ')),
    ],
    previewSvg: svgUrl(frame({ x: 0, y: 0, w: c.columns.length * colW, h: (shown.length + 1) * rowH }, parts.join(''))),
  };
}
