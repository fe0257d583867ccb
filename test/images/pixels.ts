import { decodeImage } from '../../platform/media/codec';

/** RGB pixels of a PNG. */
export interface Pixels {
  width: number;
  height: number;
  data: Buffer;
}

export const pixelsOf = async (png: Buffer): Promise<Pixels> => {
  const img = await decodeImage(png, { channels: 3 });
  return { width: img.width, height: img.height, data: img.data };
};

export const lumAt = (p: Pixels, x: number, y: number) => {
  const i = (y * p.width + x) * 3;
  return 0.299 * p.data[i]! + 0.587 * p.data[i + 1]! + 0.114 * p.data[i + 2]!;
};

/** Mean RGB over rows [y0, y1). */
export function meanRows(p: Pixels, y0: number, y1: number): [number, number, number] {
  const s = [0, 0, 0];
  for (let y = y0; y < y1; y++)
    for (let x = 0; x < p.width; x++) for (let c = 0; c < 3; c++) s[c]! += p.data[(y * p.width + x) * 3 + c]!;
  const n = (y1 - y0) * p.width;
  return [s[0]! / n, s[1]! / n, s[2]! / n];
}

/** Hue in degrees of an RGB colour. */
export function hue([r, g, b]: [number, number, number]): number {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  if (max === min) return 0;
  const d = max - min;
  const h = max === r ? ((g - b) / d) % 6 : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
  return (h * 60 + 360) % 360;
}

/**
 * The tallest bright vertical shape: per column, the longest run of pixels at least `minLum`
 * bright (gaps up to `gap` rows, such as painted bands, do not end a run); the best column, its
 * run, and how many neighbouring columns share at least half that run (the shape's width).
 */
export function tallestBrightColumn(
  p: Pixels,
  minLum: number,
  gap = 0,
): { x: number; top: number; run: number; width: number } {
  const runs: { run: number; top: number }[] = [];
  for (let x = 0; x < p.width; x++) {
    let best = { run: 0, top: 0 };
    let start = -1;
    let last = -1;
    for (let y = 0; y < p.height; y++) {
      if (lumAt(p, x, y) < minLum) continue;
      if (start < 0 || y - last > gap + 1) start = y;
      last = y;
      if (last - start + 1 > best.run) best = { run: last - start + 1, top: start };
    }
    runs.push(best);
  }
  let x = 0;
  for (let i = 1; i < runs.length; i++) if (runs[i]!.run > runs[x]!.run) x = i;
  const { run, top } = runs[x]!;
  let l = x;
  let r = x;
  while (l > 0 && runs[l - 1]!.run >= run / 2) l--;
  while (r < runs.length - 1 && runs[r + 1]!.run >= run / 2) r++;
  return { x, top, run, width: r - l + 1 };
}

/** Share of pixels whose luminance differs from the right neighbour by more than `step`. */
export function edgeDensity(p: Pixels, step = 10): number {
  let edges = 0;
  for (let y = 0; y < p.height; y++)
    for (let x = 0; x + 1 < p.width; x++) if (Math.abs(lumAt(p, x, y) - lumAt(p, x + 1, y)) > step) edges++;
  return edges / (p.height * (p.width - 1));
}

/** Distinct RGB colours. */
export function colourCount(p: Pixels): number {
  const seen = new Set<number>();
  for (let i = 0; i < p.data.length; i += 3) seen.add((p.data[i]! << 16) | (p.data[i + 1]! << 8) | p.data[i + 2]!);
  return seen.size;
}

/** Share of pixels where any channel differs by more than `tolerance`. */
export function changedShare(a: Pixels, b: Pixels, tolerance = 24): number {
  let n = 0;
  for (let i = 0; i < a.data.length; i += 3) {
    if (
      Math.abs(a.data[i]! - b.data[i]!) > tolerance ||
      Math.abs(a.data[i + 1]! - b.data[i + 1]!) > tolerance ||
      Math.abs(a.data[i + 2]! - b.data[i + 2]!) > tolerance
    )
      n++;
  }
  return n / (a.data.length / 3);
}
