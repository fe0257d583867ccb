import { COLOUR_WORDS, colourWordsIn, paletteFor, prng, type Rgb } from './procedural';

/**
 * The scene composer behind the local image renderers (local-scene-v2, moonlight-scene-v2). A
 * prompt is read against a documented vocabulary (SUBJECTS, TIMES, WEATHERS, STYLES): the
 * subjects it names are laid out on a sky / horizon / ground-or-sea stage lit for the time of
 * day, as SVG vector shapes with gradients and glows. The SVG is rasterised by sharp (librsvg)
 * and textured for the style by texture.ts. A prompt naming no subject falls back to colour and
 * mood (colour words, mood words, reference colours) as an abstract composition. Pure function of
 * prompt, style and seed: numbers are written with toFixed, the PRNG is seeded, no clock.
 */

/** Depth layer a subject is drawn in, back to front. */
export type Layer = 'sky' | 'far' | 'mid' | 'near';

/** One vocabulary subject: the words that name it and how it is placed. */
export interface SubjectEntry {
  id: string;
  /** Words and phrases that name it (plurals with s/es are matched too). */
  words: string[];
  layer: Layer;
  /** Naming it puts water on the stage (sea, boat, lighthouse...). */
  water?: boolean;
}

/** The subject vocabulary, exported so the README lists exactly what the composer knows. */
export const SUBJECTS: readonly SubjectEntry[] = [
  { id: 'sun', words: ['sun', 'sunshine'], layer: 'sky' },
  { id: 'moon', words: ['moon', 'moonlit', 'moonlight', 'crescent'], layer: 'sky' },
  { id: 'stars', words: ['star', 'starry', 'starlight', 'galaxy', 'milky way'], layer: 'sky' },
  { id: 'clouds', words: ['cloud', 'cloudy', 'overcast'], layer: 'sky' },
  { id: 'rainbow', words: ['rainbow'], layer: 'sky' },
  { id: 'aurora', words: ['aurora', 'northern lights'], layer: 'sky' },
  { id: 'planet', words: ['planet', 'saturn', 'jupiter'], layer: 'sky' },
  { id: 'bird', words: ['bird', 'seagull', 'gull', 'crow', 'eagle', 'flock'], layer: 'sky' },
  { id: 'airplane', words: ['airplane', 'aeroplane', 'plane', 'jet', 'aircraft'], layer: 'sky' },
  { id: 'balloon', words: ['hot air balloon', 'balloon'], layer: 'sky' },
  { id: 'kite', words: ['kite'], layer: 'sky' },
  { id: 'mountain', words: ['mountain', 'peak', 'alps', 'summit'], layer: 'far' },
  { id: 'hills', words: ['hill', 'rolling hills', 'valley'], layer: 'far' },
  { id: 'forest', words: ['forest', 'woods', 'woodland', 'jungle'], layer: 'far' },
  { id: 'city', words: ['city skyline', 'skyline', 'city', 'skyscraper', 'downtown', 'metropolis'], layer: 'far' },
  { id: 'island', words: ['island', 'islet'], layer: 'far', water: true },
  { id: 'volcano', words: ['volcano', 'lava'], layer: 'far' },
  { id: 'pyramid', words: ['pyramid'], layer: 'far' },
  { id: 'desert', words: ['desert', 'dune', 'sand dunes'], layer: 'far' },
  {
    id: 'sea',
    words: ['sea', 'ocean', 'seascape', 'lagoon', 'harbour', 'harbor', 'bay', 'coast', 'waves', 'shore'],
    layer: 'far',
    water: true,
  },
  { id: 'lake', words: ['lake', 'pond', 'reflection'], layer: 'far', water: true },
  { id: 'beach', words: ['beach', 'sand'], layer: 'near', water: true },
  { id: 'cliff', words: ['cliff', 'crag', 'headland'], layer: 'mid', water: true },
  { id: 'waterfall', words: ['waterfall', 'cascade'], layer: 'mid' },
  { id: 'river', words: ['river', 'stream', 'creek'], layer: 'mid' },
  { id: 'road', words: ['road', 'path', 'street', 'highway', 'trail'], layer: 'mid' },
  { id: 'bridge', words: ['bridge'], layer: 'mid' },
  { id: 'lighthouse', words: ['lighthouse', 'beacon'], layer: 'mid', water: true },
  { id: 'house', words: ['house', 'home', 'cottage', 'villa', 'farmhouse'], layer: 'mid' },
  { id: 'cabin', words: ['cabin', 'hut', 'chalet', 'log cabin'], layer: 'mid' },
  { id: 'castle', words: ['castle', 'fortress', 'palace'], layer: 'mid' },
  { id: 'tower', words: ['tower', 'spire', 'clock tower'], layer: 'mid' },
  { id: 'church', words: ['church', 'chapel', 'cathedral', 'temple'], layer: 'mid' },
  { id: 'windmill', words: ['windmill', 'wind turbine'], layer: 'mid' },
  { id: 'tent', words: ['tent', 'camp', 'campsite'], layer: 'mid' },
  { id: 'tree', words: ['tree', 'oak', 'maple', 'willow'], layer: 'mid' },
  { id: 'pine', words: ['pine', 'fir', 'spruce', 'christmas tree'], layer: 'mid' },
  { id: 'palm', words: ['palm tree', 'palm'], layer: 'mid' },
  { id: 'boat', words: ['boat', 'sailboat', 'yacht', 'canoe', 'rowboat'], layer: 'mid', water: true },
  { id: 'ship', words: ['ship', 'steamship', 'ferry', 'galleon'], layer: 'mid', water: true },
  { id: 'car', words: ['car', 'truck', 'van', 'taxi'], layer: 'near' },
  { id: 'train', words: ['train', 'locomotive', 'railway'], layer: 'mid' },
  { id: 'lamppost', words: ['lamp post', 'lamppost', 'streetlight', 'street lamp', 'lantern'], layer: 'near' },
  { id: 'fence', words: ['fence', 'gate'], layer: 'near' },
  { id: 'bench', words: ['bench'], layer: 'near' },
  {
    id: 'person',
    words: [
      'person silhouette',
      'person',
      'man',
      'woman',
      'child',
      'people',
      'figure',
      'silhouette',
      'hiker',
      'traveller',
      'traveler',
      'girl',
      'boy',
    ],
    layer: 'near',
  },
  { id: 'cat', words: ['cat', 'kitten'], layer: 'near' },
  { id: 'dog', words: ['dog', 'puppy'], layer: 'near' },
  { id: 'fox', words: ['fox'], layer: 'near' },
  { id: 'deer', words: ['deer', 'stag', 'elk', 'reindeer'], layer: 'near' },
  { id: 'horse', words: ['horse', 'pony'], layer: 'near' },
  { id: 'whale', words: ['whale', 'dolphin'], layer: 'mid', water: true },
  {
    id: 'flower',
    words: ['flower', 'rose', 'tulip', 'daisy', 'sunflower', 'blossom', 'poppy', 'garden'],
    layer: 'near',
  },
  { id: 'rock', words: ['rock', 'boulder', 'stone'], layer: 'near' },
  { id: 'campfire', words: ['campfire', 'bonfire', 'fire'], layer: 'near' },
  { id: 'field', words: ['field', 'meadow', 'grass', 'prairie', 'farmland', 'wheat'], layer: 'near' },
];

/** Time of day. */
export type TimeOfDay = 'day' | 'dawn' | 'sunset' | 'dusk' | 'night';
/** Times of day and the words that name them. */
export const TIMES: Record<TimeOfDay, string[]> = {
  dawn: ['dawn', 'sunrise', 'daybreak', 'early morning'],
  day: ['day', 'daytime', 'noon', 'midday', 'morning', 'afternoon', 'sunny', 'daylight'],
  sunset: ['sunset', 'golden hour', 'sundown'],
  dusk: ['dusk', 'twilight', 'evening', 'blue hour'],
  night: ['night', 'midnight', 'nighttime', 'dark'],
};

/** Weather and season settings. */
export type Weather = 'snow' | 'rain' | 'fog' | 'storm' | 'autumn';
export const WEATHERS: Record<Weather, string[]> = {
  snow: ['snow', 'snowy', 'winter', 'snowfall', 'frozen', 'ice', 'icy', 'blizzard'],
  rain: ['rain', 'rainy', 'raining', 'drizzle', 'wet'],
  fog: ['fog', 'foggy', 'mist', 'misty', 'haze', 'hazy'],
  storm: ['storm', 'stormy', 'thunder', 'lightning', 'thunderstorm'],
  autumn: ['autumn', 'fall', 'autumnal'],
};

