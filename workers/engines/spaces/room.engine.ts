import exifr from 'exifr';
import sharp from 'sharp';
import type { SpaceResult } from '../../../contracts/spaces';
import { UnrecoverableError } from '../../pool/errors';
import { boxColliderGlb } from './collider';
import type { RoomBox } from './geometry';
import { boxSplats, fovFromFocal35 } from './photo.engine';
import type { SpaceEngine, SpaceEngineContext, SpaceEngineInput } from './space.engine';
import { encodeSpz, type Splats } from './spz';
import { estimateYaws } from './stitch';

export const ROOM_ENGINE_NAME = 'local-room-v1';
/** Equirectangular grid of a room's panorama (2:1 PNG). */
export const ROOM_PANORAMA_SIZE = { width: 2048, height: 1024 } as const;
/** Gaussians of the quick splat (stage preview) and of the full splat (stage space). */
export const QUICK_GAUSSIANS = 20_000;
export const FULL_GAUSSIANS = 150_000;
/** Width of the colour copies painted into the panorama, and of the copies the geometry reads. */
const VIEW_WIDTH = 640;
const ANALYSIS_WIDTH = 320;
const FEATHER_PX = 32;
const FORMATS = new Set(['jpeg', 'png', 'webp']);

export interface RoomEngineOptions {
  defaultFovDeg: number;
  cameraHeightM: number;
}

interface View {
  rgb: Buffer;
  grey: Float32Array;
  yaw: number;
  /** Had to be cropped to the first view's shape. */
  cropped: boolean;
}

/**
 * The local room engine (local-room-v1): several photos taken from one spot, or frames sampled
 * from a video sweep, become a room.
 *
 *  1. Every view is decoded (sharp), turned upright (EXIF), and cut to the first view's shape.
 *  2. Stitching: each view's yaw against the one before it by phase correlation on cylindrical
 *     projections (stitch.ts); the views are then ordered by yaw round the camera (a note says
 *     when that is not the order given; the panorama blend does not depend on the order).
 *  3. Panorama: every view projected onto a 2048×1024 equirectangular grid, feathered at its
 *     edges; what no view saw is generated from the mean seen colour of its row and blended.
 *  4. Geometry: a box room aligned with the first view (assumed to face a wall squarely), each
 *     wall's distance read on the panorama from its floor–wall line and the assumed camera height
 *     (see roomBox); a wall whose floor line no view showed is placed at the median of the others.
 *  5. Splats on the box's faces coloured from the panorama: a quick one (20k Gaussians, stage
 *     preview, metricScale null) and a full one (150k, stage space) with the PNG panorama and a GLB
 *     box collider. Units are camera heights (origin at the camera, y up, z back), so
 *     metricScale = the assumed camera height and the floor lies floorOffsetM below the origin.
 */
