import exifr from 'exifr';
import sharp, { type Metadata } from 'sharp';
import type { SpaceResult } from '../../../contracts/spaces';
import { UnrecoverableError } from '../../pool/errors';
import { estimateRoom, rayToBox, type RoomBox } from './geometry';
import type { SpaceEngine, SpaceEngineContext, SpaceEngineInput } from './space.engine';
import { encodeSpz, type Splats } from './spz';

export const PHOTO_ENGINE_NAME = 'local-photo-space-v1';
/** Equirectangular grid of the panorama and the depth map (2:1). */
export const PANORAMA_SIZE = { width: 2048, height: 1024 } as const;
const WORK_WIDTH = 1024;
const ANALYSIS_WIDTH = 512;
const FEATHER_PX = 24;
const MAX_GAUSSIANS = 150_000;
const FORMATS = new Set(['jpeg', 'png', 'webp']);

type Rgb = [number, number, number];

export interface PhotoEngineOptions {
  defaultFovDeg: number;
  cameraHeightM: number;
}

/** Horizontal field of view from a 35 mm-equivalent focal length (36 mm along the long side). */
export function fovFromFocal35(focal35: number, width: number, height: number): number {
  const long = (2 * Math.atan(18 / focal35) * 180) / Math.PI;
  if (width >= height) return long;
  const fLong = height / 2 / Math.tan((long * Math.PI) / 360);
  return (2 * Math.atan(width / 2 / fLong) * 180) / Math.PI;
}

export function createPhotoSpaceEngine(opts: PhotoEngineOptions): SpaceEngine {
  return {
    name: PHOTO_ENGINE_NAME,
    async build({ plan, photos }: SpaceEngineInput, ctx: SpaceEngineContext): Promise<SpaceResult> {
      const photo = photos[0];
      await ctx.progress('decoding', 'Reading the photo');
      const notes: string[] = [];
      const { upright, W0, fovX, fovFromExif } = await uprightPhoto(photo, opts, notes);
      const { est, box, colourAt } = await roomFromPhoto(upright, W0, fovX, fovFromExif, opts, notes, ctx);

      await ctx.progress('panorama', 'Projecting the photo into a 360 panorama and generating the rest');
      const { panoJpeg, depthPng } = await panoramaOf(box, colourAt, ctx.signal);
      const poster = await sharp(upright.data)
        .resize({ width: Math.min(1024, W0) })
        .jpeg({ quality: 85 })
        .toBuffer();
      const [panoramaUrl, depthUrl, posterUrl] = [
        await ctx.store(panoJpeg, 'image/jpeg', 'panorama.jpg'),
        await ctx.store(depthPng, 'image/png', 'depth.png'),
        await ctx.store(poster, 'image/jpeg', 'poster.jpg'),
      ];
      notes.push(
        "The panorama shows the photo where it was taken; the rest of the room is generated from the photo's floor, wall and ceiling colours and blended at the seams.",
      );
      notes.push(
        'The depth map holds distances in millimetres to an estimated box room; the walls the photo did not show are placed, not measured.',
      );

      const preview: SpaceResult = {
        stage: 'preview',
        imagined: true,
        source: 'photo',
        photoCount: 1,
        panoramaUrl,
        spaceUrl: null,
        spaceFullUrl: null,
        format: null,
        metricScale: null,
        floorOffsetM: null,
        colliderUrl: null,
        depthUrl,
        posterUrl,
        gaussians: null,
        dimensions: est.dimensions,
        engine: PHOTO_ENGINE_NAME,
        notes: [...notes],
      };
      if (plan.quality === 'preview') {
        return {
          ...preview,
          notes: [...notes, 'Only the preview was requested (quality preview): no walkable space was built.'],
        };
      }
      await ctx.publishPreview(preview);

      await ctx.progress('space', 'Placing Gaussians on the estimated walls, floor and ceiling');
      const splats = boxSplats(box, colourAt);
      const spz = encodeSpz(splats);
      const spaceUrl = await ctx.store(spz, 'application/octet-stream', 'space.spz');
      notes.push(
        `The walkable space is ${splats.count} Gaussians on the estimated box room, in metres (x right, y up from the floor under the camera, z back; the photo looks down -z).`,
      );
      return { ...preview, stage: 'space', spaceUrl, format: 'spz', metricScale: 1, gaussians: splats.count, notes };
    },
  };
}