/** Rendering style (texture pass, texture.ts). */
export type Style = 'oil' | 'watercolour' | 'flat' | 'photo';
export const STYLES: Record<Style, string[]> = {
  oil: ['oil painting', 'oil', 'painting', 'painted', 'impasto', 'painterly', 'canvas', 'brush strokes'],
  watercolour: ['watercolour', 'watercolor', 'aquarelle', 'wash', 'gouache'],
  flat: [
    'flat vector',
    'flat',
    'vector',
    'poster',
    'minimal',
    'minimalist',
    'illustration',
    'cartoon',
    'icon',
    'graphic',
  ],
  photo: [
    'photo',
    'photograph',
    'photography',
    'photorealistic',
    'realistic',
    'cinematic',
    'dslr',
    'photo-like lighting',
  ],
};

/** What the composer understood of a prompt (reported in tests and notes). */
export interface SceneSpec {
  subjects: { id: string; colour: Rgb | null }[];
  time: TimeOfDay | null;
  weather: Weather[];
  style: Style | null;
  /** Colour words not attached to a subject ("a red kite": red goes to the kite). */
  colours: Rgb[];
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const phrase = (w: string) => new RegExp(`(?:^| )${esc(w)}(?:s|es)?(?= |$)`);
const matcher = (words: string[]) => words.map((w) => ({ w, re: phrase(w) }));
const SUBJECT_MATCHERS = SUBJECTS.map((s) => ({ s, m: matcher(s.words) }));
const TIME_MATCHERS = (Object.entries(TIMES) as [TimeOfDay, string[]][]).map(([t, w]) => ({ t, m: matcher(w) }));
const WEATHER_MATCHERS = (Object.entries(WEATHERS) as [Weather, string[]][]).map(([t, w]) => ({ t, m: matcher(w) }));
const STYLE_MATCHERS = (Object.entries(STYLES) as [Style, string[]][]).map(([t, w]) => ({ t, m: matcher(w) }));

/** Where in `text` the first of `m` occurs (its index), or -1. */
function firstHit(text: string, m: { re: RegExp }[]): { at: number; len: number } {
  let best = { at: -1, len: 0 };
  for (const { re } of m) {
    const r = re.exec(text);
    if (r && (best.at < 0 || r.index < best.at)) best = { at: r.index, len: r[0].length };
  }
  return best;
}

/**
 * Read a prompt (and the optional style text) against the vocabulary. Subjects keep prompt order
 * (the first named is the main subject); a colour word right before a subject colours it.
 */
export function parsePrompt(prompt: string, styleText = ''): SceneSpec {
  const text = prompt
    .toLowerCase()
    .replace(/[^a-z]+/g, ' ')
    .trim();
  const hits: { id: string; at: number; len: number; colour: Rgb | null }[] = [];
  for (const { s, m } of SUBJECT_MATCHERS) {
    const hit = firstHit(text, m);
    if (hit.at < 0) continue;
    const before = text.slice(0, hit.at).trim().split(' ').pop() ?? '';
    hits.push({ id: s.id, at: hit.at, len: hit.len, colour: COLOUR_WORDS[before] ?? null });
  }
  // A word inside a longer phrase of another subject is that phrase's: "palm tree" is no tree.
  const inside = (h: (typeof hits)[number]) =>
    hits.some((o) => o !== h && o.len > h.len && o.at <= h.at && h.at + h.len <= o.at + o.len);
  const found = hits.filter((h) => !inside(h)).sort((a, b) => a.at - b.at);
  const attached = new Set(found.filter((f) => f.colour).map((f) => f.colour));
  const times = TIME_MATCHERS.map(({ t, m }) => ({ t, at: firstHit(text, m).at }))
    .filter((x) => x.at >= 0)
    .sort((a, b) => a.at - b.at);
  const styleWords = `${styleText
    .toLowerCase()
    .replace(/[^a-z]+/g, ' ')
    .trim()} ${text}`.trim();
  const style =
    STYLE_MATCHERS.map(({ t, m }) => ({ t, at: firstHit(styleWords, m).at }))
      .filter((x) => x.at >= 0)
      .sort((a, b) => a.at - b.at)[0]?.t ?? null;
  return {
    subjects: found.map(({ id, colour }) => ({ id, colour })),
    time: times[0]?.t ?? null,
    weather: WEATHER_MATCHERS.filter(({ m }) => firstHit(text, m).at >= 0).map(({ t }) => t),
    style,
    colours: colourWordsIn(`${prompt} ${styleText}`).filter((c) => !attached.has(c)),
  };
}

// ---------- colour helpers ----------
const clamp = (v: number) => (v < 0 ? 0 : v > 255 ? 255 : Math.round(v));
const mix = (a: Rgb, b: Rgb, t: number): Rgb => [
  clamp(a[0] + (b[0] - a[0]) * t),
  clamp(a[1] + (b[1] - a[1]) * t),
  clamp(a[2] + (b[2] - a[2]) * t),
];
const mul = (a: Rgb, k: Rgb): Rgb => [
  clamp((a[0] * k[0]) / 255),
  clamp((a[1] * k[1]) / 255),
  clamp((a[2] * k[2]) / 255),
];
const hex = (c: Rgb) => `#${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
const n = (v: number) => v.toFixed(1);

/** How a time of day lights the stage. */
interface TimeLook {
  sky: [Rgb, Rgb, Rgb];
  /** Sun or moon colour; where it sits (fraction of the horizon height). */
  light: Rgb;
  lightY: number;
  /** Multiplier on subject colours. */
  ambient: Rgb;
  ground: Rgb;
  water: Rgb;
}

const LOOKS: Record<TimeOfDay, TimeLook> = {
  day: {
    sky: [
      [62, 122, 205],
      [118, 172, 232],
      [198, 224, 246],
    ],
    light: [255, 250, 228],
    lightY: 0.25,
    ambient: [255, 255, 250],
    ground: [92, 148, 68],
    water: [38, 108, 168],
  },
  dawn: {
    sky: [
      [70, 82, 150],
      [196, 140, 172],
      [255, 204, 166],
    ],
    light: [255, 228, 186],
    lightY: 0.86,
    ambient: [236, 214, 222],
    ground: [78, 104, 74],
    water: [92, 104, 150],
  },
  sunset: {
    sky: [
      [200, 78, 48],
      [236, 124, 58],
      [246, 178, 98],
    ],
    light: [255, 226, 150],
    lightY: 0.8,
    ambient: [228, 168, 138],
    ground: [88, 58, 52],
    water: [118, 70, 78],
  },
  dusk: {
    sky: [
      [28, 32, 82],
      [104, 72, 130],
      [226, 142, 112],
    ],
    light: [255, 214, 170],
    lightY: 0.95,
    ambient: [150, 130, 170],
    ground: [44, 46, 60],
    water: [52, 56, 96],
  },
  night: {
    sky: [
      [6, 10, 32],
      [18, 28, 68],
      [40, 56, 104],
    ],
    light: [236, 236, 218],
    lightY: 0.3,
    ambient: [84, 98, 146],
    ground: [44, 56, 78],
    water: [14, 24, 52],
  },
};

/** A scene's lighting after weather: every draw function colours through it. */
interface Lit {
  W: number;
  H: number;
  hz: number;
  time: TimeOfDay;
  look: TimeLook;
  weather: Set<Weather>;
  flat: boolean;
  rand: () => number;
  /** A surface colour under the scene's light. */
  lit: (c: Rgb) => string;
  /** A surface colour as a lit-to-shadow gradient (or a flat fill in flat style). */
  shade: (c: Rgb) => string;
  /** Fill for things that glow (lamps, windows, the lighthouse lamp). */
  glow: string;
  defs: string[];
}

type Draw = (L: Lit, x: number, base: number, s: number, colour: Rgb | null) => string;

const poly = (pts: number[][], fill: string, extra = '') =>
  `<polygon points="${pts.map((p) => `${n(p[0]!)},${n(p[1]!)}`).join(' ')}" fill="${fill}"${extra}/>`;
const rect = (x: number, y: number, w: number, h: number, fill: string, extra = '') =>
  `<rect x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" fill="${fill}"${extra}/>`;
const circle = (x: number, y: number, r: number, fill: string, extra = '') =>
  `<circle cx="${n(x)}" cy="${n(y)}" r="${n(r)}" fill="${fill}"${extra}/>`;
const ellipse = (x: number, y: number, rx: number, ry: number, fill: string, extra = '') =>
  `<ellipse cx="${n(x)}" cy="${n(y)}" rx="${n(rx)}" ry="${n(ry)}" fill="${fill}"${extra}/>`;
const path = (d: string, fill: string, extra = '') => `<path d="${d}" fill="${fill}"${extra}/>`;
const glowAt = (x: number, y: number, r: number) => circle(x, y, r, 'url(#glow)');

/** Quadruped silhouette (cat, dog, fox, deer, horse): body, head, legs, tail, in proportions. */
const animal =
  (o: { body: Rgb; len: number; tall: number; neck: number; ears?: boolean; antlers?: boolean; tail: number }): Draw =>
  (L, x, base, s, c) => {
    const col = L.shade(c ?? o.body);
    const bw = s * o.len;
    const leg = s * o.tall;
    const by = base - leg;
    const bh = s * 0.32;
    const hx = x + bw * 0.55;
    const hy = by - bh * 0.5 - s * o.neck;
    let out = ellipse(x, by - bh / 2, bw / 2, bh / 2, col);
    for (const lx of [-0.38, -0.22, 0.22, 0.38])
      out += rect(x + lx * bw - s * 0.03, by - bh * 0.2, s * 0.06, leg + bh * 0.2, col);
    out += poly(
      [
        [x + bw * 0.3, by - bh * 0.8],
        [hx, hy + s * 0.08],
        [hx + s * 0.05, hy + s * 0.2],
        [x + bw * 0.4, by - bh * 0.2],
      ],
      col,
    );
    out += ellipse(hx + s * 0.06, hy, s * 0.14, s * 0.1, col);
    if (o.ears)
      out += poly(
        [
          [hx - s * 0.02, hy - s * 0.04],
          [hx + s * 0.02, hy - s * 0.2],
          [hx + s * 0.08, hy - s * 0.06],
        ],
        col,
      );
    if (o.antlers)
      out += path(
        `M${n(hx)} ${n(hy - s * 0.05)} l${n(-s * 0.1)} ${n(-s * 0.3)} m${n(s * 0.05)} ${n(s * 0.15)} l${n(-s * 0.12)} ${n(-s * 0.05)} M${n(hx + s * 0.08)} ${n(hy - s * 0.05)} l${n(s * 0.1)} ${n(-s * 0.3)}`,
        'none',
        ` stroke="${col}" stroke-width="${n(s * 0.03)}"`,
      );
    out += path(
      `M${n(x - bw / 2)} ${n(by - bh * 0.6)} q${n(-s * o.tail)} ${n(-s * 0.1)} ${n(-s * o.tail * 1.2)} ${n(-s * o.tail)}`,
      'none',
      ` stroke="${col}" stroke-width="${n(s * 0.06)}" stroke-linecap="round"`,
    );
    return out;
  };

/** Subjects with a fixed stage role are drawn by stage code; the rest by these functions. */
const DRAW: Record<string, Draw> = {
  bird: (L, x, _b, s) => {
    let out = '';
    for (let i = 0; i < 5; i++) {
      const bx = x + (L.rand() - 0.5) * s * 4;
      const by = L.H * (0.12 + L.rand() * 0.25);
      const w = s * (0.3 + L.rand() * 0.15);
      out += path(
        `M${n(bx - w)} ${n(by - w * 0.3)} Q${n(bx - w * 0.4)} ${n(by - w * 0.5)} ${n(bx)} ${n(by)} Q${n(bx + w * 0.4)} ${n(by - w * 0.5)} ${n(bx + w)} ${n(by - w * 0.3)}`,
        'none',
        ` stroke="${L.lit([30, 30, 36])}" stroke-width="${n(w * 0.2)}" stroke-linecap="round"`,
      );
    }
    return out;
  },
  airplane: (L, x, _b, s) => {
    const y = L.H * 0.16;
    const c = L.lit([230, 232, 238]);
    return (
      rect(x - s * 3, y - s * 0.01, s * 2.4, s * 0.02, L.lit([250, 250, 255]), ' opacity="0.7"') +
      ellipse(x, y, s * 0.5, s * 0.07, c) +
      poly(
        [
          [x - s * 0.1, y],
          [x + s * 0.15, y],
          [x - s * 0.2, y + s * 0.4],
        ],
        c,
      ) +
      poly(
        [
          [x - s * 0.4, y],
          [x - s * 0.5, y - s * 0.2],
          [x - s * 0.3, y],
        ],
        c,
      )
    );
  },
  balloon: (L, x, _b, s) => {
    const y = L.H * 0.22;
    const c = L.shade([220, 60, 50]);
    return (
      ellipse(x, y, s * 0.45, s * 0.55, c) +
      path(
        `M${n(x - s * 0.42)} ${n(y + s * 0.15)} L${n(x - s * 0.1)} ${n(y + s * 0.75)} M${n(x + s * 0.42)} ${n(y + s * 0.15)} L${n(x + s * 0.1)} ${n(y + s * 0.75)}`,
        'none',
        ` stroke="${L.lit([60, 40, 30])}" stroke-width="${n(s * 0.02)}"`,
      ) +
      rect(x - s * 0.1, y + s * 0.75, s * 0.2, s * 0.15, L.lit([120, 80, 40])) +
      ellipse(x, y, s * 0.15, s * 0.55, L.lit([250, 210, 70]), ' opacity="0.8"')
    );
  },
  kite: (L, x, _b, s, c) => {
    const y = L.H * 0.2;
    return (
      poly(
        [
          [x, y - s * 0.5],
          [x + s * 0.3, y],
          [x, y + s * 0.6],
          [x - s * 0.3, y],
        ],
        L.shade(c ?? [220, 40, 60]),
      ) +
      path(
        `M${n(x)} ${n(y + s * 0.6)} q${n(s * 0.3)} ${n(s * 0.5)} ${n(-s * 0.1)} ${n(s * 1.2)} t${n(s * 0.1)} ${n(s * 1.2)}`,
        'none',
        ` stroke="${L.lit([40, 40, 40])}" stroke-width="${n(s * 0.02)}"`,
      )
    );
  },
  planet: (L, x, _b, s) => {
    const y = L.H * 0.2;
    return (
      circle(x, y, s * 0.45, L.shade([214, 170, 120])) +
      ellipse(x, y, s * 0.9, s * 0.16, 'none', ` stroke="${L.lit([230, 210, 170])}" stroke-width="${n(s * 0.05)}"`)
    );
  },
  lighthouse: (L, x, base, s) => {
    const h = s * 1.5;
    const w = s * 0.26;
    const top = base - h;
    const white: Rgb = mix([255, 252, 244], L.look.light, 0.25);
    let out = `<linearGradient id="lh" x1="0" x2="1"><stop offset="0" stop-color="${hex(white)}"/><stop offset="1" stop-color="${hex(mix(white, [200, 190, 180], 0.25))}"/></linearGradient>`;
    out += poly(
      [
        [x - w / 2, base],
        [x - w * 0.35, top],
        [x + w * 0.35, top],
        [x + w / 2, base],
      ],
      L.flat ? hex(white) : 'url(#lh)',
    );
    for (const f of [0.3, 0.62])
      out += rect(
        x - w * 0.47 + f * w * 0.15,
        base - h * f - s * 0.07,
        w * (0.94 - f * 0.3),
        s * 0.09,
        L.lit([200, 40, 40]),
      );
    out +=
      glowAt(x, top - s * 0.12, s * 0.9) +
      rect(x - w * 0.3, top - s * 0.22, w * 0.6, s * 0.22, L.glow) +
      poly(
        [
          [x - w * 0.45, top - s * 0.22],
          [x, top - s * 0.38],
          [x + w * 0.45, top - s * 0.22],
        ],
        L.lit([60, 30, 30]),
      );
    return out;
  },
  house: (L, x, base, s, c) => {
    const w = s * 0.9;
    const h = s * 0.55;
    const wall = L.shade(c ?? [236, 222, 196]);
    return (
      rect(x - w / 2, base - h, w, h, wall) +
      poly(
        [
          [x - w * 0.6, base - h],
          [x, base - h - s * 0.45],
          [x + w * 0.6, base - h],
        ],
        L.lit([150, 60, 48]),
      ) +
      rect(x - w * 0.3, base - h * 0.7, w * 0.18, h * 0.25, L.time === 'day' ? L.lit([90, 120, 150]) : L.glow) +
      rect(x + w * 0.12, base - h * 0.7, w * 0.18, h * 0.25, L.time === 'day' ? L.lit([90, 120, 150]) : L.glow) +
      rect(x - w * 0.08, base - h * 0.45, w * 0.16, h * 0.45, L.lit([90, 56, 36]))
    );
  },
  cabin: (L, x, base, s) => {
    const w = s * 0.8;
    const h = s * 0.45;
    let out = rect(x - w / 2, base - h, w, h, L.shade([120, 78, 46]));
    for (let i = 1; i < 5; i++) out += rect(x - w / 2, base - h + (i * h) / 5, w, s * 0.012, L.lit([70, 44, 26]));
    return (
      out +
      poly(
        [
          [x - w * 0.62, base - h],
          [x, base - h - s * 0.4],
          [x + w * 0.62, base - h],
        ],
        L.lit([70, 50, 40]),
      ) +
      rect(x + w * 0.15, base - h - s * 0.35, s * 0.08, s * 0.2, L.lit([90, 80, 76])) +
      rect(x - w * 0.25, base - h * 0.7, w * 0.2, h * 0.3, L.glow)
    );
  },
  castle: (L, x, base, s) => {
    const w = s * 1.3;
    const h = s * 0.7;
    const c = L.shade([170, 164, 156]);
    let out = rect(x - w / 2, base - h, w, h, c);
    for (const tx of [-0.5, 0.5])
      out +=
        rect(x + tx * w - s * 0.15, base - h * 1.5, s * 0.3, h * 1.5, c) +
        poly(
          [
            [x + tx * w - s * 0.19, base - h * 1.5],
            [x + tx * w, base - h * 1.5 - s * 0.35],
            [x + tx * w + s * 0.19, base - h * 1.5],
          ],
          L.lit([110, 50, 60]),
        );
    for (let i = 0; i < 5; i++)
      out += rect(x - w / 2 + (i * w) / 5 + s * 0.03, base - h - s * 0.08, s * 0.12, s * 0.08, c);
    return (
      out +
      path(
        `M${n(x - s * 0.15)} ${n(base)} v${n(-s * 0.25)} a${n(s * 0.15)} ${n(s * 0.15)} 0 0 1 ${n(s * 0.3)} 0 v${n(s * 0.25)}z`,
        L.lit([50, 40, 36]),
      )
    );
  },
  tower: (L, x, base, s) => {
    const w = s * 0.28;
    const h = s * 1.6;
    return (
      rect(x - w / 2, base - h, w, h, L.shade([180, 160, 130])) +
      poly(
        [
          [x - w * 0.65, base - h],
          [x, base - h - s * 0.5],
          [x + w * 0.65, base - h],
        ],
        L.lit([80, 70, 90]),
      ) +
      circle(x, base - h * 0.8, w * 0.3, L.lit([245, 240, 220]))
    );
  },
  church: (L, x, base, s) => {
    const w = s * 0.7;
    const h = s * 0.5;
    const c = L.shade([226, 216, 200]);
    return (
      rect(x - w / 2, base - h, w, h, c) +
      poly(
        [
          [x - w * 0.55, base - h],
          [x, base - h - s * 0.3],
          [x + w * 0.55, base - h],
        ],
        L.lit([120, 60, 50]),
      ) +
      rect(x + w * 0.3, base - h - s * 0.7, s * 0.18, h + s * 0.7, c) +
      poly(
        [
          [x + w * 0.3 - s * 0.02, base - h - s * 0.7],
          [x + w * 0.3 + s * 0.09, base - h - s * 1.15],
          [x + w * 0.3 + s * 0.2, base - h - s * 0.7],
        ],
        L.lit([120, 60, 50]),
      )
    );
  },
  windmill: (L, x, base, s) => {
    const h = s * 1.1;
    const hub = [x, base - h];
    let out = poly(
      [
        [x - s * 0.2, base],
        [x - s * 0.1, base - h],
        [x + s * 0.1, base - h],
        [x + s * 0.2, base],
      ],
      L.shade([230, 226, 214]),
    );
    const a0 = L.rand() * Math.PI;
    for (let i = 0; i < 4; i++) {
      const a = a0 + (i * Math.PI) / 2;
      out += poly(
        [
          hub,
          [
            hub[0]! + Math.cos(a) * s * 0.75 - Math.sin(a) * s * 0.08,
            hub[1]! + Math.sin(a) * s * 0.75 + Math.cos(a) * s * 0.08,
          ],
          [hub[0]! + Math.cos(a) * s * 0.75, hub[1]! + Math.sin(a) * s * 0.75],
        ],
        L.lit([200, 190, 170]),
      );
    }
    return out + circle(hub[0]!, hub[1]!, s * 0.05, L.lit([80, 60, 40]));
  },
  tent: (L, x, base, s, c) =>
    poly(
      [
        [x - s * 0.5, base],
        [x, base - s * 0.5],
        [x + s * 0.5, base],
      ],
      L.shade(c ?? [230, 120, 40]),
    ) +
    poly(
      [
        [x - s * 0.1, base],
        [x, base - s * 0.3],
        [x + s * 0.1, base],
      ],
      L.time === 'day' ? L.lit([60, 40, 30]) : L.glow,
    ),
  tree: (L, x, base, s, c) => {
    const leaf: Rgb =
      c ?? (L.weather.has('autumn') ? [206, 110, 36] : L.weather.has('snow') ? [220, 230, 236] : [56, 128, 52]);
    return (
      rect(x - s * 0.05, base - s * 0.55, s * 0.1, s * 0.55, L.lit([84, 58, 36])) +
      circle(x, base - s * 0.75, s * 0.32, L.shade(leaf)) +
      circle(x - s * 0.2, base - s * 0.6, s * 0.22, L.shade(leaf)) +
      circle(x + s * 0.2, base - s * 0.62, s * 0.22, L.shade(leaf))
    );
  },
  pine: (L, x, base, s, c) => {
    const leaf: Rgb = c ?? (L.weather.has('snow') ? [52, 96, 76] : [30, 92, 56]);
    let out = rect(x - s * 0.04, base - s * 0.2, s * 0.08, s * 0.2, L.lit([70, 48, 30]));
    for (let i = 0; i < 3; i++)
      out += poly(
        [
          [x - s * (0.32 - i * 0.07), base - s * (0.15 + i * 0.3)],
          [x, base - s * (0.6 + i * 0.3)],
          [x + s * (0.32 - i * 0.07), base - s * (0.15 + i * 0.3)],
        ],
        L.shade(leaf),
      );
    return out;
  },
  palm: (L, x, base, s) => {
    let out = path(
      `M${n(x)} ${n(base)} q${n(s * 0.1)} ${n(-s * 0.6)} ${n(s * 0.3)} ${n(-s * 1.1)}`,
      'none',
      ` stroke="${L.lit([110, 80, 50])}" stroke-width="${n(s * 0.07)}"`,
    );
    const tx = x + s * 0.3;
    const ty = base - s * 1.1;
    for (const [dx, dy] of [
      [-0.5, 0.15],
      [-0.35, -0.2],
      [0.4, -0.15],
      [0.5, 0.2],
      [0, -0.3],
    ])
      out += path(
        `M${n(tx)} ${n(ty)} q${n(dx! * s * 0.5)} ${n(dy! * s - s * 0.2)} ${n(dx! * s)} ${n(dy! * s + s * 0.1)}`,
        'none',
        ` stroke="${L.lit([40, 120, 50])}" stroke-width="${n(s * 0.08)}" stroke-linecap="round"`,
      );
    return out;
  },
  boat: (L, x, base, s, c) =>
    poly(
      [
        [x - s * 0.5, base - s * 0.15],
        [x + s * 0.5, base - s * 0.15],
        [x + s * 0.35, base],
        [x - s * 0.35, base],
      ],
      L.shade(c ?? [150, 60, 40]),
    ) +
    rect(x - s * 0.02, base - s * 0.9, s * 0.04, s * 0.75, L.lit([80, 60, 40])) +
    poly(
      [
        [x + s * 0.03, base - s * 0.88],
        [x + s * 0.42, base - s * 0.22],
        [x + s * 0.03, base - s * 0.22],
      ],
      L.shade([246, 242, 230]),
    ),
  ship: (L, x, base, s) => {
    let out = poly(
      [
        [x - s * 0.9, base - s * 0.3],
        [x + s * 0.9, base - s * 0.3],
        [x + s * 0.7, base],
        [x - s * 0.7, base],
      ],
      L.shade([40, 44, 60]),
    );
    out += rect(x - s * 0.5, base - s * 0.55, s * 0.9, s * 0.25, L.shade([236, 236, 230]));
    out += rect(x - s * 0.1, base - s * 0.9, s * 0.18, s * 0.35, L.lit([200, 50, 40]));
    return out;
  },
  whale: (L, x, base, s, c) => {
    const col = L.shade(c ?? [56, 78, 110]);
    return (
      path(
        `M${n(x - s * 0.8)} ${n(base)} Q${n(x - s * 0.4)} ${n(base - s * 0.5)} ${n(x + s * 0.5)} ${n(base - s * 0.2)} Q${n(x + s * 0.8)} ${n(base - s * 0.1)} ${n(x + s * 0.9)} ${n(base)}Z`,
        col,
      ) +
      poly(
        [
          [x - s * 0.75, base - s * 0.05],
          [x - s * 1.0, base - s * 0.35],
          [x - s * 0.9, base - s * 0.05],
          [x - s * 1.05, base + s * 0.05],
        ],
        col,
      ) +
      path(
        `M${n(x + s * 0.3)} ${n(base - s * 0.3)} q${n(-s * 0.05)} ${n(-s * 0.3)} ${n(-s * 0.15)} ${n(-s * 0.4)} M${n(x + s * 0.3)} ${n(base - s * 0.3)} q${n(s * 0.05)} ${n(-s * 0.3)} ${n(s * 0.15)} ${n(-s * 0.4)}`,
        'none',
        ` stroke="${L.lit([220, 235, 245])}" stroke-width="${n(s * 0.04)}" opacity="0.8"`,
      )
    );
  },
  train: (L, x, base, s) => {
    let out = rect(x - s * 1.6, base - s * 0.04, s * 3.2, s * 0.04, L.lit([60, 50, 44]));
    for (let i = 0; i < 3; i++)
      out +=
        rect(
          x - s * 1.4 + i * s * 0.95,
          base - s * 0.5,
          s * 0.9,
          s * 0.42,
          L.shade(i === 0 ? [180, 40, 40] : [60, 90, 140]),
        ) +
        rect(
          x - s * 1.3 + i * s * 0.95,
          base - s * 0.42,
          s * 0.7,
          s * 0.12,
          L.time === 'day' ? L.lit([200, 220, 240]) : L.glow,
        );
    return out;
  },
  car: (L, x, base, s, c) => {
    const col = L.shade(c ?? [200, 40, 40]);
    return (
      rect(x - s * 0.6, base - s * 0.35, s * 1.2, s * 0.22, col) +
      path(
        `M${n(x - s * 0.35)} ${n(base - s * 0.35)} l${n(s * 0.12)} ${n(-s * 0.2)} h${n(s * 0.45)} l${n(s * 0.15)} ${n(s * 0.2)}z`,
        col,
      ) +
      circle(x - s * 0.35, base - s * 0.1, s * 0.11, L.lit([30, 30, 30])) +
      circle(x + s * 0.35, base - s * 0.1, s * 0.11, L.lit([30, 30, 30])) +
      (L.time === 'day' ? '' : glowAt(x + s * 0.6, base - s * 0.25, s * 0.3))
    );
  },
  lamppost: (L, x, base, s) =>
    rect(x - s * 0.04, base - s * 1.2, s * 0.08, s * 1.2, L.lit([40, 40, 46])) +
    glowAt(x, base - s * 1.2, s * 0.7) +
    rect(x - s * 0.12, base - s * 1.36, s * 0.24, s * 0.2, L.lit([40, 40, 46])) +
    rect(x - s * 0.08, base - s * 1.32, s * 0.16, s * 0.14, L.glow),
  fence: (L, x, base, s) => {
    let out =
      rect(x - s * 1.2, base - s * 0.3, s * 2.4, s * 0.04, L.lit([130, 100, 70])) +
      rect(x - s * 1.2, base - s * 0.15, s * 2.4, s * 0.04, L.lit([130, 100, 70]));
    for (let i = 0; i <= 8; i++)
      out += rect(x - s * 1.2 + i * s * 0.3 - s * 0.025, base - s * 0.4, s * 0.05, s * 0.4, L.lit([150, 118, 84]));
    return out;
  },
  bench: (L, x, base, s) =>
    rect(x - s * 0.5, base - s * 0.25, s, s * 0.05, L.shade([140, 96, 60])) +
    rect(x - s * 0.5, base - s * 0.45, s, s * 0.05, L.shade([140, 96, 60])) +
    rect(x - s * 0.45, base - s * 0.25, s * 0.04, s * 0.25, L.lit([40, 40, 40])) +
    rect(x + s * 0.41, base - s * 0.25, s * 0.04, s * 0.25, L.lit([40, 40, 40])),
  person: (L, x, base, s, c) => {
    const col = L.lit(c ?? [34, 30, 36]);
    return (
      circle(x, base - s * 0.9, s * 0.09, col) +
      path(
        `M${n(x - s * 0.14)} ${n(base - s * 0.45)} L${n(x - s * 0.1)} ${n(base - s * 0.78)} Q${n(x)} ${n(base - s * 0.84)} ${n(x + s * 0.1)} ${n(base - s * 0.78)} L${n(x + s * 0.14)} ${n(base - s * 0.45)}Z`,
        col,
      ) +
      rect(x - s * 0.08, base - s * 0.46, s * 0.06, s * 0.46, col) +
      rect(x + s * 0.02, base - s * 0.46, s * 0.06, s * 0.46, col)
    );
  },
  cat: animal({ body: [70, 64, 62], len: 0.5, tall: 0.12, neck: 0.08, ears: true, tail: 0.25 }),
  dog: animal({ body: [150, 100, 60], len: 0.65, tall: 0.2, neck: 0.1, ears: true, tail: 0.2 }),
  fox: animal({ body: [214, 100, 34], len: 0.6, tall: 0.14, neck: 0.06, ears: true, tail: 0.4 }),
  deer: animal({ body: [150, 104, 66], len: 0.7, tall: 0.45, neck: 0.3, antlers: true, tail: 0.08 }),
  horse: animal({ body: [110, 70, 44], len: 0.9, tall: 0.5, neck: 0.32, ears: true, tail: 0.3 }),
  flower: (L, x, base, s, c) => {
    let out = '';
    for (let i = 0; i < 7; i++) {
      const fx = x + (L.rand() - 0.5) * s * 1.6;
      const fh = s * (0.25 + L.rand() * 0.25);
      const petal =
        c ??
        (
          [
            [230, 60, 90],
            [250, 200, 40],
            [240, 240, 250],
            [170, 80, 200],
          ] as Rgb[]
        )[Math.floor(L.rand() * 4)]!;
      out += rect(fx - s * 0.01, base - fh, s * 0.02, fh, L.lit([50, 120, 50]));
      for (let k = 0; k < 5; k++) {
        const a = (k * 2 * Math.PI) / 5;
        out += circle(fx + Math.cos(a) * s * 0.04, base - fh + Math.sin(a) * s * 0.04, s * 0.035, L.lit(petal));
      }
      out += circle(fx, base - fh, s * 0.025, L.lit([250, 210, 60]));
    }
    return out;
  },
  rock: (L, x, base, s) =>
    path(
      `M${n(x - s * 0.5)} ${n(base)} Q${n(x - s * 0.45)} ${n(base - s * 0.35)} ${n(x - s * 0.1)} ${n(base - s * 0.4)} Q${n(x + s * 0.35)} ${n(base - s * 0.38)} ${n(x + s * 0.5)} ${n(base)}Z`,
      L.shade([120, 116, 110]),
    ),
  campfire: (L, x, base, s) =>
    glowAt(x, base - s * 0.2, s * 1.4) +
    rect(x - s * 0.3, base - s * 0.06, s * 0.6, s * 0.06, L.lit([90, 60, 36])) +
    path(
      `M${n(x - s * 0.18)} ${n(base - s * 0.05)} Q${n(x - s * 0.1)} ${n(base - s * 0.4)} ${n(x)} ${n(base - s * 0.55)} Q${n(x + s * 0.12)} ${n(base - s * 0.35)} ${n(x + s * 0.18)} ${n(base - s * 0.05)}Z`,
      hex([255, 150, 40]),
    ) +
    path(
      `M${n(x - s * 0.08)} ${n(base - s * 0.05)} Q${n(x)} ${n(base - s * 0.3)} ${n(x + s * 0.08)} ${n(base - s * 0.05)}Z`,
      hex([255, 230, 120]),
    ),
  waterfall: (L, x, base, s) =>
    rect(x - s * 0.45, base - s * 1.2, s * 0.9, s * 1.2, L.shade([110, 100, 96])) +
    rect(x - s * 0.2, base - s * 1.2, s * 0.4, s * 1.2, L.shade([210, 232, 246])) +
    ellipse(x, base, s * 0.4, s * 0.08, L.lit([240, 248, 255])),
  bridge: (L, x, base, s) =>
    path(
      `M${n(x - s * 1.6)} ${n(base - s * 0.3)} Q${n(x)} ${n(base - s * 0.9)} ${n(x + s * 1.6)} ${n(base - s * 0.3)} L${n(x + s * 1.6)} ${n(base - s * 0.2)} Q${n(x)} ${n(base - s * 0.8)} ${n(x - s * 1.6)} ${n(base - s * 0.2)}Z`,
      L.shade([150, 110, 80]),
    ) +
    rect(x - s * 1.6, base - s * 0.3, s * 0.12, s * 0.3, L.lit([120, 90, 70])) +
    rect(x + s * 1.48, base - s * 0.3, s * 0.12, s * 0.3, L.lit([120, 90, 70])),
};

/** Far-layer backdrops along the horizon. */
const BACKDROP: Record<string, (L: Lit, c: Rgb | null) => string> = {
  mountain: (L, c) => {
    const { W, hz } = L;
    let out = '';
    const peaks = 3 + Math.floor(L.rand() * 2);
    for (let i = 0; i < peaks; i++) {
      const cx = W * ((i + 0.5) / peaks + (L.rand() - 0.5) * 0.15);
      const h = L.H * (0.18 + L.rand() * 0.16);
      const w = W * (0.28 + L.rand() * 0.15);
      const rock = mix(c ?? [96, 104, 126], L.look.sky[2], 0.25 + 0.15 * (i % 2));
      out += poly(
        [
          [cx - w / 2, hz + 1],
          [cx, hz - h],
          [cx + w / 2, hz + 1],
        ],
        L.shade(rock),
      );
      out += poly(
        [
          [cx - w * 0.11, hz - h * 0.78],
          [cx, hz - h],
          [cx + w * 0.11, hz - h * 0.78],
          [cx + w * 0.03, hz - h * 0.74],
          [cx - w * 0.04, hz - h * 0.8],
        ],
        L.lit([246, 248, 252]),
      );
    }
    return out;
  },
  hills: (L, c) => {
    let out = '';
    for (let i = 0; i < 3; i++)
      out += ellipse(
        L.W * (0.15 + i * 0.38 + (L.rand() - 0.5) * 0.1),
        L.hz + L.H * 0.04,
        L.W * (0.35 + L.rand() * 0.1),
        L.H * (0.1 + L.rand() * 0.06),
        L.shade(mix(c ?? L.look.ground, [255, 255, 255], 0.08 * i)),
      );
    return out;
  },
  forest: (L, c) => {
    let out = '';
    const leaf: Rgb = c ?? (L.weather.has('autumn') ? [170, 90, 40] : [32, 84, 50]);
    for (let i = 0; i < 34; i++) {
      const x = (i / 33) * L.W + (L.rand() - 0.5) * 20;
      const h = L.H * (0.07 + L.rand() * 0.06);
      out += poly(
        [
          [x - h * 0.3, L.hz + 2],
          [x, L.hz - h],
          [x + h * 0.3, L.hz + 2],
        ],
        L.lit(mix(leaf, [0, 0, 0], L.rand() * 0.3)),
      );
    }
    return out;
  },
  city: (L, c) => {
    let out = '';
    let x = 0;
    const body = c ?? [52, 58, 76];
    while (x < L.W) {
      const w = L.W * (0.04 + L.rand() * 0.05);
      const h = L.H * (0.08 + L.rand() * 0.22);
      out += rect(x, L.hz - h, w, h + 2, L.lit(mix(body, L.look.sky[2], L.rand() * 0.3)));
      if (L.time !== 'day')
        for (let k = 0; k < 6; k++)
          out += rect(x + w * (0.15 + L.rand() * 0.6), L.hz - h * (0.1 + L.rand() * 0.8), w * 0.12, w * 0.12, L.glow);
      x += w + L.W * 0.004;
    }
    return out;
  },
  island: (L) =>
    ellipse(L.W * (0.3 + L.rand() * 0.4), L.hz + 2, L.W * 0.16, L.H * 0.05, L.shade([90, 110, 70])) +
    DRAW.palm!(L, L.W * 0.5, L.hz - L.H * 0.02, L.H * 0.12, null),
  volcano: (L) => {
    const cx = L.W * (0.3 + L.rand() * 0.4);
    const h = L.H * 0.3;
    return (
      poly(
        [
          [cx - L.W * 0.3, L.hz + 1],
          [cx - L.W * 0.05, L.hz - h],
          [cx + L.W * 0.05, L.hz - h],
          [cx + L.W * 0.3, L.hz + 1],
        ],
        L.shade([70, 56, 54]),
      ) +
      glowAt(cx, L.hz - h, L.H * 0.15) +
      path(
        `M${n(cx - L.W * 0.02)} ${n(L.hz - h)} q${n(L.W * 0.02)} ${n(h * 0.4)} ${n(-L.W * 0.03)} ${n(h * 0.8)}`,
        'none',
        ` stroke="${hex([255, 110, 30])}" stroke-width="${n(L.W * 0.008)}"`,
      )
    );
  },
  pyramid: (L) => {
    const cx = L.W * (0.35 + L.rand() * 0.3);
    const h = L.H * 0.22;
    return (
      poly(
        [
          [cx - h * 1.2, L.hz + 1],
          [cx, L.hz - h],
          [cx + h * 1.2, L.hz + 1],
        ],
        L.shade([220, 186, 120]),
      ) +
      poly(
        [
          [cx, L.hz - h],
          [cx + h * 1.2, L.hz + 1],
          [cx + h * 0.3, L.hz + 1],
        ],
        L.lit([170, 136, 84]),
      )
    );
  },
  desert: (L) =>
    path(
      `M0 ${n(L.hz + 2)} Q${n(L.W * 0.25)} ${n(L.hz - L.H * 0.06)} ${n(L.W * 0.5)} ${n(L.hz)} T${n(L.W)} ${n(L.hz - L.H * 0.02)} V${n(L.hz + L.H * 0.05)} H0Z`,
      L.shade([226, 180, 116]),
    ),
};

/** Stage options of a render. */
export interface ComposeOptions {
  width: number;
  height: number;
  seed: Buffer;
  prompt: string;
  /** The request's style field, read for style words and colours. */
  styleText?: string;
  /** Style when neither prompt nor style text names one. */
  defaultStyle: Style;
  /** Colours from reference images: tint the scene. */
  referenceColours?: Rgb[];
}

/** The SVG and what was understood. */
export interface Composition {
  svg: string;
  spec: SceneSpec;
  style: Style;
}

/** Compose the SVG of a prompt. */
export function composeScene(o: ComposeOptions): Composition {
  const spec = parsePrompt(o.prompt, o.styleText);
  const style = spec.style ?? o.defaultStyle;
  const rand = prng(o.seed);
  const tints = [...spec.colours, ...(o.referenceColours ?? [])];
  if (spec.subjects.length === 0 && !spec.time && spec.weather.length === 0)
    return { svg: abstract(o, tints, style, rand), spec, style };

  const st = stage(o, spec, style, tints, rand);
  const { showSun, showMoon } = drawSky(st);
  const { water, landIds } = drawGround(st, showSun, showMoon);
  const cliffTop = drawCliff(st);
  drawStanding(st, cliffTop, water, landIds);
  drawWeather(st);
  return { svg: svgDoc(st.L.W, st.L.H, st.L.defs, st.parts), spec, style };
}

/** A scene's stage, shared by its layers: the lit palette, the subjects named, the sky's colours, the light's side. */
interface Stage {
  L: Lit;
  spec: SceneSpec;
  ids: Set<string>;
  base: TimeLook;
  sky: [Rgb, Rgb, Rgb];
  /** One hundredth of the shorter side: the unit of small sizes. */
  u: number;
  cliffLeft: boolean;
  lightX: number;
  /** The SVG elements, back to front. */
  parts: string[];
}

/** Time of day, sky, ground and light from what the prompt names (draws from `rand` in a fixed order). */
function stage(o: ComposeOptions, spec: SceneSpec, style: Style, tints: Rgb[], rand: () => number): Stage {
  const { width: W, height: H } = o;
  const ids = new Set(spec.subjects.map((s) => s.id));
  const weather = new Set(spec.weather);
  const time: TimeOfDay = spec.time ?? (ids.has('moon') || ids.has('stars') || ids.has('aurora') ? 'night' : 'day');
  const base = LOOKS[time];
  let sky = base.sky.map((c) => mix(c, [128, 132, 140], weather.has('rain') || weather.has('storm') ? 0.45 : 0)) as [
    Rgb,
    Rgb,
    Rgb,
  ];
  if (weather.has('fog')) sky = sky.map((c) => mix(c, [196, 200, 206], 0.5)) as [Rgb, Rgb, Rgb];
  if (tints.length) sky = sky.map((c, i) => mix(c, tints[i % tints.length]!, 0.3)) as [Rgb, Rgb, Rgb];
  const ground: Rgb = weather.has('snow')
    ? mix([236, 240, 248], base.ambient, 0.3)
    : ids.has('desert') || ids.has('pyramid')
      ? [220, 176, 112]
      : weather.has('autumn')
        ? [150, 110, 50]
        : base.ground;
  const look: TimeLook = { ...base, sky, ground: tints.length ? mix(ground, tints[0]!, 0.25) : ground };
  const flat = style === 'flat';
  const hz = Math.round(H * (0.58 + rand() * 0.08));
  const defs: string[] = [];
  // A cliff takes one side; the sun or moon then hangs over the open side.
  const cliffLeft = rand() < 0.5;
  const lightX = ids.has('cliff')
    ? W * (cliffLeft ? 0.58 + rand() * 0.25 : 0.17 + rand() * 0.25)
    : W * (0.22 + rand() * 0.56);
  let shadeN = 0;
  const L: Lit = {
    W,
    H,
    hz,
    time,
    look,
    weather,
    flat,
    rand,
    defs,
    lit: (c) => hex(mul(c, look.ambient)),
    shade: (c) => {
      if (flat) return hex(mul(c, look.ambient));
      const id = `s${shadeN++}`;
      const a = mul(mix(c, look.light, 0.18), look.ambient);
      const b = mul(mix(c, [0, 0, 0], 0.35), look.ambient);
      const [x1, x2] = lightX < W / 2 ? [0, 1] : [1, 0];
      defs.push(
        `<linearGradient id="${id}" x1="${x1}" x2="${x2}" y1="0" y2="0.4"><stop offset="0" stop-color="${hex(a)}"/><stop offset="1" stop-color="${hex(b)}"/></linearGradient>`,
      );
      return `url(#${id})`;
    },
    glow: hex([255, 226, 150]),
  };
  return { L, spec, ids, base, sky, u: Math.min(W, H) / 100, cliffLeft, lightX, parts: [] };
}

/** Sky, stars, aurora, sun and moon, rainbow, clouds and lightning, sky subjects, backdrops on the horizon. */
function drawSky(st: Stage): { showSun: boolean; showMoon: boolean } {
  const { L, spec, ids, base, sky, u, lightX, parts } = st;
  const { W, hz, time, look, weather, flat, rand, defs } = L;
  // Sky: three stops, horizon brightest by day and at sunset.
  defs.push(
    `<linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">${sky.map((c, i) => `<stop offset="${[0, 0.55, 1][i]}" stop-color="${hex(c)}"/>`).join('')}</linearGradient>`,
  );
  defs.push(
    `<radialGradient id="glow"><stop offset="0" stop-color="${hex(look.light)}" stop-opacity="${flat ? 0 : 0.75}"/><stop offset="1" stop-color="${hex(look.light)}" stop-opacity="0"/></radialGradient>`,
  );
  if (flat) {
    for (let i = 0; i < 6; i++)
      parts.push(
        rect(
          0,
          (hz * i) / 6,
          W,
          hz / 6 + 1,
          hex(mix(sky[Math.min(2, Math.floor(i / 2))]!, sky[Math.min(2, Math.floor(i / 2) + 1)]!, (i % 2) / 2)),
        ),
      );
  } else parts.push(rect(0, 0, W, hz + 1, 'url(#sky)'));

  // Celestial light: sun low at sunset and dawn, high by day when named; moon at night.
  const showSun =
    time !== 'night' &&
    (ids.has('sun') || time === 'sunset' || time === 'dawn') &&
    !weather.has('rain') &&
    !weather.has('storm');
  const showMoon = time === 'night' || ids.has('moon');
  const ly = hz * base.lightY;
  if (ids.has('stars') || (time === 'night' && !weather.has('rain') && !weather.has('fog') && !ids.has('clouds'))) {
    // Named stars show in any sky (faint by day); an open night sky has them anyway.
    const faint = time === 'night' || time === 'dusk' ? 1 : 0.5;
    for (let i = 0; i < 120; i++)
      parts.push(
        circle(
          rand() * W,
          rand() * hz * 0.9,
          u * (0.15 + rand() * 0.25),
          hex([250, 250, 235]),
          ` opacity="${n(faint * (0.4 + rand() * 0.6))}"`,
        ),
      );
  }
  if (ids.has('aurora')) {
    defs.push(
      `<linearGradient id="aur" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="#40ffb0" stop-opacity="0"/><stop offset="0.6" stop-color="#40f0a0" stop-opacity="0.55"/><stop offset="1" stop-color="#8060ff" stop-opacity="0"/></linearGradient>`,
    );
    for (let i = 0; i < 3; i++)
      parts.push(
        path(
          `M0 ${n(hz * (0.2 + i * 0.1))} Q${n(W * 0.3)} ${n(hz * (0.05 + rand() * 0.3))} ${n(W * 0.6)} ${n(hz * (0.25 + i * 0.08))} T${n(W)} ${n(hz * 0.2)} V${n(hz * (0.5 + i * 0.08))} Q${n(W * 0.5)} ${n(hz * 0.3)} 0 ${n(hz * 0.6)}Z`,
          'url(#aur)',
        ),
      );
  }
  if (showSun)
    parts.push(glowAt(lightX, ly, u * 30), circle(lightX, ly, u * (time === 'day' ? 5 : 6.5), hex(look.light)));
  if (showMoon) {
    const mx = ids.has('sun') ? W - lightX : lightX;
    parts.push(
      glowAt(mx, hz * 0.28, u * 18),
      circle(mx, hz * 0.28, u * 5, hex([238, 238, 222])),
      circle(mx + u * 1.5, hz * 0.28 + u * 0.8, u * 1, hex([210, 210, 196])),
    );
  }
  if (ids.has('rainbow')) {
    const bands: Rgb[] = [
      [230, 60, 60],
      [240, 150, 40],
      [240, 230, 60],
      [70, 190, 80],
      [60, 120, 230],
      [140, 70, 200],
    ];
    for (const [i, c] of bands.entries()) {
      parts.push(
        path(
          `M${n(W * 0.1)} ${n(hz)} A${n(W * 0.4 - i * u * 1.6)} ${n(hz * 0.8 - i * u * 1.6)} 0 0 1 ${n(W * 0.9 - i * u * 3.2)} ${n(hz)}`,
          'none',
          ` transform="translate(${n(i * u * 1.6)} 0)" stroke="${hex(c)}" stroke-width="${n(u * 1.6)}" opacity="0.55"`,
        ),
      );
    }
  }
  if (ids.has('clouds') || weather.has('rain') || weather.has('storm')) {
    const cloud: Rgb =
      weather.has('rain') || weather.has('storm') ? [110, 114, 124] : mix([250, 250, 252], look.light, 0.3);
    for (let i = 0; i < 5; i++) {
      const cx = rand() * W;
      const cy = hz * (0.12 + rand() * 0.4);
      const r = u * (5 + rand() * 5);
      parts.push(
        ellipse(cx, cy, r * 2.2, r * 0.8, L.lit(cloud), ' opacity="0.9"'),
        circle(cx - r * 0.6, cy - r * 0.3, r * 0.9, L.lit(cloud), ' opacity="0.9"'),
        circle(cx + r * 0.5, cy - r * 0.45, r * 1.1, L.lit(cloud), ' opacity="0.9"'),
      );
    }
  }
  if (weather.has('storm'))
    parts.push(
      path(
        `M${n(W * 0.7)} ${n(hz * 0.2)} l${n(-u * 3)} ${n(hz * 0.2)} h${n(u * 2)} l${n(-u * 4)} ${n(hz * 0.3)}`,
        'none',
        ` stroke="#fffbe0" stroke-width="${n(u * 0.6)}"`,
      ),
    );

  // Sky subjects spread left and right by the seed.
  let side = rand() < 0.5 ? -1 : 1;
  const skySubjects = spec.subjects.filter((s) => SUBJECTS.find((e) => e.id === s.id)!.layer === 'sky' && DRAW[s.id]);
  for (const [i, s] of skySubjects.entries()) {
    parts.push(DRAW[s.id]!(L, W * (0.5 + side * (0.2 + 0.08 * i)), hz, u * 9, s.colour));
    side = -side;
  }

  // Far backdrops on the horizon.
  for (const s of spec.subjects) if (BACKDROP[s.id]) parts.push(BACKDROP[s.id]!(L, s.colour));
  return { showSun, showMoon };
}

/** Ground or sea, with a shore band in front when land subjects stand on a sea stage; fields, road, river, beach. */
function drawGround(st: Stage, showSun: boolean, showMoon: boolean) {
  const { L, spec, ids, sky, u, lightX, parts } = st;
  const { W, H, hz, look, flat, rand, defs } = L;
  // Ground or sea, with a shore band in front when land subjects stand on a sea stage.
  const water = spec.subjects.some((s) => SUBJECTS.find((e) => e.id === s.id)!.water) && !ids.has('desert');
  const landIds = spec.subjects.filter(
    (s) =>
      !SUBJECTS.find((e) => e.id === s.id)!.water &&
      ['mid', 'near'].includes(SUBJECTS.find((e) => e.id === s.id)!.layer),
  );
  if (water) {
    const wTop = mix(look.water, sky[2], 0.45);
    defs.push(
      `<linearGradient id="sea" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${hex(wTop)}"/><stop offset="1" stop-color="${hex(mix(look.water, [0, 0, 0], 0.35))}"/></linearGradient>`,
    );
    parts.push(rect(0, hz, W, H - hz, flat ? hex(look.water) : 'url(#sea)'));
    if (showSun || showMoon)
      parts.push(
        ellipse(
          showSun ? lightX : ids.has('sun') ? W - lightX : lightX,
          hz + (H - hz) * 0.3,
          u * 7,
          (H - hz) * 0.32,
          'url(#glow)',
        ),
      );
    for (let i = 0; i < 28; i++) {
      const y = hz + (H - hz) * (0.04 + rand() * 0.9);
      const w = u * (2 + rand() * 8) * (1 + (y - hz) / (H - hz));
      parts.push(rect(rand() * W, y, w, u * 0.25, hex(mix(wTop, [255, 255, 255], 0.35)), ' opacity="0.5"'));
    }
  } else {
    defs.push(
      `<linearGradient id="gr" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${hex(mul(mix(look.ground, sky[2], 0.3), look.ambient))}"/><stop offset="1" stop-color="${hex(mul(mix(look.ground, [0, 0, 0], 0.3), look.ambient))}"/></linearGradient>`,
    );
    parts.push(rect(0, hz, W, H - hz, flat ? L.lit(look.ground) : 'url(#gr)'));
  }
  if (ids.has('field'))
    for (let i = 0; i < 60; i++)
      parts.push(
        rect(
          rand() * W,
          hz + (H - hz) * (0.3 + rand() * 0.7),
          u * 0.3,
          u * (1.5 + rand() * 2),
          L.lit(mix(look.ground, [230, 220, 120], 0.4)),
        ),
      );
  if (ids.has('road'))
    parts.push(
      poly(
        [
          [W * 0.47, hz],
          [W * 0.53, hz],
          [W * 0.78, H],
          [W * 0.22, H],
        ],
        L.shade([70, 70, 76]),
      ),
      poly(
        [
          [W * 0.498, hz + 4],
          [W * 0.502, hz + 4],
          [W * 0.51, H],
          [W * 0.49, H],
        ],
        L.lit([236, 220, 150]),
        ' opacity="0.8"',
      ),
    );
  if (ids.has('river'))
    parts.push(
      path(
        `M${n(W * 0.48)} ${n(hz)} Q${n(W * 0.3)} ${n(hz + (H - hz) * 0.4)} ${n(W * 0.55)} ${n(hz + (H - hz) * 0.7)} T${n(W * 0.45)} ${n(H)} H${n(W * 0.75)} Q${n(W * 0.6)} ${n(hz + (H - hz) * 0.6)} ${n(W * 0.52)} ${n(hz)}Z`,
        hex(mul(mix(look.water, sky[2], 0.4), [255, 255, 255])),
      ),
    );
  if (ids.has('beach'))
    parts.push(
      path(
        `M0 ${n(hz + (H - hz) * 0.6)} Q${n(W * 0.5)} ${n(hz + (H - hz) * 0.45)} ${n(W)} ${n(hz + (H - hz) * 0.65)} V${n(H)} H0Z`,
        L.shade([232, 204, 150]),
      ),
    );
  const shoreY = hz + (H - hz) * 0.5;
  if (water && landIds.length && !ids.has('beach') && !ids.has('cliff'))
    parts.push(
      path(
        `M0 ${n(shoreY)} Q${n(W * 0.5)} ${n(shoreY - (H - hz) * 0.12)} ${n(W)} ${n(shoreY + 4)} V${n(H)} H0Z`,
        L.shade(look.ground),
      ),
    );
  return { water, landIds };
}

/** Cliff on one side; a lighthouse, house or castle named with it stands on its top (returned). */
function drawCliff(st: Stage): { x: number; y: number } | null {
  const { L, ids, cliffLeft, parts } = st;
  const { W, H, hz, weather } = L;
  // Cliff on one side; a lighthouse, house or castle named with it stands on its top.
  let cliffTop: { x: number; y: number } | null = null;
  if (ids.has('cliff')) {
    const left = cliffLeft;
    const cw = W * 0.42;
    const top = hz - H * 0.1;
    const edge = left ? cw : W - cw;
    const far = left ? 0 : W;
    const pts = [
      [far, top - H * 0.01],
      [far + (edge - far) * 0.5, top - H * 0.02],
      [edge - (left ? W * 0.03 : -W * 0.03), top],
      [edge, top + H * 0.08],
      [edge + (left ? W * 0.04 : -W * 0.04), H],
      [far, H],
    ];
    parts.push(
      poly(pts, L.shade([104, 92, 82])),
      poly(
        [
          [far, top - H * 0.01],
          [far + (edge - far) * 0.5, top - H * 0.02],
          [edge - (left ? W * 0.03 : -W * 0.03), top],
          [edge - (left ? W * 0.03 : -W * 0.03), top + H * 0.015],
          [far, top + H * 0.015],
        ],
        L.lit(weather.has('snow') ? [236, 240, 248] : [84, 120, 60]),
      ),
    );
    cliffTop = { x: far + (edge - far) * 0.6, y: top - H * 0.005 };
  }
  return cliffTop;
}

/** Mid and near subjects, placed by the seed (one of them on the cliff top when there is one). */
function drawStanding(
  st: Stage,
  cliffTop: { x: number; y: number } | null,
  water: boolean,
  landIds: SceneSpec['subjects'],
) {
  const { L, spec, parts } = st;
  const { W, H, hz, rand } = L;
  // Mid and near subjects: the first is the main subject on a third chosen by the seed; the
  // others alternate sides, further out and smaller (depth order: mid, then near in front).
  const standing = spec.subjects.filter((s) => DRAW[s.id] && SUBJECTS.find((e) => e.id === s.id)!.layer !== 'sky');
  const onCliff = cliffTop
    ? standing.find((s) =>
        ['lighthouse', 'house', 'castle', 'cabin', 'tower', 'church', 'windmill', 'tree', 'pine', 'person'].includes(
          s.id,
        ),
      )
    : undefined;
  let side = rand() < 0.5 ? -1 : 1;
  let k = 0;
  for (const layer of ['mid', 'near'] as const) {
    for (const s of standing.filter((x) => SUBJECTS.find((e) => e.id === x.id)!.layer === layer)) {
      const entry = SUBJECTS.find((e) => e.id === s.id)!;
      const onWater = entry.water && water;
      let x: number;
      let baseY: number;
      let size: number;
      if (s === onCliff) {
        x = cliffTop!.x;
        baseY = cliffTop!.y + H * 0.01;
        size = H * 0.2;
      } else {
        x = W * (0.5 + side * (k === 0 ? 0.17 : 0.12 + 0.1 * k));
        x = Math.min(W * 0.92, Math.max(W * 0.08, x));
        const depth = layer === 'near' ? 0.78 : onWater ? 0.22 : water && landIds.length ? 0.62 : 0.3;
        baseY = hz + (H - hz) * (depth + 0.06 * (rand() - 0.5));
        size = (layer === 'near' ? H * 0.16 : H * 0.2) * 0.85 ** k;
        side = -side;
        k++;
      }
      parts.push(DRAW[s.id]!(L, x, baseY, size, s.colour));
    }
  }
}

/** Weather overlays: snow, rain, fog. */
function drawWeather(st: Stage) {
  const { L, u, parts } = st;
  const { W, H, weather, rand, defs } = L;
  // Weather overlays.
  if (weather.has('snow'))
    for (let i = 0; i < 260; i++)
      parts.push(circle(rand() * W, rand() * H, u * (0.15 + rand() * 0.35), '#f8fbff', ' opacity="0.85"'));
  if (weather.has('rain') || weather.has('storm'))
    for (let i = 0; i < 220; i++) {
      const x = rand() * W;
      const y = rand() * H;
      parts.push(
        rect(x, y, u * 0.12, u * (2 + rand() * 3), '#c8d2e0', ` opacity="0.5" transform="rotate(12 ${n(x)} ${n(y)})"`),
      );
    }
  if (weather.has('fog')) {
    defs.push(
      `<linearGradient id="fog" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="#d6dadf" stop-opacity="0.15"/><stop offset="0.6" stop-color="#d6dadf" stop-opacity="0.6"/><stop offset="1" stop-color="#d6dadf" stop-opacity="0.25"/></linearGradient>`,
    );
    parts.push(rect(0, 0, W, H, 'url(#fog)'));
  }
}

/** No subject, time or weather named: colour and mood (colour words, mood words, references). */
function abstract(o: ComposeOptions, tints: Rgb[], style: Style, rand: () => number): string {
  const { width: W, height: H } = o;
  const palette = paletteFor(tints, rand, `${o.prompt} ${o.styleText ?? ''}`);
  const defs = [
    `<linearGradient id="bg" x1="0" y1="0" x2="${n(0.4 + rand() * 0.6)}" y2="1">${palette.map((c, i) => `<stop offset="${(i / (palette.length - 1)).toFixed(3)}" stop-color="${hex(c)}"/>`).join('')}</linearGradient>`,
  ];
  const parts = [rect(0, 0, W, H, 'url(#bg)')];
  for (let i = 0; i < 9; i++) {
    const c = palette[Math.floor(rand() * palette.length)]!;
    const id = `g${i}`;
    defs.push(
      `<radialGradient id="${id}"><stop offset="0" stop-color="${hex(c)}" stop-opacity="${style === 'flat' ? 1 : 0.8}"/><stop offset="${style === 'flat' ? 0.99 : 0.6}" stop-color="${hex(c)}" stop-opacity="${style === 'flat' ? 1 : 0.3}"/><stop offset="1" stop-color="${hex(c)}" stop-opacity="0"/></radialGradient>`,
    );
    parts.push(ellipse(rand() * W, rand() * H, W * (0.08 + rand() * 0.25), H * (0.08 + rand() * 0.25), `url(#${id})`));
  }
  return svgDoc(W, H, defs, parts);
}

const svgDoc = (W: number, H: number, defs: string[], parts: string[]) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}"><defs>${defs.join('')}</defs>${parts.join('')}</svg>`;
