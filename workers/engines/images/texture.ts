import sharp from 'sharp';
import { lattice, sample } from './procedural';
import type { Style } from './scene';

/**
 * Style texture passes over rasterised RGB pixels. librsvg's own filter primitives
 * (feTurbulence, feDisplacementMap) would do this in the SVG, but measured about 1.6 s per
 * megapixel here against ~20 ms for the SVG itself, so the noise is the painters' own seeded value
 * noise (procedural.ts), sampled per pixel (no library offers seeded, deterministic value noise on
 * raw buffers). Blurs go through sharp. Every pass is a pure function of pixels and seed.
 */

const blur = async (px: Buffer, W: number, H: number, sigma: number) =>
  sharp(px, { raw: { width: W, height: H, channels: 3 } })
    .blur(sigma)
    .raw()
    .toBuffer();
const byte = (v: number) => (v < 0 ? 0 : v > 255 ? 255 : (v + 0.5) | 0);

/**
 * oil: short brush strokes. Each pixel takes its colour from a point pushed along the stroke (a
 * displacement by two noise fields), and a stroke grain (noise stretched along one of two
 * directions, chosen patch by patch and blended across patch rims) modulates its lightness like
 * paint ridges.
 */
function oil(src: Buffer, W: number, H: number, rand: () => number): Buffer {
  const out = Buffer.alloc(src.length);
  const nx = lattice(rand, 48);
  const ny = lattice(rand, 48);
  const patches = lattice(rand, 10);
  const grainA = lattice(rand, 256);
  const grainB = lattice(rand, 256);
  const dirs = [rand() * Math.PI, 0].map((a, i, all) => (i === 0 ? a : all[0]! + 1.1));
  const [ca, sa, cb, sb] = [Math.cos(dirs[0]!), Math.sin(dirs[0]!), Math.cos(dirs[1]!), Math.sin(dirs[1]!)];
  const amp = Math.max(W, H) / 160;
  const inv = 1 / Math.max(W, H);
  const frac = (t: number) => t - Math.floor(t);
  let w = 0;
  let d = 0;
  let dy = 0;
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const u = x * inv;
      const v = y * inv;
      if ((x & 3) === 0) {
        // The low-frequency fields (patch weight, displacement) change little over 4 pixels:
        // sampled every 4th pixel, they cost a quarter.
        w = (sample(patches, 10, u, v) - 0.42) * 6;
        w = w < 0 ? 0 : w > 1 ? 1 : w * w * (3 - 2 * w); // 0 or 1 inside a patch, blended across its rim
        d = amp * (sample(nx, 48, u, v) - 0.5) * 2;
        dy = amp * (sample(ny, 48, u, v) - 0.5);
      }
      const c = cb + (ca - cb) * w;
      const s2 = sb + (sa - sb) * w;
      const ga =
        w > 0 ? sample(grainA, 256, frac((u * ca + v * sa) * 0.2 + 0.3), frac((v * ca - u * sa) * 0.7 + 0.5)) : 0;
      const gb =
        w < 1 ? sample(grainB, 256, frac((u * cb + v * sb) * 0.2 + 0.3), frac((v * cb - u * sb) * 0.7 + 0.5)) : 0;
      const k = 0.86 + 0.26 * (gb + (ga - gb) * w);
      const sx = Math.min(W - 1, Math.max(0, (x + d * c) | 0));
      const sy = Math.min(H - 1, Math.max(0, (y + d * s2 + dy) | 0));
      const i = (sy * W + sx) * 3;
      const o = (y * W + x) * 3;
      out[o] = byte(src[i]! * k);
      out[o + 1] = byte(src[i + 1]! * k);
      out[o + 2] = byte(src[i + 2]! * k);
    }
  }
  return out;
}

/**
 * watercolour: softened shapes, pigment pooled at their edges (darker where the sharp and the
 * blurred image differ), blooms of lighter wash, paper grain, lifted toward the white paper.
 */
async function watercolour(src: Buffer, W: number, H: number, rand: () => number): Promise<Buffer> {
  const soft = await blur(src, W, H, 2.2);
  const out = Buffer.alloc(src.length);
  const bloom = lattice(rand, 10);
  const paper = lattice(rand, 256);
  const inv = 1 / Math.max(W, H);
  for (let p = 0, i = 0; p < W * H; p++, i += 3) {
    const x = p % W;
    const y = (p / W) | 0;
    const edge =
      Math.abs(src[i]! - soft[i]!) + Math.abs(src[i + 1]! - soft[i + 1]!) + Math.abs(src[i + 2]! - soft[i + 2]!);
    const dark = 1 - Math.min(0.35, edge / 300);
    const lift = 0.16 + 0.14 * sample(bloom, 10, x * inv, y * inv);
    const grain = (sample(paper, 256, x * inv, y * inv) - 0.5) * 14;
    for (let c = 0; c < 3; c++) out[i + c] = byte(soft[i + c]! * dark * (1 - lift) + 250 * lift + grain);
  }
  return out;
}

/** flat: colours snapped to a few levels per channel, as a vector poster would be filled. */
function flat(src: Buffer): Buffer {
  const out = Buffer.alloc(src.length);
  for (let i = 0; i < src.length; i++) out[i] = Math.min(255, (src[i]! >> 5) * 36 + 16);
  return out;
}

/** photo: bloom around bright lights, a lens vignette and fine sensor grain. */
async function photo(src: Buffer, W: number, H: number, rand: () => number): Promise<Buffer> {
  const halo = await blur(src, W, H, Math.max(W, H) / 90);
  const out = Buffer.alloc(src.length);
  let s = (rand() * 4294967296) >>> 0;
  for (let p = 0, i = 0; p < W * H; p++, i += 3) {
    const dx = (p % W) / W - 0.5;
    const dy = ((p / W) | 0) / H - 0.5;
    const vig = 1 - 0.55 * (dx * dx + dy * dy);
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0; // LCG: grain only needs to be cheap and seeded
    const grain = ((s >>> 24) - 128) / 40;
    for (let c = 0; c < 3; c++) {
      const h = halo[i + c]!;
      out[i + c] = byte((src[i + c]! + (h > 170 ? (h - 170) * 0.6 : 0)) * vig + grain);
    }
  }
  return out;
}

/** Apply a style's texture to RGB pixels (W*H*3), deterministically from `rand`. */
export async function applyStyle(style: Style, src: Buffer, W: number, H: number, rand: () => number): Promise<Buffer> {
  switch (style) {
    case 'oil':
      return oil(src, W, H, rand);
    case 'watercolour':
      return watercolour(src, W, H, rand);
    case 'flat':
      return flat(src);
    case 'photo':
      return photo(src, W, H, rand);
  }
}
