import { createHash } from 'node:crypto';
import type { DeckTheme, OutlineItem, SlideMode } from '../../contracts/presentations';
import { renderSvgPng } from '../../platform/media/codec';
import { chooseLayout, figureIn, type LayoutKind } from './layout';
import { hexToRgb, mix, rgbToHex } from './theme';
import { fitBlock, fontMetrics, SLIDE_FONT_FAMILY, type FitStyle, type Fitted } from './typeset';

export const SLIDE_W = 1920;
export const SLIDE_H = 1080;
const M = 120;
const INNER_W = SLIDE_W - 2 * M;
/** The renderer's name, stamped in each PNG's Software chunk. */
export const SLIDE_RENDERER = 'local-slide-renderer-v2';

/** The editable slide of content mode: text boxes over the background image. */
export interface ContentSlide {
  version: 2;
  width: number;
  height: number;
  layout: LayoutKind;
  background: { imageUrl: string | null };
  elements: {
    id: string;
    type: 'text' | 'list';
    x: number;
    y: number;
    w: number;
    h: number;
    text?: string;
    items?: string[];
    fontSize: number;
    color: string;
    bold: boolean;
  }[];
}

/** A region text was fitted into (px); nothing of that text is drawn outside it. */
export interface TextBox {
  id: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface SlideInput {
  slide: OutlineItem;
  index: number;
  total: number;
  deckName: string;
  companyName: string | null;
  theme: DeckTheme;
  visualStyle: string;
  mode: SlideMode;
}

/** A composed slide: the SVG document, its layout, its text boxes and (content mode) the editable layout. */
export interface ComposedSlide {
  svg: string;
  kind: LayoutKind;
  boxes: TextBox[];
  layout: Omit<ContentSlide, 'background'> | null;
}

/** XML 1.0 forbids most control characters and lone surrogates: drop them, then escape markup. */
export const xmlText = (s: string) =>
  s
    .replace(
      /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      '',
    )
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');

const seedOf = (s: string) => createHash('sha256').update(s).digest().readUInt32BE(0);
const n = (v: number) => String(Math.round(v * 100) / 100);

const TITLE: FitStyle = { weight: 700, maxSize: 64, minSize: 36, lineHeight: 1.22, oneLineDownTo: 50 };
const BODY: FitStyle = { weight: 400, maxSize: 40, minSize: 24, lineHeight: 1.3, gap: 0.6 };
const BULLET_INDENT = 48;

/** Background and decoration by visual style: illustration (soft shapes), geometric (bands), minimal (a rule). */
function background(theme: DeckTheme, visualStyle: string, seed: number): string {
  const bg = hexToRgb(theme.background);
  const accent = hexToRgb(theme.accent);
  const out = [
    `<defs><linearGradient id="bg" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${theme.background}"/><stop offset="1" stop-color="${rgbToHex(mix(bg, [0, 0, 0], 0.06))}"/></linearGradient></defs>`,
    `<rect width="${SLIDE_W}" height="${SLIDE_H}" fill="url(#bg)"/>`,
  ];
  const style = visualStyle.toLowerCase();
  let r = seed;
  const rnd = () => {
    r = (Math.imul(r ^ (r >>> 15), 2246822519) + 0x9e3779b9) >>> 0;
    return r / 4294967296;
  };
  if (/minimal|clean|flat/.test(style))
    out.push(
      `<rect x="0" y="${SLIDE_H - 16}" width="${SLIDE_W}" height="16" fill="${theme.accent}" fill-opacity="0.8"/>`,
    );
  else if (/geometric|abstract|technical|corporate/.test(style)) {
    for (let i = 0; i < 4; i++)
      out.push(
        `<rect x="${Math.round(SLIDE_W - 520 + i * 120 + rnd() * 40)}" y="0" width="72" height="${SLIDE_H}" fill="${theme.accent}" fill-opacity="${n(0.05 + i * 0.025)}"/>`,
      );
  } else {
    for (let i = 0; i < 5; i++) {
      const fill = rgbToHex(mix(accent, [255, 255, 255], 0.3 + rnd() * 0.5));
      out.push(
        `<circle cx="${n(SLIDE_W * (0.66 + rnd() * 0.38))}" cy="${n(SLIDE_H * rnd())}" r="${n(80 + rnd() * 200)}" fill="${fill}" fill-opacity="0.16"/>`,
      );
    }
  }
  return out.join('');
}

/**
 * Collects text boxes: fits the text, emits positioned <text>/<tspan> lines (creator mode) and the
 * editable element (content mode).
 */
class Page {
  readonly svg: string[] = [];
  readonly boxes: TextBox[] = [];
  readonly elements: ContentSlide['elements'] = [];
  constructor(private readonly drawText: boolean) {}

