import type { OutlineItem } from '../../../contracts/presentations';
import type { AuthoredOutline, DeckEngine, OutlineInput } from './deck.engine';

const STOP = new Set(
  'about above after again also and another any are because been before being between both but can could does doing down during each even every from further have having here into itself just more most much must need only other over same should some such than that their them then there these they this those through under until very what when where which while will with within without would your yours ours our we us its it is was were has had not per next last new'.split(
    ' ',
  ),
);

/** The engine's name in results: v2 splits the brief's facts into topics and never pads. */
export const LOCAL_OUTLINE_ENGINE = 'local-outline-v2';
/**
 * At most this many bullets on a slide, and sections in an agenda or summary: OutlineItem's
 * maximum (contracts/presentations.ts). A section's surplus sentences are left out, and counted.
 */
const MAX_BULLETS = 12;
const MAX_BULLET_CHARS = 300;
/** OutlineItem's title maximum; the deck name may be longer (255). */
const MAX_TITLE_CHARS = 200;

const cap = (w: string) => (w ? w[0]!.toUpperCase() + w.slice(1) : w);
const lower = (t: string) => t.replace(/^\p{Lu}(?!\p{Lu})/u, (c) => c.toLowerCase());
const norm = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
/** `s` in at most `max` characters: cut at a word in its last third, else mid-word, ending in "…". */
const clipTo = (s: string, max: number) => {
  if (s.length <= max) return s;
  const cut = s.slice(0, max - 1).replace(/[\ud800-\udbff]$/, '');
  const space = cut.lastIndexOf(' ');
  return `${cut.slice(0, space > (max * 2) / 3 ? space : cut.length).trimEnd()}…`;
};
const clip = (s: string) => clipTo(s, MAX_BULLET_CHARS);
const clipTitle = (s: string) => clipTo(s, MAX_TITLE_CHARS);

/** The brief's sentences (and list lines), cleaned of list markers, in order, without duplicates. */
export function briefSentences(brief: string): string[] {
  const seen = new Set<string>();
  return brief
    .split(/(?<=[.!?;])\s+|\n+/)
    .map((s) =>
      s
        .replace(/^\s*(?:[-*•–]|\d+[.)])\s+/, '')
        .replace(/\s+/g, ' ')
        .trim()
        .replace(/[.;]$/, ''),
    )
    .filter((s) => {
      const k = norm(s);
      if (s.length <= 3 || !k || seen.has(k)) return false;
      seen.add(k);
      return true;
    });
}

/** Words of 4+ letters that are not stop words, most frequent first (ties: first seen). */
export function keywords(text: string, exclude: ReadonlySet<string> = new Set()): string[] {
  const counts = new Map<string, { n: number; first: number }>();
  let i = 0;
  for (const w of text.toLowerCase().split(/[^\p{L}\p{N}-]+/u)) {
    i++;
    if (w.length < 4 || STOP.has(w) || exclude.has(w) || /^[\d-]+$/.test(w)) continue;
    const c = counts.get(w);
    if (c) c.n++;
    else counts.set(w, { n: 1, first: i });
  }
  return [...counts.entries()].sort((a, b) => b[1].n - a[1].n || a[1].first - b[1].first).map(([w]) => w);
}

/** Figures a reader remembers: percentages, money, multiples, large or suffixed numbers. */
const FIGURES =
  /[$€£¥]\s?\d[\d,.]*(?:\s?(?:k|m|bn|million|billion)\b)?|[+-]?\d[\d,.]*\s?(?:%|x\b|×)|\b\d{1,3}(?:,\d{3})+\b|\b\d+(?:\.\d+)?\s?(?:k|m|bn|million|billion)\b/gi;

