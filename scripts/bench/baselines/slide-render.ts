// Baseline only, the bitmap renderer before the SVG one: copied from git (HEAD:workers/presentations/render.ts) for scripts/bench/slides.bench.ts. Not used by the service.
import { createHash } from 'node:crypto';
import type { DeckTheme } from '../../../contracts/presentations';
import type { SlideInput } from '../../../workers/presentations/render';
import { createCanvas, drawText, fillCircle, fillRect, GLYPH_H, textWidth, wrapText, type Canvas } from './slide-font';
import { encodePng } from './png';
import { hexToRgb, mix } from '../../../workers/presentations/theme';

export const SLIDE_W = 960;
export const SLIDE_H = 540;
const MARGIN = 64;

/** The editable slide of content mode: text boxes over the background image. */
export interface ContentSlide {
  version: 1;
  width: number;
  height: number;
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

const seedOf = (s: string) => createHash('sha256').update(s).digest().readUInt32BE(0);

/** Background and decoration by visual style: illustration (soft shapes), geometric (bands), minimal (a rule). */
function paintBackground(cv: Canvas, theme: DeckTheme, visualStyle: string, seed: number) {
  const bg = hexToRgb(theme.background);
  const accent = hexToRgb(theme.accent);
  const dark = mix(bg, [0, 0, 0], 0.06);
  for (let y = 0; y < cv.height; y++) fillRect(cv, 0, y, cv.width, 1, mix(bg, dark, y / cv.height));
  const style = visualStyle.toLowerCase();
  let r = seed;
  const rnd = () => {
    r = (Math.imul(r ^ (r >>> 15), 2246822519) + 0x9e3779b9) >>> 0;
    return r / 4294967296;
  };
  if (/minimal|clean|flat/.test(style)) {
    fillRect(cv, 0, cv.height - 10, cv.width, 10, accent, 0.8);
  } else if (/geometric|abstract|technical|corporate/.test(style)) {
    for (let i = 0; i < 4; i++) {
      const x = cv.width - 260 + i * 60 + Math.floor(rnd() * 20);
      fillRect(cv, x, 0, 36, cv.height, accent, 0.06 + i * 0.03);
    }
  } else {
    // illustration (default): soft overlapping blobs in accent tints, placed by the seed.
    for (let i = 0; i < 5; i++) {
      const cx = cv.width * (0.62 + rnd() * 0.4);
      const cy = cv.height * rnd();
      fillCircle(cv, cx, cy, 40 + rnd() * 110, mix(accent, [255, 255, 255], 0.3 + rnd() * 0.5), 0.18);
    }
  }
}

/**
 * Render one slide. creator: a finished PNG with title, bullets and footer drawn. content: the
 * background PNG (with a card where the text goes) and the editable text layout.
 */
export function renderSlide(input: SlideInput): { png: Buffer; layout: Omit<ContentSlide, 'background'> | null } {
  const { slide, index, total, theme } = input;
  const cv = createCanvas(SLIDE_W, SLIDE_H);
  paintBackground(cv, theme, input.visualStyle, seedOf(`${input.deckName}\n${index}\n${slide.title}`));
  const text = hexToRgb(theme.text);
  const accent = hexToRgb(theme.accent);
  const muted = mix(text, hexToRgb(theme.background), 0.45);
  const width = SLIDE_W - 2 * MARGIN;
  const isTitle = index === 0;
  const elements: ContentSlide['elements'] = [];

  if (isTitle) {
    const titleScale = 7;
    const lines = wrapText(slide.title, titleScale, width, 2);
    let y = 140;
    if (input.mode === 'creator')
      for (const [i, l] of lines.entries())
        drawText(cv, MARGIN, y + i * (GLYPH_H * titleScale + 6), l, titleScale, text);
    elements.push({
      id: 'title',
      type: 'text',
      x: MARGIN,
      y,
      w: width,
      h: lines.length * (GLYPH_H * titleScale + 6),
      text: slide.title,
      fontSize: 48,
      color: theme.text,
      bold: true,
    });
    y += lines.length * (GLYPH_H * titleScale + 6) + 16;
    fillRect(cv, MARGIN, y, 120, 8, accent);
    y += 36;
    const sub = slide.bullets.join('\n');
    const subLines = slide.bullets.flatMap((b) => wrapText(b, 3, width, 2)).slice(0, 5);
    if (input.mode === 'creator')
      for (const [i, l] of subLines.entries()) drawText(cv, MARGIN, y + i * 30, l, 3, muted);
    elements.push({
      id: 'subtitle',
      type: 'text',
      x: MARGIN,
      y,
      w: width,
      h: subLines.length * 30,
      text: sub,
      fontSize: 22,
      color: theme.text,
      bold: false,
    });
  } else {
    if (input.mode === 'content')
      fillRect(cv, MARGIN - 24, 40, width + 48, SLIDE_H - 100, hexToRgb(theme.surface), 0.85);
    fillRect(cv, MARGIN - 20, 56, 8, 48, accent);
    const titleScale = 5;
    const tLines = wrapText(slide.title, titleScale, width, 2);
    if (input.mode === 'creator')
      for (const [i, l] of tLines.entries())
        drawText(cv, MARGIN, 60 + i * (GLYPH_H * titleScale + 4), l, titleScale, text);
    elements.push({
      id: 'title',
      type: 'text',
      x: MARGIN,
      y: 60,
      w: width,
      h: tLines.length * (GLYPH_H * titleScale + 4),
      text: slide.title,
      fontSize: 36,
      color: theme.text,
      bold: true,
    });
    let y = 60 + tLines.length * (GLYPH_H * titleScale + 4) + 28;
    const top = y;
    for (const b of slide.bullets) {
      const bl = wrapText(b, 3, width - 28, 2);
      if (y + bl.length * 28 > SLIDE_H - 60) break;
      if (input.mode === 'creator') {
        fillRect(cv, MARGIN, y + 6, 10, 10, accent);
        for (const [i, l] of bl.entries()) drawText(cv, MARGIN + 28, y + i * 28, l, 3, text);
      }
      y += bl.length * 28 + 14;
    }
    elements.push({
      id: 'bullets',
      type: 'list',
      x: MARGIN,
      y: top,
      w: width,
      h: y - top,
      items: slide.bullets,
      fontSize: 22,
      color: theme.text,
      bold: false,
    });
  }

  // Footer: deck or company name, and the slide number.
  const footer = input.companyName ?? input.deckName;
  const num = `${index + 1} / ${total}`;
  if (input.mode === 'creator') {
    drawText(cv, MARGIN, SLIDE_H - 36, wrapText(footer, 2, width - 120, 1)[0] ?? '', 2, muted);
    drawText(cv, SLIDE_W - MARGIN - textWidth(num, 2), SLIDE_H - 36, num, 2, muted);
  }
  const png = encodePng(SLIDE_W, SLIDE_H, cv.pixels, 3, {
    Software: 'local-slide-renderer-v1',
    Title: slide.title.replace(/[^\x20-\x7e]/g, '?').slice(0, 200),
  });
  return { png, layout: input.mode === 'content' ? { version: 1, width: SLIDE_W, height: SLIDE_H, elements } : null };
}