export function createRoomSpaceEngine(opts: RoomEngineOptions): SpaceEngine {
  return {
    name: ROOM_ENGINE_NAME,
    async build({ plan, photos }: SpaceEngineInput, ctx: SpaceEngineContext): Promise<SpaceResult> {
      const video = plan.source === 'video';
      await ctx.progress('decoding', video ? 'Reading the video frames' : 'Reading the photos');
      const { uprights, W0, notes, fovX, vw, vh, aw, ah, views } = await readViews(photos, video, opts, ctx);

      if (views.some((v) => v.cropped)) notes.push('Views of another shape than the first were cropped to its shape.');
      await ctx.progress('stitching', 'Placing the views round the camera');
      const yaws = estimateYaws(
        views.map((v) => ({ grey: v.grey, w: aw, h: ah })),
        fovX,
      );
      for (const [i, y] of yaws.yawDeg.entries()) views[i]!.yaw = (y * Math.PI) / 180;
      notes.push(...yaws.notes);
      if (views.length > 1) {
        const span = Math.max(...yaws.yawDeg) - Math.min(...yaws.yawDeg);
        notes.push(
          `Views stitched by phase correlation: turns of ${yaws.yawDeg.map((y) => `${Math.round(y)}°`).join(', ')} from the first view (${Math.round(span + fovX)}° of the room seen round the camera).`,
        );
        if (yaws.order.some((v, i) => v !== i))
          notes.push(
            `Round the camera the views run in the order ${yaws.order.map((i) => i + 1).join(', ')}, not the order given.`,
          );
      }

      await ctx.progress('panorama', 'Projecting the views into a 360 panorama and generating the rest');
      const { pixels: pano, cover, seenFraction } = paintPanorama(views, vw, vh, fovX, ctx.signal);
      notes.push(
        `The panorama shows the views where they were seen (${Math.round(seenFraction * 100)} % of the sphere); the rest is generated from the seen colours and blended at the seams.`,
      );

      await ctx.progress('measuring', 'Estimating the room');
      const { box, notes: geoNotes } = roomBox(pano, cover, opts.cameraHeightM);
      notes.push(...geoNotes);
      notes.push(
        `Camera height assumed ${opts.cameraHeightM} m above the floor, views assumed level; this sets the scale.`,
      );
      const colourAt = panoramaSampler(pano);

      await ctx.progress('quick', 'Building the quick walkable room');
      const quick = toCameraUnits(boxSplats(box, colourAt, QUICK_GAUSSIANS), opts.cameraHeightM);
      const spaceUrl = await ctx.store(encodeSpz(quick), 'application/octet-stream', 'space-quick.spz');
      const poster = await sharp(uprights[0])
        .resize({ width: Math.min(1024, W0) })
        .jpeg({ quality: 85 })
        .toBuffer();
      const posterUrl = await ctx.store(poster, 'image/jpeg', 'poster.jpg');
      notes.push(
        `The quick room is ${quick.count} Gaussians on the estimated box, in camera heights (x right, y up from the camera, z back; the first view looks down -z).`,
      );
      const preview: SpaceResult = {
        stage: 'preview',
        imagined: true,
        source: plan.source,
        photoCount: video ? 0 : photos.length,
        panoramaUrl: null,
        spaceUrl,
        spaceFullUrl: null,
        format: 'spz',
        metricScale: null,
        floorOffsetM: null,
        colliderUrl: null,
        depthUrl: null,
        posterUrl,
        gaussians: quick.count,
        dimensions: null,
        engine: ROOM_ENGINE_NAME,
        notes: [...notes],
      };
      if (plan.quality === 'preview')
        return {
          ...preview,
          notes: [
            ...notes,
            'Only the preview was requested (quality preview): the full room, its panorama and collider were not built.',
          ],
        };
      await ctx.publishPreview(preview);

      await ctx.progress('space', 'Building the full room, its panorama and collider');
      const c = opts.cameraHeightM;
      // SPEC 3.2: a full tier whose computation fails leaves the job complete at stage preview. Only
      // the computation is caught: storing (blob store, MongoDB) and an abort fail the attempt, so
      // the pool retries it rather than settling a paid full room at preview.
      let tier: { panoPng: Buffer; spz: Buffer; gaussians: number; glb: Buffer };
      try {
        const panoPng = await sharp(pano, {
          raw: { width: ROOM_PANORAMA_SIZE.width, height: ROOM_PANORAMA_SIZE.height, channels: 3 },
        })
          .png({ compressionLevel: 6 })
          .toBuffer();
        const full = toCameraUnits(boxSplats(box, colourAt, FULL_GAUSSIANS), c);
        const glb = await boxColliderGlb({
          min: [box.left / c, -1, -box.far / c],
          max: [box.right / c, (box.ceiling - c) / c, -box.back / c],
        });
        tier = { panoPng, spz: encodeSpz(full), gaussians: full.count, glb };
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        ctx.log.warn('the full room could not be built; completing at stage preview', { err: err as Error });
        return {
          ...preview,
          notes: [...preview.notes, 'The full room could not be built; the quick room is the result.'],
        };
      }
      const panoramaUrl = await ctx.store(tier.panoPng, 'image/png', 'panorama.png');
      const spaceFullUrl = await ctx.store(tier.spz, 'application/octet-stream', 'space-full.spz');
      const colliderUrl = await ctx.store(tier.glb, 'model/gltf-binary', 'collider.glb');
      notes.push(
        `The full room is ${tier.gaussians} Gaussians; multiply coordinates by metricScale (${c}, the assumed camera height) for metres; the floor is ${c} m below the origin. The collider is the same box (floor, ceiling, four walls) as a GLB mesh.`,
      );
      return {
        ...preview,
        stage: 'space',
        panoramaUrl,
        spaceFullUrl,
        metricScale: c,
        floorOffsetM: c,
        colliderUrl,
        gaussians: tier.gaussians,
        notes,
      };
    },
  };
}

/**
 * The photos or video frames upright and checked, the field of view (the first photo's EXIF, or
 * the default), and each view at the working and analysis sizes of the first one.
 */
