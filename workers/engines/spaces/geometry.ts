import type { Measurement, SpaceDimensions } from '../../../contracts/spaces';

/**
 * Single-view geometry of a box room from one level photo (pinhole camera, horizon at the image
 * centre row, camera height h assumed). Lines come from a Sobel pass over a downscaled greyscale
 * copy, so the estimate is deterministic for the same bytes:
 *
 *  - floor–wall boundary: the row below the horizon with the strongest horizontal edge (|Gy|
 *    averaged over the middle third of the columns). A floor point at row v lies at distance
 *    D = h · f / (v − cy): the far wall's distance.
 *  - vertical lines (room corners): the columns left and right of the centre with the strongest
 *    |Gx| between the horizon band's rows. Width = D · (xr − xl) / f. A side without a corner
 *    is capped by the frame edge: the width is then a lower bound.
 *  - wall–ceiling boundary: the strongest |Gy| row above the horizon: C = h + D · (cy − v) / f;
 *    none found → the top of the frame at D, a lower bound.
 *  - depth: the far wall's distance, a lower bound (the camera's own side of the room is unseen).
 *
 * Documented error: on a level photo whose lines are clear, distances within about 10 percent
 * (the test renders a synthetic room and checks 10 percent); on real photos the camera pitch
 * and lens distortion add error, typically 5 to 15 percent as SPEC 2.14 says.
 */
export interface RoomBox {
  /** Metres, camera frame: x right, y up (0 at the floor), z forward. */
  left: number;
  right: number;
  far: number;
  back: number;
  ceiling: number;
  cameraHeight: number;
}

export interface GeometryEstimate {
  box: RoomBox;
  dimensions: SpaceDimensions;
  notes: string[];
  /** Pixel rows/columns found on the analysed copy (for tests and notes). */
  lines: { floorRow: number | null; ceilingRow: number | null; leftCol: number | null; rightCol: number | null };
}

/** Sobel magnitudes of a greyscale image (borders left 0). */
export function sobel(grey: Float32Array, w: number, h: number) {
  const gx = new Float32Array(w * h);
  const gy = new Float32Array(w * h);
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const i = y * w + x;
      const a = grey[i - w - 1]!,
        b = grey[i - w]!,
        c = grey[i - w + 1]!;
      const d = grey[i - 1]!,
        f = grey[i + 1]!;
      const g = grey[i + w - 1]!,
        k = grey[i + w]!,
        l = grey[i + w + 1]!;
      gx[i] = Math.abs(c + 2 * f + l - a - 2 * d - g);
      gy[i] = Math.abs(g + 2 * k + l - a - 2 * b - c);
    }
  }
  return { gx, gy };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
};

/** Index of the strongest value in [from, to) if it stands out (≥ 4× the median and > 8). */
function peak(profile: Float32Array, from: number, to: number): number | null {
  if (to - from < 3) return null;
  let best = from;
  for (let i = from; i < to; i++) if (profile[i]! > profile[best]!) best = i;
  const med: number = median(Array.from(profile.subarray(from, to)));
  return profile[best]! >= Math.max(8, med * 4) ? best : null;
}

const m = (value: number, confidence: number, lowerBound: boolean): Measurement => ({
  value: Math.round(value * 100) / 100,
  confidence: Math.round(confidence * 100) / 100,
  lowerBound,
});

