import { createHash } from 'node:crypto';

/**
 * Deterministic building blocks of the local media engines: a seeded PRNG (sfc32 seeded from
 * SHA-256), colour words and mood palettes (the image scene composer's fallback when a prompt
 * names no subject), mean colours of reference images, and the value-noise painter `paint` that
 * the local video engine draws its frames with (the image engines compose scenes instead,
 * scene.ts). No Math.random, no clock, no float formatting: the same input gives the same pixels
 * on every machine.
 */
export type Rgb = readonly [number, number, number];

/** SHA-256 over the parts, joined by NUL. */
export const seedBytes = (...parts: (string | number)[]) =>
  createHash('sha256').update(parts.map(String).join('\0')).digest();

/** sfc32 over four 32-bit words of `seed`: a fast PRNG returning [0, 1). */
export function prng(seed: Buffer): () => number {
  let a = seed.readUInt32LE(0);
  let b = seed.readUInt32LE(4);
  let c = seed.readUInt32LE(8);
  let d = seed.readUInt32LE(12);
  const next = () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

/** Colour words the painters understand (CSS-like values). */
export const COLOUR_WORDS: Record<string, Rgb> = {
  red: [204, 36, 36],
  crimson: [178, 24, 52],
  scarlet: [235, 45, 20],
  orange: [255, 140, 0],
  amber: [255, 176, 0],
  gold: [255, 200, 20],
  golden: [255, 200, 20],
  yellow: [250, 225, 20],
  lime: [160, 230, 30],
  green: [34, 139, 34],
  emerald: [20, 160, 100],
  teal: [0, 128, 128],
  turquoise: [40, 200, 190],
  cyan: [0, 200, 230],
  blue: [30, 80, 220],
  azure: [40, 140, 255],
  navy: [16, 28, 90],
  indigo: [75, 0, 130],
  violet: [140, 60, 220],
  purple: [120, 40, 160],
  magenta: [220, 0, 200],
  pink: [255, 105, 180],
  white: [245, 245, 245],
  silver: [192, 196, 204],
  grey: [128, 128, 128],
  gray: [128, 128, 128],
  black: [18, 18, 22],
  // Skin-like tones: a palette of only these renders mostly skin-toned pixels (see safety.ts).
  peach: [255, 218, 185],
  tan: [210, 180, 140],
  brown: [139, 69, 19],
  bronze: [205, 127, 50],
  caramel: [196, 142, 92],
  beige: [245, 245, 220],
};

/** Curated scene palettes, dark to light, used when the prompt names no colour. */
const SCENES: Rgb[][] = [
  [
    [10, 14, 40],
    [40, 60, 130],
    [120, 150, 220],
    [230, 235, 250],
  ], // moonlit blue
  [
    [8, 30, 20],
    [30, 90, 50],
    [110, 170, 90],
    [220, 240, 200],
  ], // forest
  [
    [20, 10, 40],
    [90, 30, 120],
    [200, 80, 160],
    [250, 220, 120],
  ], // dusk violet to gold
  [
    [0, 30, 40],
    [0, 100, 120],
    [60, 190, 200],
    [220, 250, 250],
  ], // lagoon
  [
    [25, 25, 30],
    [80, 85, 100],
    [160, 170, 190],
    [240, 242, 248],
  ], // slate
  [
    [40, 0, 10],
    [150, 20, 40],
    [240, 120, 40],
    [255, 230, 150],
  ], // ember
];

/** Scene words that pick a scene palette (index into SCENES) when the prompt names no colour. */
const SCENE_WORDS: Record<string, number> = Object.fromEntries(
  (
    [
      [0, 'night moon moonlit midnight starry stars winter snow snowy ice frozen'],
      [1, 'forest jungle garden park meadow tree trees leaves grass hills valley'],
      [2, 'dusk sunset twilight evening dawn sunrise'],
      [3, 'sea ocean lagoon beach river lake water harbour harbor coast waves underwater'],
      [4, 'city skyline street concrete rain fog foggy storm industrial robot'],
      [5, 'fire flame flames lava volcano ember embers desert autumn'],
    ] as const
  ).flatMap(([i, words]) => words.split(' ').map((w) => [w, i])),
);

/** The scene palette named by the first scene word in `text`, or null. */
function sceneIn(text: string): Rgb[] | null {
  for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const i = SCENE_WORDS[w];
    if (i !== undefined) return SCENES[i]!;
  }
  return null;
}