/** The photo upright (EXIF orientation), its size and its horizontal field of view (EXIF focal length, or the default). */
async function uprightPhoto(photo: Buffer | undefined, opts: PhotoEngineOptions, notes: string[]) {
  let meta: Metadata;
  try {
    meta = await sharp(photo).metadata();
  } catch {
    throw new UnrecoverableError('imageUrl: the file is not a readable image (JPEG, PNG or WebP)');
  }
  if (!meta.format || !FORMATS.has(meta.format))
    throw new UnrecoverableError(`imageUrl: ${meta.format ?? 'unknown'} images are not supported (JPEG, PNG or WebP)`);

  // Upright copy first: EXIF orientation decides what "level" means.
  const upright = await sharp(photo).rotate().toBuffer({ resolveWithObject: true });
  const W0 = upright.info.width,
    H0 = upright.info.height;
  let fovX = opts.defaultFovDeg;
  let fovFromExif = false;
  try {
    const exif = await exifr.parse(photo, ['FocalLengthIn35mmFormat']);
    const f35 = Number(exif?.FocalLengthIn35mmFormat);
    if (f35 > 0) {
      fovX = fovFromFocal35(f35, W0, H0);
      fovFromExif = true;
      notes.push(`Field of view ${fovX.toFixed(1)}° from the photo's EXIF (${f35} mm equivalent).`);
    }
  } catch {
    // unreadable EXIF is the same as none
  }
  if (!fovFromExif)
    notes.push(`No focal length in the photo's EXIF: a ${opts.defaultFovDeg}° horizontal field of view was assumed.`);
  notes.push(
    `Camera height assumed ${opts.cameraHeightM} m above the floor, photo assumed level; this sets the scale.`,
  );
  return { upright, W0, H0, fovX, fovFromExif };
}

/**
 * The room estimated from the photo (a box, its lines and dimensions), and the colour seen along
 * any direction from the camera: the photo where it saw, the box's surface colours elsewhere.
 */
async function roomFromPhoto(
  upright: { data: Buffer },
  W0: number,
  fovX: number,
  fovFromExif: boolean,
  opts: PhotoEngineOptions,
  notes: string[],
  ctx: SpaceEngineContext,
) {
  const work = await sharp(upright.data)
    .resize({ width: Math.min(WORK_WIDTH, W0), kernel: 'lanczos3' })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const ww = work.info.width,
    wh = work.info.height,
    wc = work.info.channels;
  const ana = await sharp(upright.data)
    .resize({ width: Math.min(ANALYSIS_WIDTH, W0) })
    .greyscale()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const grey = Float32Array.from(ana.data.subarray(0, ana.info.width * ana.info.height));

  await ctx.progress('measuring', 'Estimating the room from the photo');
  const est = estimateRoom(grey, ana.info.width, ana.info.height, fovX, opts.cameraHeightM, fovFromExif);
  notes.push(...est.notes);
  const box = est.box;

  const f = ww / 2 / Math.tan((fovX * Math.PI) / 360);
  const cx = ww / 2,
    cy = wh / 2;
  const k = ww / ana.info.width;
  const meanRgb = (y0: number, y1: number): Rgb => {
    const s: Rgb = [0, 0, 0];
    let n = 0;
    for (let y = Math.max(0, Math.floor(y0)); y < Math.min(wh, Math.ceil(y1)); y++)
      for (let x = 0; x < ww; x += 2) {
        const i = (y * ww + x) * wc;
        s[0] += work.data[i]!;
        s[1] += work.data[i + 1]!;
        s[2] += work.data[i + 2]!;
        n++;
      }
    return n ? [s[0]! / n, s[1]! / n, s[2]! / n] : [128, 128, 128];
  };
  const floorRow = (est.lines.floorRow ?? ana.info.height * 0.8) * k;
  const ceilingRow = (est.lines.ceilingRow ?? ana.info.height * 0.05) * k;
  const surface = {
    floor: meanRgb(floorRow + 2, wh),
    wall: meanRgb(ceilingRow + 2, floorRow - 2),
    ceiling: est.lines.ceilingRow !== null ? meanRgb(0, ceilingRow - 2) : meanRgb(0, wh * 0.05),
  };

  /** Colour seen along a unit direction (camera frame, z forward): the photo where it saw, the box's surface colour elsewhere, feathered. */
  const colourAt = (dx: number, dy: number, dz: number, out: Float32Array, o: number) => {
    const t = rayToBox(box, dx, dy, dz);
    const py = box.cameraHeight + t * dy;
    const base = py <= 1e-3 ? surface.floor : py >= box.ceiling - 1e-3 ? surface.ceiling : surface.wall;
    // Farther surfaces a little darker: the generated part keeps some depth cue.
    const shade = 1 / (1 + 0.04 * t);
    let r = base[0] * shade,
      g = base[1] * shade,
      b = base[2] * shade;
    if (dz > 1e-6) {
      const u = cx + (f * dx) / dz,
        v = cy - (f * dy) / dz;
      const inside = Math.min(u, ww - 1 - u, v, wh - 1 - v);
      if (inside >= 0) {
        const w = Math.min(1, inside / FEATHER_PX);
        const i = (Math.round(v) * ww + Math.round(u)) * wc;
        r = r * (1 - w) + work.data[i]! * w;
        g = g * (1 - w) + work.data[i + 1]! * w;
        b = b * (1 - w) + work.data[i + 2]! * w;
      }
    }
    out[o] = r;
    out[o + 1] = g;
    out[o + 2] = b;
  };
  return { est, box, colourAt };
}