  /** Draw `fitted` inside the box; `valign` places the block, `anchor` the lines. */
  text(
    box: TextBox,
    fitted: Fitted,
    o: { color: string; valign?: 'top' | 'middle' | 'bottom'; anchor?: 'start' | 'end'; bullet?: string },
  ) {
    this.boxes.push(box);
    if (!this.drawText || !fitted.paragraphs.length) return;
    const { ascent, descent } = fontMetrics(fitted.weight);
    const inkTop = (fitted.lineHeight - (ascent + descent) * fitted.size) / 2 + ascent * fitted.size;
    let y =
      box.y + (o.valign === 'middle' ? (box.h - fitted.height) / 2 : o.valign === 'bottom' ? box.h - fitted.height : 0);
    const x = o.anchor === 'end' ? box.x + box.w : box.x + (o.bullet ? BULLET_INDENT : 0);
    const tspans: string[] = [];
    for (const lines of fitted.paragraphs) {
      if (o.bullet)
        this.svg.push(
          `<circle cx="${n(box.x + 14)}" cy="${n(y + inkTop - fitted.size * 0.36)}" r="${n(Math.max(5, fitted.size * 0.16))}" fill="${o.bullet}"/>`,
        );
      for (const line of lines) {
        tspans.push(`<tspan x="${n(x)}" y="${n(y + inkTop)}">${xmlText(line)}</tspan>`);
        y += fitted.lineHeight;
      }
      y += fitted.gap;
    }
    this.svg.push(
      `<text data-box="${box.id}" font-family="${SLIDE_FONT_FAMILY}" font-weight="${fitted.weight}" font-size="${fitted.size}" fill="${o.color}"${o.anchor === 'end' ? ' text-anchor="end"' : ''} xml:space="preserve">${tspans.join('')}</text>`,
    );
  }

