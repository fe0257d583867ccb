import { existsSync } from 'node:fs';
import * as fontkit from 'fontkit';

/**
 * Text measuring and fitting for slides. librsvg (inside sharp) draws the SVG text with pango and
 * the system's Inter; we must know the same widths beforehand to wrap lines and keep every text
 * box inside its region, so the widths come from the same font files read by fontkit (advance
 * widths after GSUB/GPOS, i.e. with kerning and ligatures). No library wraps text to a measured
 * width for SVG output (SVG 1.1 has no wrapping and librsvg ignores SVG 2 `inline-size`), hence
 * the small greedy wrapper below.
 */

/** The family name librsvg asks fontconfig for; the files below are the same family. */
export const SLIDE_FONT_FAMILY = 'Inter';
export type Weight = 400 | 700;

const FONT_DIRS = ['/usr/share/fonts/opentype/inter', '/usr/share/fonts/truetype/inter'];
const FALLBACK_DIR = '/usr/share/fonts/truetype/dejavu';
const FILES: Record<Weight, string[]> = {
  400: ['Inter-Regular.otf', 'Inter-Regular.ttf'],
  700: ['Inter-Bold.otf', 'Inter-Bold.ttf'],
};
const FALLBACK_FILES: Record<Weight, string> = { 400: 'DejaVuSans.ttf', 700: 'DejaVuSans-Bold.ttf' };

interface Face {
  font: fontkit.Font;
  fallback: fontkit.Font | null;
  /** Width in em of strings already measured (slides repeat words; wrapping re-measures lines). */
  cache: Map<string, number>;
}
const faces = new Map<Weight, Face>();
const CACHE_MAX = 20_000;

function face(weight: Weight): Face {
  let f = faces.get(weight);
  if (f) return f;
  const file = FONT_DIRS.flatMap((d) => FILES[weight].map((n) => `${d}/${n}`)).find((p) => existsSync(p));
  if (!file)
    throw new Error(
      `the slide font Inter is not installed (looked in ${FONT_DIRS.join(', ')}; scripts/services.sh installs fonts-inter)`,
    );
  const fb = `${FALLBACK_DIR}/${FALLBACK_FILES[weight]}`;
  f = {
    font: fontkit.openSync(file) as fontkit.Font,
    fallback: existsSync(fb) ? (fontkit.openSync(fb) as fontkit.Font) : null,
    cache: new Map(),
  };
  faces.set(weight, f);
  return f;
}

/** Ascent and descent of the slide font, in em (for placing baselines inside a box). */
export function fontMetrics(weight: Weight = 400): { ascent: number; descent: number } {
  const { font } = face(weight);
  return { ascent: font.ascent / font.unitsPerEm, descent: -font.descent / font.unitsPerEm };
}

const runAdvance = (font: fontkit.Font, s: string) =>
  font.layout(s).positions.reduce((a, p) => a + p.xAdvance, 0) / font.unitsPerEm;

/**
 * Width of `text` in em. Runs Inter covers are laid out by Inter (kerning included); characters it
 * lacks are measured in DejaVu Sans (what fontconfig falls back to here), and anything neither
 * covers counts as a full em (CJK and the like are full-width), an upper bound rather than a guess.
 */
export function measureEm(text: string, weight: Weight = 400): number {
  const f = face(weight);
  const hit = f.cache.get(text);
  if (hit !== undefined) return hit;
  let width = 0;
  let run = '';
  let runFont: fontkit.Font | null = f.font;
  const flush = () => {
    if (run) width += runFont ? runAdvance(runFont, run) : [...run].length;
    run = '';
  };
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const font = f.font.hasGlyphForCodePoint(cp) ? f.font : f.fallback?.hasGlyphForCodePoint(cp) ? f.fallback : null;
    if (font !== runFont) {
      flush();
      runFont = font;
    }
    run += ch;
  }
  flush();
  if (f.cache.size >= CACHE_MAX) f.cache.clear();
  f.cache.set(text, width);
  return width;
}

/** Width of `text` in pixels at `size` px. */
export const measure = (text: string, size: number, weight: Weight = 400) => measureEm(text, weight) * size;

/** pango and fontkit agree to a fraction of a pixel; this keeps lines clear of the box edge anyway. */
const SAFETY = 0.985;
export const ELLIPSIS = '…';

/** Split a word that is wider than the line on its own at character boundaries. */
function breakWord(word: string, size: number, width: number, weight: Weight): string[] {
  const parts: string[] = [];
  let cur = '';
  for (const ch of word) {
    if (cur && measure(cur + ch, size, weight) > width) {
      parts.push(cur);
      cur = ch;
    } else cur += ch;
  }
  if (cur) parts.push(cur);
  return parts;
}