/** Business topics a brief's sentences are sorted into (title, words that signal it). */
const TOPICS: [string, RegExp][] = [
  [
    'Revenue',
    /\b(?:revenue|sales|bookings|arr|mrr|growth|grew|grow|grows|deals?|pipeline|quota|win rate|upsell|orders?)\b/gi,
  ],
  ['Customers', /\b(?:customers?|clients?|churn|retention|renewals?|nps|satisfaction|users?|logos?)\b/gi],
  [
    'Markets',
    /\b(?:markets?|expand|expanding|expansion|regions?|countr(?:y|ies)|international|emea|apac|americas|competitors?|competition|partners?|partnerships?)\b/gi,
  ],
  ['Product', /\b(?:products?|features?|releases?|released|launch(?:es|ed)?|platform|beta|integrations?)\b/gi],
  [
    'Team',
    /\b(?:hir(?:e|es|ing|ed)|headcount|team|teams|staff|people|recruit\w*|engineers|reps?|ramp|onboarding|training)\b/gi,
  ],
  ['Pricing', /\b(?:pricing|prices?|priced|discount\w*|list price|packaging)\b/gi],
  ['Costs', /\b(?:costs?|margins?|budget|spend|spending|expenses?|profit\w*|cash|burn|savings?)\b/gi],
  ['Risks', /\b(?:risks?|threats?|challenges?|concerns?|blockers?|delays?|headwinds?)\b/gi],
  ['Next steps', /\b(?:next|plan|plans|planned|goals?|targets?|priorit\w+|roadmap|will)\b/gi],
];

/** The topic a sentence speaks to most (most signal words, ties: the earliest), or null. */
function topicOf(sentence: string): string | null {
  // A sentence that opens with a topic's label ("Risks: …") belongs to that topic.
  const label = /^([\p{L} ]{3,30}):/u.exec(sentence)?.[1];
  const labelled = label && TOPICS.find(([, re]) => new RegExp(`^(?:${re.source})$`, 'i').test(label.trim()));
  if (labelled) return labelled[0];
  let best: { title: string; n: number; at: number } | null = null;
  for (const [title, re] of TOPICS) {
    const hits = [...sentence.matchAll(re)];
    if (!hits.length) continue;
    const cand = { title, n: hits.length, at: hits[0]!.index };
    if (!best || cand.n > best.n || (cand.n === best.n && cand.at < best.at)) best = cand;
  }
  return best?.title ?? null;
}

interface Section {
  title: string;
  facts: string[];
  /** The titles merged into this one ("Team", "Customers" → "Team and customers"). */
  parts: string[];
  /** The title of the section this one was split from (its own title when not split). */
  root: string;
}

/** "Team and customers"; past four parts "Revenue, customers, markets and 3 more". */
const joinTitles = (parts: string[]) => {
  if (parts.length === 1) return parts[0]!;
  if (parts.length > 4)
    return `${parts
      .slice(0, 3)
      .map((p, i) => (i ? lower(p) : p))
      .join(', ')} and ${parts.length - 3} more`;
  return `${parts
    .slice(0, -1)
    .map((p, i) => (i ? lower(p) : p))
    .join(', ')} and ${lower(parts.at(-1)!)}`;
};

/**
 * local-outline-v2: an offline, deterministic outline author that only restates the brief. Each
 * sentence of the brief is used once: the first as the title slide's subtitle (when the brief has
 * facts to spare), the rest sorted into topic sections (revenue, customers, markets, product,
 * team, pricing, costs, risks, next steps; sentences of no known topic keep their place and
 * are titled by their keywords). Sections are split or merged towards the slide count asked; an
 * agenda lists them and a summary gives each its figures or key words. A short brief makes fewer
 * slides, never padding: the deck pool notes when fewer slides were written than asked. Every item
 * fits OutlineItem: titles are clipped to 200 characters, a slide shows at most 12 sentences (a
 * brief far longer than the deck asked loses its surplus, counted in `leftOut`), and past 12
 * sections the agenda and summary list the sections before they were split (at most 12).
 */