export function estimateRoom(
  grey: Float32Array,
  w: number,
  h: number,
  fovXDeg: number,
  cameraHeight: number,
  fovFromExif: boolean,
): GeometryEstimate {
  const notes: string[] = [];
  const f = w / 2 / Math.tan((fovXDeg * Math.PI) / 360);
  const cx = w / 2;
  const cy = h / 2;
  const fovYDeg = (2 * Math.atan(h / 2 / f) * 180) / Math.PI;
  const { gx, gy } = sobel(grey, w, h);

  const rowProfile = new Float32Array(h);
  const x0 = Math.floor(w / 3),
    x1 = Math.ceil((2 * w) / 3);
  for (let y = 0; y < h; y++) {
    let s = 0;
    for (let x = x0; x < x1; x++) s += gy[y * w + x]!;
    rowProfile[y] = s / (x1 - x0);
  }
  const margin = Math.max(2, Math.round(h * 0.02));
  const floorRow = peak(rowProfile, Math.ceil(cy) + margin, h - 1);
  const ceilingRow = peak(rowProfile, 1, Math.floor(cy) - margin);

  let far: number;
  let farConf: number;
  if (floorRow !== null) {
    far = (cameraHeight * f) / (floorRow - cy);
    farConf = fovFromExif ? 0.7 : 0.55;
  } else {
    far = 3;
    farConf = 0.15;
    notes.push('No floor–wall boundary was found: the far wall was assumed 3 m away.');
  }

  // Corners: columns with strong vertical edges in the band between the two boundaries.
  const yTop = ceilingRow ?? Math.max(1, Math.round(cy - h * 0.25));
  const yBot = floorRow ?? Math.min(h - 2, Math.round(cy + h * 0.25));
  const colProfile = new Float32Array(w);
  for (let x = 0; x < w; x++) {
    let s = 0;
    for (let y = yTop + margin; y < yBot - margin; y++) s += gx[y * w + x]!;
    colProfile[x] = s / Math.max(1, yBot - yTop - 2 * margin);
  }
  const edge = Math.max(2, Math.round(w * 0.02));
  const leftCol = peak(colProfile, edge, Math.floor(cx) - edge);
  const rightCol = peak(colProfile, Math.ceil(cx) + edge, w - edge);
  const left = (-(cx - (leftCol ?? 0)) * far) / f;
  const right = (((rightCol ?? w) - cx) * far) / f;
  const widthLower = leftCol === null || rightCol === null;
  if (widthLower) notes.push('A side wall is out of frame: the width is a lower bound (the frame edge caps it).');

  let ceiling: number;
  const ceilingLower = ceilingRow === null;
  if (ceilingRow !== null) ceiling = cameraHeight + ((cy - ceilingRow) * far) / f;
  else {
    ceiling = cameraHeight + (cy * far) / f;
    notes.push(
      'The ceiling line is not in view: the ceiling height is a lower bound (the top of the frame at the far wall).',
    );
  }
  // The wall behind the camera is never seen: a generated half metre behind it, at least.
  const back = -Math.max(0.5, far * 0.25);
  const box: RoomBox = { left, right, far, back, ceiling, cameraHeight };
  const width = right - left;
  const wallsSeen = 1 + (leftCol !== null ? 1 : 0) + (rightCol !== null ? 1 : 0);
  const dimensions: SpaceDimensions = {
    widthM: m(width, widthLower ? farConf * 0.7 : farConf, widthLower),
    depthM: m(far, farConf * 0.8, true),
    ceilingM: m(ceiling, ceilingLower ? farConf * 0.6 : farConf, ceilingLower),
    cameraHeightM: m(cameraHeight, 0.5, false),
    floorAreaM2: m(width * far, farConf * 0.6, true),
    fovDeg: { x: Math.round(fovXDeg * 10) / 10, y: Math.round(fovYDeg * 10) / 10 },
    wallsSeen,
    summary: `About ${width.toFixed(1)} m wide, at least ${far.toFixed(1)} m deep, ${ceiling.toFixed(1)} m to the ceiling${ceilingLower ? ' or more' : ''}; ${wallsSeen} wall${wallsSeen === 1 ? '' : 's'} seen.`,
  };
  return { box, dimensions, notes, lines: { floorRow, ceilingRow, leftCol, rightCol } };
}

/** Distance from the camera (at y = cameraHeight) along unit direction d to the box's inside. */
export function rayToBox(box: RoomBox, dx: number, dy: number, dz: number): number {
  let t = Infinity;
  if (dx > 1e-9) t = Math.min(t, box.right / dx);
  else if (dx < -1e-9) t = Math.min(t, box.left / dx);
  if (dy > 1e-9) t = Math.min(t, (box.ceiling - box.cameraHeight) / dy);
  else if (dy < -1e-9) t = Math.min(t, -box.cameraHeight / dy);
  if (dz > 1e-9) t = Math.min(t, box.far / dz);
  else if (dz < -1e-9) t = Math.min(t, box.back / dz);
  return t;
}