/** The 360 panorama (JPEG) and its depth map (16-bit PNG, millimetres) of the box room as colourAt sees it. */
async function panoramaOf(
  box: RoomBox,
  colourAt: (dx: number, dy: number, dz: number, out: Float32Array, o: number) => void,
  signal: AbortSignal,
) {
  const { width: PW, height: PH } = PANORAMA_SIZE;
  const pano = Buffer.alloc(PW * PH * 3);
  const depth = new Uint16Array(PW * PH);
  const px = new Float32Array(3);
  for (let y = 0; y < PH; y++) {
    const lat = Math.PI / 2 - ((y + 0.5) / PH) * Math.PI;
    const cl = Math.cos(lat),
      sl = Math.sin(lat);
    for (let x = 0; x < PW; x++) {
      const lon = ((x + 0.5) / PW) * 2 * Math.PI - Math.PI;
      const dx = cl * Math.sin(lon),
        dy = sl,
        dz = cl * Math.cos(lon);
      colourAt(dx, dy, dz, px, 0);
      const i = (y * PW + x) * 3;
      pano[i] = px[0]!;
      pano[i + 1] = px[1]!;
      pano[i + 2] = px[2]!;
      depth[y * PW + x] = Math.min(65535, Math.round(rayToBox(box, dx, dy, dz) * 1000));
    }
    if ((y & 63) === 0 && signal.aborted) throw signal.reason;
  }
  const panoJpeg = await sharp(pano, { raw: { width: PW, height: PH, channels: 3 } })
    .jpeg({ quality: 85 })
    .toBuffer();
  const depthPng = await sharp(depth, { raw: { width: PW, height: PH, channels: 1 } }) // a Uint16Array: sharp reads it as 16-bit samples
    .toColourspace('grey16')
    .png()
    .toBuffer();
  return { panoJpeg, depthPng };
}

/**
 * Flat Gaussians on a regular grid over the six faces of the box (about `maxGaussians` of them,
 * the grid spacing chosen from the box's area), σ in-plane 0.6 × spacing so
 * neighbours overlap (no holes at walking distance), 4 mm thick, axis-aligned (identity rotation).
 */
export function boxSplats(
  box: RoomBox,
  colourAt: (dx: number, dy: number, dz: number, out: Float32Array, o: number) => void,
  maxGaussians = MAX_GAUSSIANS,
): Splats {
  const W = box.right - box.left,
    D = box.far - box.back,
    H = box.ceiling;
  const area = 2 * W * D + 2 * W * H + 2 * D * H;
  const s = Math.max(0.02, Math.sqrt(area / maxGaussians));
  const steps = (len: number) => Math.max(1, Math.ceil(len / s));
  const nx = steps(W),
    ny = steps(H),
    nz = steps(D);
  const count = 2 * nx * nz + 2 * nx * ny + 2 * nz * ny;
  const positions = new Float32Array(count * 3);
  const logScales = new Float32Array(count * 3);
  const rotations = new Float32Array(count * 4);
  const colours = new Float32Array(count * 3);
  const alphas = new Float32Array(count).fill(0.95);
  const px = new Float32Array(3);
  const lsIn = Math.log(s * 0.6),
    lsThin = Math.log(0.004);
  let n = 0;
  // (x, y, z) in the camera frame (z forward, y from the floor); stored RUB (z back).
  const put = (x: number, y: number, z: number, thin: 0 | 1 | 2) => {
    positions[n * 3] = x;
    positions[n * 3 + 1] = y;
    positions[n * 3 + 2] = -z;
    for (let a = 0; a < 3; a++) logScales[n * 3 + a] = a === thin ? lsThin : lsIn;
    rotations[n * 4 + 3] = 1;
    const dx = x,
      dy = y - box.cameraHeight,
      dz = z;
    const len = Math.hypot(dx, dy, dz) || 1;
    colourAt(dx / len, dy / len, dz / len, px, 0);
    colours[n * 3] = px[0]! / 255;
    colours[n * 3 + 1] = px[1]! / 255;
    colours[n * 3 + 2] = px[2]! / 255;
    n++;
  };
  const at = (lo: number, len: number, count: number, i: number) => lo + ((i + 0.5) * len) / count;
  for (let i = 0; i < nx; i++)
    for (let j = 0; j < nz; j++) {
      put(at(box.left, W, nx, i), 0, at(box.back, D, nz, j), 1);
      put(at(box.left, W, nx, i), H, at(box.back, D, nz, j), 1);
    }
  for (let i = 0; i < nx; i++)
    for (let j = 0; j < ny; j++) {
      put(at(box.left, W, nx, i), at(0, H, ny, j), box.far, 2);
      put(at(box.left, W, nx, i), at(0, H, ny, j), box.back, 2);
    }
  for (let i = 0; i < nz; i++)
    for (let j = 0; j < ny; j++) {
      put(box.left, at(0, H, ny, j), at(box.back, D, nz, i), 0);
      put(box.right, at(0, H, ny, j), at(box.back, D, nz, i), 0);
    }
  return { count, positions, logScales, rotations, colours, alphas };
}
