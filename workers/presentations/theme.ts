import type { DeckTheme } from '../../contracts/presentations';

/** Built-in themes by `themeId`. */
export const THEMES: Record<string, DeckTheme> = {
  default: {
    id: 'default',
    source: 'builtin',
    background: '#f7f8fc',
    surface: '#ffffff',
    text: '#1d2330',
    accent: '#3b5bdb',
  },
  midnight: {
    id: 'midnight',
    source: 'builtin',
    background: '#101a33',
    surface: '#1b2747',
    text: '#f1f4ff',
    accent: '#3bc9db',
  },
  sunrise: {
    id: 'sunrise',
    source: 'builtin',
    background: '#fff6ec',
    surface: '#ffffff',
    text: '#3b2418',
    accent: '#f76707',
  },
  forest: {
    id: 'forest',
    source: 'builtin',
    background: '#f1f8f1',
    surface: '#ffffff',
    text: '#1b3320',
    accent: '#2f9e44',
  },
  ocean: {
    id: 'ocean',
    source: 'builtin',
    background: '#eef6fc',
    surface: '#ffffff',
    text: '#0b2a45',
    accent: '#1971c2',
  },
  mono: {
    id: 'mono',
    source: 'builtin',
    background: '#ffffff',
    surface: '#f3f3f3',
    text: '#111111',
    accent: '#555555',
  },
};

export type Rgb = [number, number, number];

export const hexToRgb = (hex: string): Rgb => {
  const h = hex.replace('#', '');
  const full = h.length === 3 ? [...h].map((c) => c + c).join('') : h;
  return [parseInt(full.slice(0, 2), 16), parseInt(full.slice(2, 4), 16), parseInt(full.slice(4, 6), 16)];
};
export const rgbToHex = (c: readonly number[]) =>
  `#${c.map((v) => Math.round(v).toString(16).padStart(2, '0')).join('')}`;
export const mix = (a: readonly number[], b: readonly number[], t: number): Rgb =>
  [0, 1, 2].map((i) => a[i]! * (1 - t) + b[i]! * t) as Rgb;

/** HSL saturation and lightness, 0–1. */
function satLight([r, g, b]: Rgb): { s: number; l: number } {
  const max = Math.max(r, g, b) / 255;
  const min = Math.min(r, g, b) / 255;
  const l = (max + min) / 2;
  const s = max === min ? 0 : l > 0.5 ? (max - min) / (2 - max - min) : (max - min) / (max + min);
  return { s, l };
}

/**
 * Brand colours from a page's HTML: the `theme-color` meta wins; otherwise the most frequent
 * saturated colour (hex or rgb() in inline styles and <style>) that is neither near-white,
 * near-black nor grey. The deck gets a light tint of it as background, white cards and dark text.
 * Returns null when the page names no usable colour.
 */
export function themeFromHtml(html: string, host: string): DeckTheme | null {
  const counts = new Map<string, number>();
  const add = (hex: string, weight = 1) => {
    const rgb = hexToRgb(hex);
    if (rgb.some((v) => Number.isNaN(v))) return;
    const { s, l } = satLight(rgb);
    if (s < 0.25 || l < 0.15 || l > 0.85) return;
    const key = rgbToHex(rgb);
    counts.set(key, (counts.get(key) ?? 0) + weight);
  };
  const meta =
    /<meta[^>]+name=["']theme-color["'][^>]*content=["'](#[0-9a-f]{3}(?:[0-9a-f]{3})?)["']/i.exec(html) ??
    /<meta[^>]+content=["'](#[0-9a-f]{3}(?:[0-9a-f]{3})?)["'][^>]*name=["']theme-color["']/i.exec(html);
  if (meta?.[1]) add(meta[1], 1000);
  for (const m of html.matchAll(/#([0-9a-f]{6}|[0-9a-f]{3})\b/gi)) add(`#${m[1]}`);
  for (const m of html.matchAll(/rgba?\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})/gi))
    add(rgbToHex([Number(m[1]), Number(m[2]), Number(m[3])].map((v) => Math.min(255, v))));
  const best = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0];
  if (!best) return null;
  const accent = hexToRgb(best[0]);
  return {
    id: `brand:${host}`,
    source: 'brand',
    background: rgbToHex(mix(accent, [255, 255, 255], 0.92)),
    surface: '#ffffff',
    text: rgbToHex(mix(accent, [16, 18, 24], 0.85)),
    accent: best[0],
  };
}