export function outlineLocally(input: OutlineInput): { items: OutlineItem[]; leftOut: number } {
  const nameWords = new Set(norm(input.name).split(' '));
  const nameKey = norm(input.name);
  let facts = briefSentences(input.brief).filter((s) => norm(s) !== nameKey);
  if (!facts.length && input.brief.trim() && norm(input.brief) !== nameKey)
    facts = [input.brief.trim().replace(/\s+/g, ' ')];
  const wantAgenda = input.slideCount >= 5;
  const bodyMax = Math.max(1, input.slideCount - 2 - (wantAgenda ? 1 : 0));

  const subtitle = facts.length > bodyMax ? facts.shift() : undefined;
  const sections = sectionsOf(facts, nameWords);
  // At most 12 sections before splitting, so the agenda and summary can always name each.
  while (sections.length > Math.min(bodyMax, MAX_BULLETS)) mergeSmallest(sections);
  splitTowards(sections, bodyMax, nameWords);
  // A section too long for a slide takes the slide of two short ones, merged, before any is dropped.
  while (sections.some((s) => s.facts.length > MAX_BULLETS) && mergeFitting(sections))
    splitTowards(sections, bodyMax, nameWords);
  let leftOut = 0;
  for (const s of sections) {
    leftOut += Math.max(0, s.facts.length - MAX_BULLETS);
    s.facts = s.facts.slice(0, MAX_BULLETS);
  }
  const listed = sections.length <= MAX_BULLETS ? sections : byRoot(sections);

  const items: OutlineItem[] = [];
  items.push({
    title: clipTitle(input.name),
    bullets: [
      ...(subtitle ? [clip(subtitle)] : []),
      ...(input.companyName ? [`Presented by ${input.companyName}`] : []),
    ],
  });
  if (wantAgenda && listed.length >= 2) items.push({ title: 'Agenda', bullets: listed.map((s) => clipTitle(s.title)) });
  for (const s of sections) items.push({ title: clipTitle(s.title), bullets: s.facts.map(clip) });
  if (listed.length) items.push({ title: 'Summary', bullets: listed.map((s) => clip(takeaway(s, nameWords))) });
  return { items, leftOut };
}

/** The outline of {@link outlineLocally}, without the count of sentences left out. */
export const authorLocally = (input: OutlineInput): OutlineItem[] => outlineLocally(input).items;

/** The sections as they were before splitting: split halves joined again under their root title. */
function byRoot(sections: Section[]): Section[] {
  const roots = new Map<string, Section>();
  for (const s of sections) {
    const r = roots.get(s.root);
    if (r) r.facts.push(...s.facts);
    else roots.set(s.root, { title: s.root, facts: [...s.facts], parts: [s.root], root: s.root });
  }
  return [...roots.values()];
}

/** Group facts by topic (in order of first appearance); runs of unknown topic stay together. */
function sectionsOf(facts: string[], nameWords: ReadonlySet<string>): Section[] {
  const byTopic = new Map<string, Section>();
  const sections: Section[] = [];
  let loose: Section | null = null;
  for (const fact of facts) {
    const topic = topicOf(fact);
    if (!topic) {
      if (!loose) {
        loose = { title: '', facts: [], parts: [], root: '' };
        sections.push(loose);
      }
      loose.facts.push(fact);
      continue;
    }
    loose = null;
    let s = byTopic.get(topic);
    if (!s) {
      s = { title: topic, facts: [], parts: [topic], root: topic };
      byTopic.set(topic, s);
      sections.push(s);
    }
    s.facts.push(fact);
  }
  const used = new Set(sections.map((s) => s.title).filter(Boolean));
  for (const s of sections.filter((x) => !x.title)) {
    s.title = keywordTitle(s.facts, nameWords, used);
    s.root = s.title;
    s.parts = [s.title];
  }
  return sections;
}

/** A title from a section's own key words ("Brand and story"), distinct from those in use. */
function keywordTitle(facts: string[], nameWords: ReadonlySet<string>, used: Set<string>): string {
  const kws = keywords(facts.join(' '), nameWords);
  const candidates = [
    kws.length >= 2 ? `${cap(kws[0]!)} and ${kws[1]}` : null,
    ...kws.map(cap),
    'Key points',
    'Further points',
  ];
  let title = candidates.find((c): c is string => Boolean(c) && !used.has(c!)) ?? `Points ${used.size + 1}`;
  for (let i = 2; used.has(title); i++) title = `Points ${i}`;
  used.add(title);
  return title;
}