const lum = (c: Rgb) => 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
const scale = (c: Rgb, f: number): Rgb => [
  Math.min(255, Math.round(c[0] * f)),
  Math.min(255, Math.round(c[1] * f)),
  Math.min(255, Math.round(c[2] * f)),
];

/** Colour words found in `text`, in order, without repeats. */
export function colourWordsIn(text: string): Rgb[] {
  const out: Rgb[] = [];
  const seen = new Set<string>();
  for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const c = COLOUR_WORDS[w];
    if (c && !seen.has(w)) {
      seen.add(w);
      out.push(c);
    }
  }
  return out;
}

/**
 * The palette, dark to light. Named colours (from the prompt, then from reference images) are the
 * palette when there are two or more; one named colour is joined by a scene's accents; none
 * gives a scene palette: the one a scene word in `text` names (night, forest, sunset, sea, city,
 * fire...), else one picked by the seed. Each named colour brings a shade of itself so light
 * and shadow stay in the asked hue.
 */
export function paletteFor(named: Rgb[], rand: () => number, text = ''): Rgb[] {
  const picked = SCENES[Math.floor(rand() * SCENES.length)]!;
  const scene = sceneIn(text) ?? picked;
  if (named.length === 0) return scene;
  const stops: Rgb[] = [];
  for (const c of named.slice(0, 6)) stops.push(scale(c, 0.45), c);
  if (named.length === 1) stops.push(scene[1]!, scene[3]!);
  return stops.sort((a, b) => lum(a) - lum(b));
}

export interface PaintOptions {
  width: number;
  height: number;
  seed: Buffer;
  palette: Rgb[];
  /** Detail passes: each adds one finer octave of noise and re-normalises (the "denoising" schedule). */
  steps: number;
  /** Guidance: contrast of the final field around its middle. */
  cfg: number;
  /** Domain warp strength (0 none). */
  warp?: number;
  /** Bright glows placed by the seed (subjects and lights). */
  glows?: number;
  /** Quantise to the palette stops (flat, poster-like shapes). */
  posterize?: boolean;
  /** Horizontal bands (text-like rhythm). */
  bands?: boolean;
  /** Darken the corners. */
  vignette?: boolean;
  /** Called between steps; may yield to the event loop or throw to abort. */
  onStep?: (step: number) => Promise<void> | void;
}