  element(e: ContentSlide['elements'][number]) {
    this.elements.push(e);
  }
}

const fitBullets = (items: string[], box: { w: number; h: number }, style: FitStyle = BODY) =>
  fitBlock(items, { w: box.w - BULLET_INDENT, h: box.h }, style);

/**
 * Compose one slide as SVG. creator: a finished slide with every text drawn. content: the
 * background (with a card where the text goes) and the editable text layout, no text drawn.
 * Length: one switch over the 6 slide layouts drawing onto one page and its decorations; its helpers (el,
 * topTitle, subtitle) are short.
 */
export function composeSlide(input: SlideInput): ComposedSlide {
  const { slide, index, total, theme } = input;
  const kind = chooseLayout(slide, index);
  const creator = input.mode === 'creator';
  const page = new Page(creator);
  const bullets = slide.bullets.map((b) => b.trim()).filter(Boolean);
  const muted = rgbToHex(mix(hexToRgb(theme.text), hexToRgb(theme.background), 0.4));
  const deco: string[] = [];
  const el = (
    id: string,
    box: TextBox,
    f: Fitted,
    bold: boolean,
    content: { text?: string; items?: string[] },
    color = theme.text,
  ) =>
    page.element({
      id,
      type: content.items ? 'list' : 'text',
      x: box.x,
      y: box.y,
      w: box.w,
      h: box.h,
      ...content,
      fontSize: f.size,
      color,
      bold,
    });

  if (!creator && kind !== 'title' && kind !== 'section')
    deco.push(
      `<rect x="${M - 48}" y="64" width="${INNER_W + 96}" height="${SLIDE_H - 200}" rx="24" fill="${theme.surface}" fill-opacity="0.85"/>`,
    );

  // A slide title at the top (bullets, two columns, big number, quote), with the accent bar left of it.
  const topTitle = () => {
    const box = { id: 'title', x: M, y: 96, w: INNER_W, h: 164 };
    const f = fitBlock([slide.title], box, TITLE);
    deco.push(`<rect x="${M - 44}" y="104" width="16" height="64" fill="${theme.accent}"/>`);
    page.text(box, f, { color: theme.text });
    el('title', box, f, true, { text: slide.title });
  };
  // The bullets as one muted subtitle block (title and section slides).
  const subtitle = (y: number, h: number) => {
    const sub = { id: 'subtitle', x: M, y, w: INNER_W, h };
    const sf = fitBlock(bullets, sub, { weight: 400, maxSize: 44, minSize: 26, lineHeight: 1.3, gap: 0.3 });
    page.text(sub, sf, { color: muted });
    el('subtitle', sub, sf, false, { text: bullets.join('\n') }, muted);
  };

  switch (kind) {
    case 'title': {
      const box = { id: 'title', x: M, y: 200, w: INNER_W, h: 380 };
      const f = fitBlock([slide.title], box, {
        weight: 700,
        maxSize: 112,
        minSize: 56,
        lineHeight: 1.22,
        oneLineDownTo: 84,
      });
      page.text(box, f, { color: theme.text, valign: 'bottom' });
      el('title', box, f, true, { text: slide.title });
      deco.push(`<rect x="${M}" y="612" width="180" height="12" rx="6" fill="${theme.accent}"/>`);
      subtitle(664, 240);
      break;
    }
    case 'section': {
      deco.push(
        `<rect x="0" y="0" width="24" height="${SLIDE_H}" fill="${theme.accent}"/>`,
        `<rect x="${M}" y="300" width="140" height="12" rx="6" fill="${theme.accent}"/>`,
      );
      const box = { id: 'title', x: M, y: 340, w: INNER_W, h: 300 };
      const f = fitBlock([slide.title], box, {
        weight: 700,
        maxSize: 96,
        minSize: 48,
        lineHeight: 1.22,
        oneLineDownTo: 72,
      });
      page.text(box, f, { color: theme.text });
      el('title', box, f, true, { text: slide.title });
      if (bullets.length) subtitle(680, 200);
      break;
    }
    case 'bullets': {
      topTitle();
      const box = { id: 'bullets', x: M, y: 300, w: INNER_W, h: 640 };
      const f = fitBullets(bullets, box);
      page.text(box, f, { color: theme.text, bullet: theme.accent });
      el('bullets', box, f, false, { items: bullets });
      break;
    }
    case 'two-columns': {
      topTitle();
      const half = Math.ceil(bullets.length / 2);
      const colW = (INNER_W - 80) / 2;
      const left = { id: 'bullets', x: M, y: 300, w: colW, h: 640 };
      const right = { id: 'bullets-2', x: M + colW + 80, y: 300, w: colW, h: 640 };
      const size = Math.min(fitBullets(bullets.slice(0, half), left).size, fitBullets(bullets.slice(half), right).size);
      const style = { ...BODY, maxSize: size };
      const fl = fitBullets(bullets.slice(0, half), left, style);
      const fr = fitBullets(bullets.slice(half), right, style);
      page.text(left, fl, { color: theme.text, bullet: theme.accent });
      page.text(right, fr, { color: theme.text, bullet: theme.accent });
      el('bullets', left, fl, false, { items: bullets.slice(0, half) });
      el('bullets-2', right, fr, false, { items: bullets.slice(half) });
      break;
    }
    case 'big-number': {
      topTitle();
      const figure = figureIn(bullets[0]!) ?? '';
      const fig = { id: 'figure', x: M, y: 290, w: INNER_W, h: 290 };
      const ff = fitBlock([figure], fig, {
        weight: 700,
        maxSize: 220,
        minSize: 72,
        lineHeight: 1.22,
        oneLineDownTo: 72,
      });
      page.text(fig, ff, { color: theme.accent, valign: 'middle' });
      el('figure', fig, ff, true, { text: figure }, theme.accent);
      const cap = { id: 'caption', x: M, y: 600, w: INNER_W, h: 150 };
      const cf = fitBlock([bullets[0]!], cap, { weight: 400, maxSize: 44, minSize: 26, lineHeight: 1.3 });
      page.text(cap, cf, { color: muted });
      el('caption', cap, cf, false, { text: bullets[0]! }, muted);
      if (bullets.length > 1) {
        const rest = { id: 'bullets', x: M, y: 770, w: INNER_W, h: 170 };
        const rf = fitBullets(bullets.slice(1), rest, { ...BODY, maxSize: 32 });
        page.text(rest, rf, { color: theme.text, bullet: theme.accent });
        el('bullets', rest, rf, false, { items: bullets.slice(1) });
      }
      break;
    }
    case 'quote': {
      topTitle();
      const mark = { id: 'quote-mark', x: M, y: 260, w: 120, h: 250 };
      page.text(mark, fitBlock(['“'], mark, { weight: 700, maxSize: 200, minSize: 200, lineHeight: 1.25 }), {
        color: theme.accent,
      });
      const quote = bullets[0]!.replace(/^\s*["“‘«']|["”’»']\s*$/g, '');
      const q = { id: 'quote', x: M + 150, y: 300, w: INNER_W - 150, h: 480 };
      const qf = fitBlock([quote], q, { weight: 400, maxSize: 60, minSize: 32, lineHeight: 1.3 });
      page.text(q, qf, { color: theme.text, valign: 'middle' });
      el('quote', q, qf, false, { text: quote });
      if (bullets[1]) {
        const who = { id: 'attribution', x: M + 150, y: 790, w: INNER_W - 150, h: 100 };
        const wf = fitBlock([bullets[1]], who, { weight: 700, maxSize: 36, minSize: 24, lineHeight: 1.25 });
        page.text(who, wf, { color: theme.accent });
        el('attribution', who, wf, true, { text: bullets[1] }, theme.accent);
      }
      break;
    }
  }

  // Footer: company or deck name on the left, the slide number on the right.
  const footer = { id: 'footer', x: M, y: SLIDE_H - 84, w: INNER_W - 260, h: 40 };
  const small: FitStyle = { weight: 700, maxSize: 24, minSize: 24, lineHeight: 1.3 };
  page.text(footer, fitBlock([input.companyName ?? input.deckName], footer, small), { color: muted });
  const numBox = { id: 'number', x: SLIDE_W - M - 200, y: SLIDE_H - 84, w: 200, h: 40 };
  page.text(numBox, fitBlock([`${index + 1} / ${total}`], numBox, small), { color: muted, anchor: 'end' });

  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${SLIDE_W}" height="${SLIDE_H}" viewBox="0 0 ${SLIDE_W} ${SLIDE_H}">`,
    background(theme, input.visualStyle, seedOf(`${input.deckName}\n${index}\n${slide.title}`)),
    ...deco,
    ...page.svg,
    '</svg>',
  ].join('');
  return {
    svg,
    kind,
    boxes: page.boxes,
    layout: creator ? null : { version: 2, width: SLIDE_W, height: SLIDE_H, layout: kind, elements: page.elements },
  };
}

/** PNG compression for slides: flat colours compress well at 3, and 6+ costs time for little. */
const SLIDE_PNG_COMPRESSION = 3;

/** Render one slide to PNG (1920x1080, Inter, anti-aliased by librsvg) and its editable layout. */
export async function renderSlide(
  input: SlideInput,
): Promise<{ png: Buffer; layout: ComposedSlide['layout']; kind: LayoutKind }> {
  const c = composeSlide(input);
  const png = await renderSvgPng(c.svg, {
    compressionLevel: SLIDE_PNG_COMPRESSION,
    text: { Software: SLIDE_RENDERER, Title: input.slide.title },
  });
  return { png, layout: c.layout, kind: c.kind };
}
