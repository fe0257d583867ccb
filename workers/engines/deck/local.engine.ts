import type { OutlineItem } from '../../../contracts/presentations';
import type { DeckEngine, OutlineInput } from './deck.engine';

const STOP = new Set('about above after again also and another any are because been before being between both but can could does doing down during each even every from further have having here into itself just more most much must need only other over same should some such than that their them then there these they this those through under until very what when where which while will with within without would your yours ours that'.split(' '));

const clip = (s: string, n = 90) => (s.length > n ? `${s.slice(0, n - 3).trimEnd()}...` : s);
const cap = (w: string) => w[0]!.toUpperCase() + w.slice(1);

export function briefSentences(brief: string): string[] {
  return brief
    .split(/(?<=[.!?;])\s+|\n+/)
    .map((s) => s.replace(/^[-*•\d.)\s]+/, '').replace(/\s+/g, ' ').trim().replace(/[.;]$/, ''))
    .filter((s) => s.length > 3);
}

/** Words of 4+ letters that are not stop words, most frequent first (ties: first seen). */
export function keywords(text: string): string[] {
  const counts = new Map<string, { n: number; first: number }>();
  let i = 0;
  for (const w of text.toLowerCase().split(/[^\p{L}\p{N}-]+/u)) {
    i++;
    if (w.length < 4 || STOP.has(w) || /^\d+$/.test(w)) continue;
    const c = counts.get(w);
    if (c) c.n++;
    else counts.set(w, { n: 1, first: i });
  }
  return [...counts.entries()].sort((a, b) => b[1].n - a[1].n || a[1].first - b[1].first).map(([w]) => w);
}

/**
 * local-outline-v1: an offline, deterministic outline author. Slide 1 is the title slide (the
 * deck name over the brief's first sentence); the middle slides take the brief's sentences in
 * order, a few per slide, titled by the keyword that leads their chunk; when the brief is short,
 * the brief's keywords carry the remaining slides; the last slide sums up the key themes.
 */
export function authorLocally(input: OutlineInput): OutlineItem[] {
  const sents = briefSentences(input.brief);
  const kws = keywords(input.brief);
  const middle = input.slideCount - 2;
  const slides: OutlineItem[] = [];
  slides.push({ title: input.name, bullets: [clip(sents[0] ?? input.brief.trim(), 120), ...(input.companyName ? [`Presented by ${input.companyName}`] : [])] });

  const body = sents.slice(1).length ? sents.slice(1) : sents;
  const usedTitles = new Set<string>();
  for (let i = 0; i < middle; i++) {
    const chunk = body.slice(Math.floor((i * body.length) / middle), Math.floor(((i + 1) * body.length) / middle)).slice(0, 4);
    let topic = keywords(chunk.join(' ')).find((k) => !usedTitles.has(k)) ?? kws.find((k) => !usedTitles.has(k)) ?? kws[i % Math.max(1, kws.length)] ?? `part ${i + 1}`;
    if (usedTitles.has(topic)) topic = `${topic} (${i + 1})`;
    usedTitles.add(topic);
    const bullets = chunk.length
      ? chunk.map((s) => clip(s))
      : [`What ${topic} means for ${input.name}`, `Where ${topic} stands today`, `Next steps on ${topic}`];
    slides.push({ title: cap(topic), bullets });
  }
  const themes = kws.slice(0, 4);
  slides.push({ title: 'Summary', bullets: themes.length ? themes.map((k) => `Key theme: ${cap(k)}`) : ['Thank you'] });
  return slides;
}

export function createLocalDeckEngine(): DeckEngine {
  return {
    name: 'local-outline-v1',
    async authorOutline(input, ctx) {
      await ctx.progress('outlining', `Writing a ${input.slideCount}-slide outline from the brief`);
      return authorLocally(input);
    },
  };
}
