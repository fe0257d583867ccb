import type { OutlineItem } from '../../contracts/presentations';

/** The slide layouts the renderer draws. */
export const LAYOUTS = ['title', 'section', 'bullets', 'two-columns', 'big-number', 'quote'] as const;
export type LayoutKind = (typeof LAYOUTS)[number];

/**
 * A figure worth showing large: a percentage, a multiple, an amount of money, a number with
 * thousands separators or a k/m/bn suffix. Plain small numbers ("Q2", "3 teams") are not.
 */
const FIGURE =
  /(?:[$€£¥]\s?\d[\d,.]*(?:\s?(?:k|m|bn|million|billion)\b)?|[+-]?\d[\d,.]*\s?(?:%|percent\b|x\b|×)|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+(?:\.\d+)?\s?(?:k|m|bn|million|billion)\b)/i;
const QUOTED = /^\s*["“‘«'].{8,}["”’»']\s*$/s;
const SECTION_TITLE = /^(?:agenda|section\b|part\s+\w+|chapter\b|questions|q&a|thank you)/i;

/** The first figure in `text`, or null. */
export function figureIn(text: string): string | null {
  return FIGURE.exec(text)?.[0].trim() ?? null;
}

/** True when `text` is a quotation (wrapped in quote marks). */
export const isQuote = (text: string) => QUOTED.test(text);

/**
 * Layout from the outline item: the first slide is the title slide; no bullets (or a section-like
 * title with at most one line) makes a section divider; a quoted sentence a quote; a short slide
 * whose first bullet carries a figure a big number; many short bullets two columns; else bullets.
 */
export function chooseLayout(slide: OutlineItem, index: number): LayoutKind {
  const bullets = slide.bullets.map((b) => b.trim()).filter(Boolean);
  if (index === 0) return 'title';
  if (!bullets.length || (bullets.length === 1 && SECTION_TITLE.test(slide.title) && bullets[0]!.length <= 120))
    return 'section';
  if (bullets.length <= 2 && isQuote(bullets[0]!)) return 'quote';
  if (bullets.length <= 3 && bullets[0]!.length <= 200 && figureIn(bullets[0]!)) return 'big-number';
  if (bullets.length >= 6 && bullets.every((b) => b.length <= 70)) return 'two-columns';
  return 'bullets';
}
