/**
 * Yaw of each view of a room taken from one spot, by phase correlation on cylindrical
 * projections (the room engine's stitching step, local-room-v1).
 *
 * A camera turning about its vertical axis by θ moves the scene sideways by exactly f·θ pixels on
 * a cylinder of radius f (it is not a plain translation on the flat photo, which is why each view
 * is warped to the cylinder first). Two overlapping cylindrical views therefore differ by a
 * translation, and phase correlation finds it: with F1, F2 their 2-D Fourier transforms, the
 * inverse transform of the normalised cross-power spectrum F1·conj(F2) / |F1·conj(F2)| is a
 * sharp peak at the shift. Each view is mean-subtracted, tapered at its borders (raised cosine,
 * so the image edges do not dominate the spectrum while the overlapping parts keep full weight)
 * and zero-padded to a power-of-two frame at least twice as wide as the view, so shifts up to a
 * full view width are not folded by the circular correlation. The peak is refined to a fraction
 * of a pixel with a parabola through its neighbours.
 *
 * The FFT is a small radix-2 Cooley–Tukey written here: no FFT package is installed in this
 * build (fft.js would fit and could replace `fft2d`); the 2-D transform is rows then columns.
 */

/** In-place radix-2 complex FFT of length n (a power of two); `inverse` scales by 1/n. */
export function fft(re: Float64Array, im: Float64Array, inverse = false): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = ((inverse ? 2 : -2) * Math.PI) / len;
    const wr = Math.cos(ang),
      wi = Math.sin(ang);
    for (let i = 0; i < n; i += len) {
      let cr = 1,
        ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = i + k,
          b = a + len / 2;
        const xr = re[b]! * cr - im[b]! * ci,
          xi = re[b]! * ci + im[b]! * cr;
        re[b] = re[a]! - xr;
        im[b] = im[a]! - xi;
        re[a] = re[a]! + xr;
        im[a] = im[a]! + xi;
        const t = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = t;
      }
    }
  }
  if (inverse)
    for (let i = 0; i < n; i++) {
      re[i]! /= n;
      im[i]! /= n;
    }
}

/** 2-D FFT of a w×h (powers of two) complex image stored row-major. */
export function fft2d(re: Float64Array, im: Float64Array, w: number, h: number, inverse = false): void {
  const rr = new Float64Array(w),
    ri = new Float64Array(w);
  for (let y = 0; y < h; y++) {
    rr.set(re.subarray(y * w, y * w + w));
    ri.set(im.subarray(y * w, y * w + w));
    fft(rr, ri, inverse);
    re.set(rr, y * w);
    im.set(ri, y * w);
  }
  const cr = new Float64Array(h),
    ci = new Float64Array(h);
  for (let x = 0; x < w; x++) {
    for (let y = 0; y < h; y++) {
      cr[y] = re[y * w + x]!;
      ci[y] = im[y * w + x]!;
    }
    fft(cr, ci, inverse);
    for (let y = 0; y < h; y++) {
      re[y * w + x] = cr[y]!;
      im[y * w + x] = ci[y]!;
    }
  }
}

const pow2 = (n: number) => 1 << Math.ceil(Math.log2(Math.max(2, n)));

/** A greyscale view ready to correlate: its spectrum on a shared padded frame. */
export interface CylView {
  re: Float64Array;
  im: Float64Array;
}

/** Frame size (powers of two) for views w×h with focal length f px. */
export function frameFor(w: number, h: number, f: number) {
  const cw = Math.ceil(2 * f * Math.atan(w / 2 / f));
  return { cw, fw: pow2(2 * cw), fh: pow2(h) };
}

/**
 * Warp a greyscale view (w×h, focal f px, principal point at the centre) onto the cylinder,
 * mean-subtract, taper its borders and transform it on an fw×fh frame.
 */