async function readViews(photos: Buffer[], video: boolean, opts: RoomEngineOptions, ctx: SpaceEngineContext) {
  const field = (i: number) => (video ? 'videoUrl' : `imageUrls[${i}]`);
  const uprights: Buffer[] = [];
  for (const [i, buf] of photos.entries()) {
    let format: string | undefined;
    try {
      format = (await sharp(buf).metadata()).format;
    } catch {
      throw new UnrecoverableError(`${field(i)}: the file is not a readable image (JPEG, PNG or WebP)`);
    }
    if (!format || !FORMATS.has(format))
      throw new UnrecoverableError(`${field(i)}: ${format ?? 'unknown'} images are not supported (JPEG, PNG or WebP)`);
    uprights.push(await sharp(buf).rotate().toBuffer());
  }
  const first = await sharp(uprights[0]).metadata();
  const W0 = first.width!,
    H0 = first.height!;
  const notes: string[] = [
    video ? `Built from ${photos.length} frames sampled evenly from the video.` : `Built from ${photos.length} photos.`,
  ];

  let fovX = opts.defaultFovDeg;
  let fovFromExif = false;
  if (!video) {
    try {
      const f35 = Number((await exifr.parse(photos[0]!, ['FocalLengthIn35mmFormat']))?.FocalLengthIn35mmFormat);
      if (f35 > 0) {
        fovX = fovFromFocal35(f35, W0, H0);
        fovFromExif = true;
      }
    } catch {
      // unreadable EXIF is the same as none
    }
  }
  notes.push(
    fovFromExif
      ? `Field of view ${fovX.toFixed(1)}° from the first photo's EXIF.`
      : `No focal length known: a ${opts.defaultFovDeg}° horizontal field of view was assumed.`,
  );

  const vw = Math.min(VIEW_WIDTH, W0),
    vh = Math.round((vw * H0) / W0);
  const aw = Math.min(ANALYSIS_WIDTH, vw),
    ah = Math.round((aw * H0) / W0);
  const views: View[] = [];
  for (const up of uprights) {
    const rgb = await sharp(up).resize(vw, vh, { fit: 'cover' }).removeAlpha().toColourspace('srgb').raw().toBuffer();
    const grey = await sharp(up).resize(aw, ah, { fit: 'cover' }).greyscale().raw().toBuffer();
    const m = await sharp(up).metadata();
    views.push({
      rgb,
      grey: Float32Array.from(grey.subarray(0, aw * ah)),
      yaw: 0,
      cropped: Math.abs(m.width! * H0 - m.height! * W0) > Math.max(W0, H0),
    });
    if (ctx.signal.aborted) throw ctx.signal.reason;
  }
  return { uprights, W0, notes, fovX, vw, vh, aw, ah, views };
}