/** Paint an RGB image (width*height*3 bytes). */
export async function paint(o: PaintOptions): Promise<Uint8Array> {
  const { width: W, height: H } = o;
  const rand = prng(o.seed);
  const field = new Float32Array(W * H);
  const warp = o.warp ?? 0;
  const warpX = warp > 0 ? lattice(rand, 4) : null;
  const warpY = warp > 0 ? lattice(rand, 4) : null;
  const inv = 1 / Math.max(W, H);

  // Sample coordinates, warped once by a coarse noise when asked.
  const U = new Float32Array(W * H);
  const V = new Float32Array(W * H);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      let u = x * inv;
      let v = y * inv;
      if (warpX && warpY) {
        u += warp * (sample(warpX, 4, x * inv, y * inv) - 0.5);
        v += warp * (sample(warpY, 4, x * inv, y * inv) - 0.5);
      }
      U[y * W + x] = u;
      V[y * W + x] = v;
    }
  }
  for (let s = 0; s < o.steps; s++) {
    const cells = Math.min(2 << s, 512); // 2, 4, 8, ... cells across the long side
    const grid = lattice(rand, cells);
    const amp = 1 / (1 << s);
    for (let i = 0; i < field.length; i++) field[i]! += amp * sample(grid, cells, U[i]!, V[i]!);
    await o.onStep?.(s);
  }

  // Glows: soft radial lights placed by the seed.
  for (let g = 0; g < (o.glows ?? 0); g++) {
    const cx = rand() * W;
    const cy = rand() * H;
    const r = (0.12 + rand() * 0.25) * Math.max(W, H);
    const k = 0.6 + rand() * 0.8;
    const r2 = r * r;
    for (let y = Math.max(0, Math.floor(cy - r)); y < Math.min(H, Math.ceil(cy + r)); y++) {
      for (let x = Math.max(0, Math.floor(cx - r)); x < Math.min(W, Math.ceil(cx + r)); x++) {
        const d2 = (x - cx) ** 2 + (y - cy) ** 2;
        if (d2 < r2) field[y * W + x]! += k * (1 - d2 / r2) ** 2;
      }
    }
  }
  if (o.bands) {
    const period = 8 + Math.floor(rand() * 24);
    for (let y = 0; y < H; y++) {
      const b = Math.floor(y / period) % 2 === 0 ? 0.25 : -0.25;
      for (let x = 0; x < W; x++) field[y * W + x]! += b;
    }
  }

  // Normalise to [0, 1], apply guidance as contrast, vignette.
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < field.length; i++) {
    const f = field[i]!;
    if (f < min) min = f;
    if (f > max) max = f;
  }
  const span = max - min || 1;
  const contrast = 0.7 + 0.3 * o.cfg;
  const stops = o.palette;
  const n = stops.length - 1;
  const out = new Uint8Array(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = y * W + x;
      let t = (field[i]! - min) / span;
      t = 0.5 + (t - 0.5) * contrast;
      if (o.vignette) {
        const dx = x / W - 0.5;
        const dy = y / H - 0.5;
        t *= 1 - 0.9 * (dx * dx + dy * dy);
      }
      t = t < 0 ? 0 : Math.min(t, 1);
      let pos = t * n;
      if (o.posterize) pos = Math.round(pos);
      const k = Math.min(n - 1, Math.floor(pos));
      const f = pos - k;
      const a = stops[k]!;
      const b = stops[Math.min(n, k + 1)]!;
      out[i * 3] = Math.round(a[0] + (b[0] - a[0]) * f);
      out[i * 3 + 1] = Math.round(a[1] + (b[1] - a[1]) * f);
      out[i * 3 + 2] = Math.round(a[2] + (b[2] - a[2]) * f);
    }
  }
  return out;
}

/** A (cells+1)² lattice of random values (also the noise of the style textures, texture.ts). */
export function lattice(rand: () => number, cells: number): Float32Array {
  const g = new Float32Array((cells + 1) * (cells + 1));
  for (let i = 0; i < g.length; i++) g[i] = rand();
  return g;
}

/** Smooth value noise at (u, v) in [0, 1]² (clamped), from a lattice of `cells`. */
export function sample(g: Float32Array, cells: number, u: number, v: number): number {
  const x = Math.min(cells - 1e-6, Math.max(0, u * cells));
  const y = Math.min(cells - 1e-6, Math.max(0, v * cells));
  const xi = Math.floor(x);
  const yi = Math.floor(y);
  let fx = x - xi;
  let fy = y - yi;
  fx = fx * fx * (3 - 2 * fx);
  fy = fy * fy * (3 - 2 * fy);
  const row = cells + 1;
  const a = g[yi * row + xi]!;
  const b = g[yi * row + xi + 1]!;
  const c = g[(yi + 1) * row + xi]!;
  const d = g[(yi + 1) * row + xi + 1]!;
  return a + (b - a) * fx + (c - a) * fy + (a - b - c + d) * fx * fy;
}

/** Mean colour of RGB or RGBA pixels (sampled). */
export function meanColour(pixels: Uint8Array, channels: 3 | 4): Rgb {
  let r = 0;
  let g = 0;
  let b = 0;
  let n = 0;
  const stride = channels * Math.max(1, Math.floor(pixels.length / channels / 4096));
  for (let i = 0; i + 2 < pixels.length; i += stride) {
    r += pixels[i]!;
    g += pixels[i + 1]!;
    b += pixels[i + 2]!;
    n++;
  }
  return n ? [Math.round(r / n), Math.round(g / n), Math.round(b / n)] : [128, 128, 128];
}