/** Greedy wrap by measured width: as many words per line as fit, over-long words broken. */
export function wrap(text: string, size: number, width: number, weight: Weight = 400): string[] {
  const limit = width * SAFETY;
  const lines: string[] = [];
  let cur = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const candidate = cur ? `${cur} ${word}` : word;
    if (measure(candidate, size, weight) <= limit) {
      cur = candidate;
      continue;
    }
    if (cur) lines.push(cur);
    if (measure(word, size, weight) <= limit) cur = word;
    else {
      const parts = breakWord(word, size, limit, weight);
      lines.push(...parts.slice(0, -1));
      cur = parts.at(-1) ?? '';
    }
  }
  if (cur) lines.push(cur);
  return lines;
}

/** `line` shortened (by words, then characters) until it and a trailing ellipsis fit `width`. */
export function ellipsize(line: string, size: number, width: number, weight: Weight = 400): string {
  const limit = width * SAFETY;
  let s = line.trimEnd();
  while (s && measure(s + ELLIPSIS, size, weight) > limit) {
    const cut = s.lastIndexOf(' ');
    s = (
      cut > 0 && measure(s.slice(0, cut) + ELLIPSIS, size, weight) <= limit
        ? s.slice(0, cut)
        : [...s].slice(0, -1).join('')
    ).trimEnd();
  }
  return s + ELLIPSIS;
}

/** How a block of text may be set. Sizes in px; `lineHeight` is a multiple of the size. */
export interface FitStyle {
  weight: Weight;
  maxSize: number;
  minSize: number;
  lineHeight: number;
  /** Space between paragraphs (bullets), as a multiple of the size. */
  gap?: number;
  /** Try one line at sizes down to this before wrapping (titles: shrink, then wrap). */
  oneLineDownTo?: number;
}

/** A fitted block: one size for all paragraphs, each paragraph's lines, and the height used. */
export interface Fitted {
  weight: Weight;
  size: number;
  lineHeight: number;
  gap: number;
  paragraphs: string[][];
  height: number;
  /** True when text had to be cut (ellipsis or paragraphs left out). */
  truncated: boolean;
}

const heightOf = (paras: string[][], lh: number, gap: number) =>
  paras.reduce((a, p) => a + p.length * lh, 0) + Math.max(0, paras.length - 1) * gap;

/**
 * Fit paragraphs into a w×h box. Rule: shrink (optionally on one line first), then wrap, and at
 * the smallest size cap lines per paragraph, then drop trailing paragraphs, ellipsizing the last
 * line shown. Every line of the result measures at most `w` and the block at most `h`.
 */
export function fitBlock(paragraphs: string[], box: { w: number; h: number }, style: FitStyle): Fitted {
  const paras = paragraphs.map((p) => p.replace(/\s+/g, ' ').trim()).filter(Boolean);
  const sizes: number[] = [];
  for (let s = style.maxSize; s > style.minSize; s = Math.floor(s * 0.94)) sizes.push(s);
  sizes.push(style.minSize);
  const at = (size: number, lines: string[][], truncated = false): Fitted => {
    const lh = Math.round(size * style.lineHeight);
    const gap = Math.round(size * (style.gap ?? 0));
    return {
      weight: style.weight,
      size,
      lineHeight: lh,
      gap,
      paragraphs: lines,
      height: heightOf(lines, lh, gap),
      truncated,
    };
  };
  if (!paras.length) return at(style.maxSize, []);
  if (style.oneLineDownTo !== undefined && paras.length === 1) {
    for (const size of sizes.filter((s) => s >= style.oneLineDownTo!)) {
      const r = at(size, [[paras[0]!]]);
      if (measure(paras[0]!, size, style.weight) <= box.w * SAFETY && r.height <= box.h) return r;
    }
  }
  for (const size of sizes) {
    const r = at(
      size,
      paras.map((p) => wrap(p, size, box.w, style.weight)),
    );
    if (r.height <= box.h) return r;
  }
  // Smallest size and still too tall: fewer lines per paragraph, then fewer paragraphs.
  const size = style.minSize;
  const wrapped = paras.map((p) => wrap(p, size, box.w, style.weight));
  const cap = (lines: string[], n: number) =>
    lines.length <= n ? lines : [...lines.slice(0, n - 1), ellipsize(lines[n - 1]!, size, box.w, style.weight)];
  for (let n = Math.max(...wrapped.map((l) => l.length)) - 1; n >= 1; n--) {
    const r = at(
      size,
      wrapped.map((l) => cap(l, n)),
      true,
    );
    if (r.height <= box.h) return r;
  }
  const one = wrapped.map((l) => cap(l, 1));
  for (let k = one.length - 1; k >= 1; k--) {
    const kept = one.slice(0, k);
    const last = kept[k - 1]![0]!;
    kept[k - 1] = [last.endsWith(ELLIPSIS) ? last : ellipsize(last, size, box.w, style.weight)];
    const r = at(size, kept, true);
    if (r.height <= box.h) return r;
  }
  return at(size, [], true);
}