export function cylinderSpectrum(
  grey: Float32Array,
  w: number,
  h: number,
  f: number,
  frame: { cw: number; fw: number; fh: number },
): CylView {
  const { cw, fw, fh } = frame;
  const vals = new Float64Array(cw * h);
  const mask = new Uint8Array(cw * h);
  let sum = 0,
    n = 0;
  for (let v = 0; v < h; v++) {
    const hc = (v + 0.5 - h / 2) / f;
    for (let u = 0; u < cw; u++) {
      const th = (u + 0.5 - cw / 2) / f;
      const x = f * Math.tan(th) + w / 2 - 0.5;
      const y = (f * hc) / Math.cos(th) + h / 2 - 0.5;
      if (x < 0 || y < 0 || x > w - 1 || y > h - 1) continue;
      const x0 = Math.floor(x),
        y0 = Math.floor(y),
        x1 = Math.min(w - 1, x0 + 1),
        y1 = Math.min(h - 1, y0 + 1);
      const ax = x - x0,
        ay = y - y0;
      const val =
        (grey[y0 * w + x0]! * (1 - ax) + grey[y0 * w + x1]! * ax) * (1 - ay) +
        (grey[y1 * w + x0]! * (1 - ax) + grey[y1 * w + x1]! * ax) * ay;
      vals[v * cw + u] = val;
      mask[v * cw + u] = 1;
      sum += val;
      n++;
    }
  }
  const mean = n ? sum / n : 0;
  // Only the band of rows valid across the whole width: the warp leaves the corners empty, and
  // that fixed outline would otherwise correlate with itself at zero shift.
  const band = Math.floor((h / 2) * Math.cos(cw / 2 / f)) - 1;
  const v0 = Math.ceil(h / 2 - band),
    v1 = Math.floor(h / 2 + band);
  const ramp = Math.max(4, Math.round(cw * 0.06));
  const taper = (d: number) => (d >= ramp ? 1 : 0.5 - 0.5 * Math.cos((Math.PI * Math.max(0, d)) / ramp));
  const re = new Float64Array(fw * fh),
    im = new Float64Array(fw * fh);
  for (let v = v0; v < v1; v++)
    for (let u = 0; u < cw; u++) {
      if (!mask[v * cw + u]) continue;
      const t = taper(Math.min(u, cw - 1 - u)) * taper(Math.min(v - v0, v1 - 1 - v));
      re[v * fw + u] = (vals[v * cw + u]! - mean) * t;
    }
  fft2d(re, im, fw, fh);
  return { re, im };
}

/**
 * Shift of view b against view a on the cylinder (pixels; +dx: b's content lies right of a's) and
 * the strength of the correlation peak (0..1; noise stays near 0, a clean overlap well above 0.05).
 */
export function phaseCorrelate(
  a: CylView,
  b: CylView,
  fw: number,
  fh: number,
): { dx: number; dy: number; peak: number } {
  const n = fw * fh;
  const re = new Float64Array(n),
    im = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    // conj(A)·B: the peak lands at +d when b(x) = a(x − d).
    const pr = a.re[i]! * b.re[i]! + a.im[i]! * b.im[i]!;
    const pi = a.re[i]! * b.im[i]! - a.im[i]! * b.re[i]!;
    const mag = Math.hypot(pr, pi) || 1;
    re[i] = pr / mag;
    im[i] = pi / mag;
  }
  fft2d(re, im, fw, fh, true);
  let best = 0;
  for (let i = 1; i < n; i++) if (re[i]! > re[best]!) best = i;
  const bx = best % fw,
    by = Math.floor(best / fw);
  const at = (x: number, y: number) => re[((y + fh) % fh) * fw + ((x + fw) % fw)]!;
  const sub = (l: number, c: number, r: number) => {
    const d = l - 2 * c + r;
    return d < 0 ? Math.max(-0.5, Math.min(0.5, (0.5 * (l - r)) / d)) : 0;
  };
  let dx = bx + sub(at(bx - 1, by), at(bx, by), at(bx + 1, by));
  let dy = by + sub(at(bx, by - 1), at(bx, by), at(bx, by + 1));
  if (dx > fw / 2) dx -= fw;
  if (dy > fh / 2) dy -= fh;
  return { dx, dy, peak: re[best]! };
}

/** Correlation peaks below this are treated as "these two views do not overlap". */
export const MIN_PEAK = 0.03;

export interface YawEstimate {
  /** Degrees per view, in input order, the first view at 0, positive turning right. */
  yawDeg: number[];
  /** Indices of the views sorted by yaw (the order around the camera). */
  order: number[];
  /** Peak strength of each view against the one before it (NaN for the first). */
  peaks: number[];
  notes: string[];
}

/**
 * Yaw of every view: each view is correlated with the one taken before it (the SPEC asks for
 * photos in the order taken, a video is in time order), the turn between them is −dx / f; a
 * pair without a clear peak is placed half a field of view on, and a note says so.
 */
export function estimateYaws(views: { grey: Float32Array; w: number; h: number }[], fovXDeg: number): YawEstimate {
  const { w, h } = views[0]!;
  const f = w / 2 / Math.tan((fovXDeg * Math.PI) / 360);
  const frame = frameFor(w, h, f);
  const spectra = views.map((v) => cylinderSpectrum(v.grey, v.w, v.h, f, frame));
  const yaw = [0];
  const peaks = [Number.NaN];
  const notes: string[] = [];
  for (let i = 1; i < views.length; i++) {
    const c = phaseCorrelate(spectra[i - 1]!, spectra[i]!, frame.fw, frame.fh);
    peaks.push(c.peak);
    let step: number;
    if (c.peak >= MIN_PEAK) step = (-c.dx / f) * (180 / Math.PI);
    else {
      step = fovXDeg / 2;
      notes.push(
        `View ${i + 1} did not overlap view ${i} clearly: it was placed half a field of view (${step.toFixed(0)}°) further round.`,
      );
    }
    yaw.push(yaw[i - 1]! + step);
  }
  const order = yaw.map((_, i) => i).sort((a, b) => yaw[a]! - yaw[b]! || a - b);
  return { yawDeg: yaw, order, peaks, notes };
}