/** Merge the adjacent pair of sections with the fewest facts between them. */
function mergeSmallest(sections: Section[]) {
  let at = 0;
  for (let i = 1; i < sections.length - 1; i++)
    if (
      sections[i]!.facts.length + sections[i + 1]!.facts.length <
      sections[at]!.facts.length + sections[at + 1]!.facts.length
    )
      at = i;
  mergeAt(sections, at);
}

/**
 * Merge the adjacent pair of sections, neither split, with the fewest facts if they fit on one
 * slide; false when no pair does. Unsplit only, so the merged titles stay readable and the number
 * of root sections (the agenda) only falls.
 */
function mergeFitting(sections: Section[]): boolean {
  const roots = new Map<string, number>();
  for (const s of sections) roots.set(s.root, (roots.get(s.root) ?? 0) + 1);
  const whole = (s: Section) => roots.get(s.root) === 1;
  let at = -1;
  let best = MAX_BULLETS + 1;
  for (let i = 0; i < sections.length - 1; i++) {
    const [a, b] = [sections[i]!, sections[i + 1]!];
    const n = a.facts.length + b.facts.length;
    if (whole(a) && whole(b) && n < best) [at, best] = [i, n];
  }
  if (at < 0) return false;
  mergeAt(sections, at);
  return true;
}

/** Merge sections `at` and `at + 1` into one titled by both. */
function mergeAt(sections: Section[], at: number) {
  const [a, b] = [sections[at]!, sections[at + 1]!];
  const parts = [...a.parts, ...b.parts];
  const title = joinTitles(parts);
  sections.splice(at, 2, { title, facts: [...a.facts, ...b.facts], parts, root: title });
}

/** Split the largest section in halves (the second titled by its own key word) until `max` or one fact each. */
function splitTowards(sections: Section[], max: number, nameWords: ReadonlySet<string>) {
  const used = new Set(sections.map((s) => s.title));
  while (sections.length < max) {
    const at = sections.reduce((best, s, i) => (s.facts.length > sections[best]!.facts.length ? i : best), 0);
    const s = sections[at];
    if (!s || s.facts.length < 2) return;
    const half = Math.ceil(s.facts.length / 2);
    const second = s.facts.slice(half);
    const word = keywords(second.join(' '), new Set([...nameWords, ...norm(s.title).split(' ')])).find(
      (k) => !used.has(`${s.title}: ${cap(k)}`),
    );
    const title = word ? `${s.title}: ${cap(word)}` : `${s.title}, continued`;
    used.add(title);
    sections.splice(
      at,
      1,
      { ...s, facts: s.facts.slice(0, half) },
      { title, facts: second, parts: [title], root: s.root },
    );
  }
}

/** A section in one line: its title with the figures it quotes, else its two key words. */
function takeaway(s: Section, nameWords: ReadonlySet<string>): string {
  const text = s.facts.join(' ');
  const figures = [...new Set([...text.matchAll(FIGURES)].map((m) => m[0].trim()))];
  const words = keywords(text, new Set([...nameWords, ...norm(s.title).split(' ')]));
  const parts = figures.length ? figures.slice(0, 3) : words.slice(0, 2);
  return parts.length ? `${s.title}: ${parts.join(', ')}` : s.title;
}

export function createLocalDeckEngine(): DeckEngine {
  return {
    name: LOCAL_OUTLINE_ENGINE,
    offline: true,
    async authorOutline(input, ctx): Promise<AuthoredOutline> {
      await ctx.progress('outlining', `Writing an outline of up to ${input.slideCount} slides from the brief`);
      const { items, leftOut } = outlineLocally(input);
      const notes = leftOut
        ? [
            `outline: ${leftOut} ${leftOut === 1 ? 'sentence of the brief was' : 'sentences of the brief were'} left out (a slide holds at most ${MAX_BULLETS} bullets); ask for more slides to include them`,
          ]
        : [];
      return { items, notes };
    },
  };
}