/** Splats built in metres (y from the floor) moved to camera units: origin at the camera, 1 = camera height. */
function toCameraUnits(s: Splats, cameraHeight: number): Splats {
  const k = 1 / cameraHeight,
    dl = Math.log(k);
  for (let i = 0; i < s.count; i++) {
    s.positions[i * 3] = s.positions[i * 3]! * k;
    s.positions[i * 3 + 1] = (s.positions[i * 3 + 1]! - cameraHeight) * k;
    s.positions[i * 3 + 2] = s.positions[i * 3 + 2]! * k;
  }
  for (let i = 0; i < s.logScales.length; i++) s.logScales[i] = s.logScales[i]! + dl;
  return s;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * The box room (metres, first view's frame) read from the stitched panorama. A wall facing axis
 * direction α at distance D meets the floor where tan(−latitude) = h · cos(lon − α) / D, so in
 * every well-covered column within 20° of α the floor–wall line gives D. The line is the lowest
 * horizontal edge below the horizon at least half as strong as the strongest in that column
 * (skirting, pictures and doors sit above it); the wall takes the median over its columns. The
 * ceiling likewise: the highest strong edge above the horizon, C = h + D · tan(latitude) / cos.
 */
function roomBox(pano: Buffer, cover: Float32Array, cameraHeight: number): { box: RoomBox; notes: string[] } {
  const { width: PW, height: PH } = ROOM_PANORAMA_SIZE;
  const grey = (x: number, y: number) => {
    const i = (y * PW + x) * 3;
    return 0.299 * pano[i]! + 0.587 * pano[i + 1]! + 0.114 * pano[i + 2]!;
  };
  const latOf = (y: number) => Math.PI / 2 - ((y + 1) / PH) * Math.PI; // the edge between rows y and y + 1
  const rowAt = (latDeg: number) => Math.round(((90 - latDeg) / 180) * PH);
  const horizonBelow = rowAt(-2),
    floorLimit = rowAt(-75),
    horizonAbove = rowAt(2),
    ceilingLimit = rowAt(75);
  /** Row of the chosen edge between rows [from, to) of column x (the last strong one in scan order). */
  const edge = (x: number, from: number, to: number, step: 1 | -1): number | null => {
    let max = 0;
    const g: number[] = [];
    for (let y = from; y !== to; y += step) {
      const ok = cover[y * PW + x]! >= 0.999 && cover[(y + 1) * PW + x]! >= 0.999;
      const d = ok ? Math.abs(grey(x, y + 1) - grey(x, y)) : 0;
      g.push(d);
      max = Math.max(max, d);
    }
    if (max < 12) return null;
    let last: number | null = null;
    g.forEach((d, i) => {
      if (d >= max / 2) last = from + i * step;
    });
    return last;
  };
  const walls: (number | null)[] = [];
  const ceilings: number[] = [];
  const window = Math.round((20 / 360) * PW);
  for (let k = 0; k < 4; k++) {
    const centre = Math.round(((k * 90 + 180) / 360) * PW) % PW;
    const ds: number[] = [];
    const cols: [number, number][] = [];
    for (let dx = -window; dx <= window; dx++) {
      const x = (centre + dx + PW) % PW;
      const c = Math.cos((dx / PW) * 2 * Math.PI);
      const y = edge(x, horizonBelow, floorLimit, 1);
      if (y === null) continue;
      ds.push((cameraHeight * c) / Math.tan(-latOf(y)));
      cols.push([x, c]);
    }
    const d = ds.length >= window / 2 ? median(ds) : null;
    walls.push(d);
    if (d === null) continue;
    for (const [x, c] of cols) {
      const y = edge(x, horizonAbove, ceilingLimit, -1);
      if (y !== null) ceilings.push(cameraHeight + (d * Math.tan(latOf(y))) / c);
    }
  }
  const notes: string[] = [
    'The room is modelled as a box aligned with the first view, which is assumed to face a wall squarely.',
  ];
  const measured = walls.filter((d): d is number => d !== null);
  const fallback = measured.length ? median(measured) : 3;
  const names = ['ahead', 'right', 'behind', 'left'];
  const dist = walls.map((d) => d ?? fallback);
  const seen = walls.map((d, i) => (d !== null ? `${names[i]} ${d.toFixed(1)} m` : null)).filter(Boolean);
  const unseen = walls.map((d, i) => (d === null ? names[i] : null)).filter(Boolean);
  if (seen.length)
    notes.push(
      `Walls measured on the stitched panorama from the floor–wall line and the assumed camera height: ${seen.join(', ')}.`,
    );
  if (unseen.length)
    notes.push(
      `The views did not show the floor line of the wall${unseen.length > 1 ? 's' : ''} ${unseen.join(', ')}: placed at ${fallback.toFixed(1)} m (${measured.length ? 'the median of the measured walls' : 'an assumed distance'}), generated, not measured.`,
    );
  let ceiling: number;
  if (ceilings.length >= 5) {
    ceiling = median(ceilings);
    notes.push(`Ceiling measured on the panorama from the wall–ceiling line: ${ceiling.toFixed(1)} m above the floor.`);
  } else {
    ceiling = cameraHeight + 1;
    notes.push(
      `The views did not show the wall–ceiling line: the ceiling was placed ${ceiling.toFixed(1)} m up (1 m above the camera), generated.`,
    );
  }
  return { box: { far: dist[0]!, right: dist[1]!, back: -dist[2]!, left: -dist[3]!, ceiling, cameraHeight }, notes };
}

/**
 * Every view on the equirectangular grid (longitude 0 = the first view's direction, positive to
 * the right), feathered at its borders; unseen pixels take the mean seen colour of their row
 * (rows nobody saw take the nearest seen row's), blended by coverage.
 */
function paintPanorama(
  views: View[],
  vw: number,
  vh: number,
  fovX: number,
  signal: AbortSignal,
): { pixels: Buffer; cover: Float32Array; seenFraction: number } {
  const { width: PW, height: PH } = ROOM_PANORAMA_SIZE;
  const f = vw / 2 / Math.tan((fovX * Math.PI) / 360);
  const cx = vw / 2,
    cy = vh / 2;
  const acc = new Float32Array(PW * PH * 3);
  const wsum = new Float32Array(PW * PH);
  const sinLon = new Float64Array(PW),
    cosLon = new Float64Array(PW);
  for (let x = 0; x < PW; x++) {
    const lon = ((x + 0.5) / PW) * 2 * Math.PI - Math.PI;
    sinLon[x] = Math.sin(lon);
    cosLon[x] = Math.cos(lon);
  }
  for (const v of views) {
    const sy = Math.sin(v.yaw),
      cyw = Math.cos(v.yaw);
    for (let y = 0; y < PH; y++) {
      const lat = Math.PI / 2 - ((y + 0.5) / PH) * Math.PI;
      const cl = Math.cos(lat),
        sl = Math.sin(lat);
      for (let x = 0; x < PW; x++) {
        // Direction in the view's frame: longitude minus the view's yaw.
        const dz = cl * (cosLon[x]! * cyw + sinLon[x]! * sy);
        if (dz <= 1e-6) continue;
        const dx = cl * (sinLon[x]! * cyw - cosLon[x]! * sy);
        const u = cx + (f * dx) / dz,
          vv = cy - (f * sl) / dz;
        const inside = Math.min(u, vw - 1 - u, vv, vh - 1 - vv);
        if (inside < 0) continue;
        const wgt = Math.min(1, (inside + 1) / FEATHER_PX);
        const i = (Math.round(vv) * vw + Math.round(u)) * 3,
          o = y * PW + x;
        acc[o * 3] = acc[o * 3]! + v.rgb[i]! * wgt;
        acc[o * 3 + 1] = acc[o * 3 + 1]! + v.rgb[i + 1]! * wgt;
        acc[o * 3 + 2] = acc[o * 3 + 2]! + v.rgb[i + 2]! * wgt;
        wsum[o] = wsum[o]! + wgt;
      }
      if ((y & 127) === 0 && signal.aborted) throw signal.reason;
    }
  }
  const rowMean: ([number, number, number] | null)[] = [];
  let seen = 0;
  for (let y = 0; y < PH; y++) {
    let r = 0,
      g = 0,
      b = 0,
      n = 0;
    for (let x = 0; x < PW; x++) {
      const o = y * PW + x,
        w = wsum[o]!;
      if (w <= 0) continue;
      seen++;
      r += acc[o * 3]! / w;
      g += acc[o * 3 + 1]! / w;
      b += acc[o * 3 + 2]! / w;
      n++;
    }
    rowMean.push(n ? [r / n, g / n, b / n] : null);
  }
  const firstSeen = rowMean.findIndex(Boolean);
  for (let y = 0; y < PH; y++)
    if (!rowMean[y])
      rowMean[y] =
        y < firstSeen || firstSeen < 0 ? (rowMean[Math.max(0, firstSeen)] ?? [128, 128, 128]) : rowMean[y - 1]!;
  const out = Buffer.alloc(PW * PH * 3);
  for (let y = 0; y < PH; y++) {
    const m = rowMean[y]!;
    for (let x = 0; x < PW; x++) {
      const o = y * PW + x,
        w = wsum[o]!,
        cover = Math.min(1, w);
      for (let c = 0; c < 3; c++)
        out[o * 3 + c] = Math.round((w > 0 ? (acc[o * 3 + c]! / w) * cover : 0) + m[c]! * (1 - cover));
    }
  }
  return { pixels: out, cover: wsum, seenFraction: seen / (PW * PH) };
}

/** Colour of the panorama along a unit direction (z forward = longitude 0, y up). */
function panoramaSampler(pano: Buffer) {
  const { width: PW, height: PH } = ROOM_PANORAMA_SIZE;
  return (dx: number, dy: number, dz: number, out: Float32Array, o: number) => {
    const lon = Math.atan2(dx, dz),
      lat = Math.asin(Math.max(-1, Math.min(1, dy)));
    const x = Math.min(PW - 1, Math.max(0, Math.floor(((lon + Math.PI) / (2 * Math.PI)) * PW)));
    const y = Math.min(PH - 1, Math.max(0, Math.floor(((Math.PI / 2 - lat) / Math.PI) * PH)));
    const i = (y * PW + x) * 3;
    out[o] = pano[i]!;
    out[o + 1] = pano[i + 1]!;
    out[o + 2] = pano[i + 2]!;
  };
}
