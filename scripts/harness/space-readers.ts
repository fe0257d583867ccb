import { gunzipSync, inflateSync } from 'node:zlib';
import sharp from 'sharp';
import type { PoolDefinition } from '../../workers/pool/pool';

/**
 * Independent readers written from the published formats (not from the service's writers).
 */

/** SPZ v2/v3 (nianticlabs/spz): gzip(16-byte header + planar arrays). */
export function readSpz(file: Buffer) {
  const b = gunzipSync(file);
  const magic = b.readUInt32LE(0),
    version = b.readUInt32LE(4),
    numPoints = b.readUInt32LE(8);
  const shDegree = b[12]!,
    fractionalBits = b[13]!,
    flags = b[14]!,
    reserved = b[15]!;
  const shDim = [0, 3, 8, 15][shDegree]!;
  const rotBytes = version >= 3 ? 4 : 3;
  const expected = 16 + numPoints * (9 + 1 + 3 + 3 + rotBytes + shDim * 3);
  const positions: [number, number, number][] = [];
  let o = 16;
  for (let i = 0; i < numPoints; i++) {
    const p: number[] = [];
    for (let a = 0; a < 3; a++) {
      let v = b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16);
      if (v & 0x800000) v -= 0x1000000;
      p.push(v / (1 << fractionalBits));
      o += 3;
    }
    positions.push(p as [number, number, number]);
  }
  const alphas = b.subarray(o, o + numPoints);
  o += numPoints;
  const colours = b.subarray(o, o + numPoints * 3);
  o += numPoints * 3;
  const scales = b.subarray(o, o + numPoints * 3);
  o += numPoints * 3;
  const rotations: number[][] = [];
  for (let i = 0; i < numPoints; i++, o += 4) {
    // smallest three: top 2 bits = index of the largest; three 10-bit (sign + 9-bit magnitude) fields.
    const comp = b.readUInt32LE(o);
    const largest = comp >>> 30;
    const q = [0, 0, 0, 0];
    let rest = comp;
    let sumSq = 0;
    for (let k = 3; k >= 0; k--) {
      if (k === largest) continue;
      const mag = rest & 511,
        neg = (rest >>> 9) & 1;
      rest >>>= 10;
      q[k] = (neg ? -1 : 1) * Math.SQRT1_2 * (mag / 511);
      sumSq += q[k]! ** 2;
    }
    q[largest] = Math.sqrt(Math.max(0, 1 - sumSq));
    rotations.push(q);
  }
  return {
    magic,
    version,
    numPoints,
    shDegree,
    fractionalBits,
    flags,
    reserved,
    byteLength: b.length,
    expected,
    positions,
    alphas,
    colours,
    scales,
    rotations,
  };
}

/** A greyscale PNG read chunk by chunk: IHDR facts and the samples (8 or 16 bit, all filters). */
export function readGreyPng(png: Buffer) {
  let o = 8;
  let width = 0,
    height = 0,
    bitDepth = 0,
    colourType = -1;
  const idat: Buffer[] = [];
  while (o < png.length) {
    const len = png.readUInt32BE(o),
      type = png.toString('ascii', o + 4, o + 8);
    const data = png.subarray(o + 8, o + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      bitDepth = data[8]!;
      colourType = data[9]!;
    } else if (type === 'IDAT') idat.push(data);
    o += 12 + len;
  }
  const bpp = bitDepth / 8;
  const stride = width * bpp;
  const raw = inflateSync(Buffer.concat(idat));
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const ft = raw[y * (stride + 1)]!;
    for (let x = 0; x < stride; x++) {
      const cur = raw[y * (stride + 1) + 1 + x]!;
      const a = x >= bpp ? out[y * stride + x - bpp]! : 0;
      const up = y > 0 ? out[(y - 1) * stride + x]! : 0;
      const c = x >= bpp && y > 0 ? out[(y - 1) * stride + x - bpp]! : 0;
      let v = cur;
      if (ft === 1) v += a;
      else if (ft === 2) v += up;
      else if (ft === 3) v += (a + up) >> 1;
      else if (ft === 4) {
        const p = a + up - c,
          pa = Math.abs(p - a),
          pb = Math.abs(p - up),
          pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? up : c;
      }
      out[y * stride + x] = v & 0xff;
    }
  }
  const sample = (x: number, y: number) =>
    bitDepth === 16 ? out.readUInt16BE(y * stride + x * 2) : out[y * stride + x]!;
  return { width, height, bitDepth, colourType, sample };
}

/**
 * A photo of a box room rendered by ray casting: pinhole camera `fovX` wide, level, `cam` m above
 * the floor; walls at x = ±halfWidth, far wall at z = far, ceiling at `ceiling`. Flat colours per
 * surface, so the lines are exact.
 */
export async function renderRoom(o: {
  width: number;
  height: number;
  fovX: number;
  cam: number;
  halfWidth: number;
  far: number;
  ceiling: number;
  format?: 'png' | 'jpeg';
}) {
  const { width: W, height: H } = o;
  const f = W / 2 / Math.tan((o.fovX * Math.PI) / 360);
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const dx = (x + 0.5 - W / 2) / f,
        dy = -(y + 0.5 - H / 2) / f,
        dz = 1;
      const tz = o.far / dz;
      const tx = dx > 0 ? o.halfWidth / dx : dx < 0 ? -o.halfWidth / dx : Infinity;
      const ty = dy > 0 ? (o.ceiling - o.cam) / dy : dy < 0 ? -o.cam / dy : Infinity;
      const t = Math.min(tz, tx, ty);
      const c = t === ty ? (dy < 0 ? [90, 60, 40] : [240, 240, 235]) : t === tz ? [205, 195, 175] : [160, 150, 130];
      px.set(c, (y * W + x) * 3);
    }
  const img = sharp(px, { raw: { width: W, height: H, channels: 3 } });
  return o.format === 'jpeg' ? img.jpeg({ quality: 92 }).toBuffer() : img.png().toBuffer();
}

/** A square room around the camera, its walls hung with flat rectangles (texture to stitch on). */
export interface TexturedRoom {
  /** Walls at x = ±half and z = ±half (metres), camera at the centre. */
  half: number;
  ceiling: number;
  cam: number;
}

function posters(wall: number) {
  let seed = 1234567 + wall * 7919;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  return Array.from({ length: 14 }, () => {
    const u = -2.2 + 4.4 * rnd(),
      w = 0.15 + 0.6 * rnd(),
      y = 0.7 + 1.1 * rnd(),
      hgt = 0.15 + 0.45 * rnd();
    return {
      u0: u,
      u1: u + w,
      y0: y,
      y1: Math.min(2.3, y + hgt),
      c: [Math.floor(40 + 200 * rnd()), Math.floor(40 + 200 * rnd()), Math.floor(40 + 200 * rnd())],
    };
  });
}

/**
 * A level photo of the textured room from its centre, turned `yawDeg` to the right of +z (yaw 0
 * faces the wall at z = +half). Pinhole camera `fovX` wide. Flat colours, hard edges.
 */
export function renderRoomView(o: {
  width: number;
  height: number;
  fovX: number;
  yawDeg: number;
  room: TexturedRoom;
}): Buffer {
  const { width: W, height: H, room } = o;
  const f = W / 2 / Math.tan((o.fovX * Math.PI) / 360);
  const th = (o.yawDeg * Math.PI) / 180;
  const walls = [0, 1, 2, 3].map(posters);
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const cx = (x + 0.5 - W / 2) / f,
        dy = -(y + 0.5 - H / 2) / f;
      const dx = cx * Math.cos(th) + Math.sin(th),
        dz = -cx * Math.sin(th) + Math.cos(th);
      const tx = dx !== 0 ? room.half / Math.abs(dx) : Infinity;
      const tz = dz !== 0 ? room.half / Math.abs(dz) : Infinity;
      const ty = dy > 0 ? (room.ceiling - room.cam) / dy : dy < 0 ? room.cam / -dy : Infinity;
      const t = Math.min(tx, ty, tz);
      let c: number[];
      if (t === ty) c = dy < 0 ? [90, 60, 40] : [240, 240, 235];
      else {
        // wall 0: +z, 1: +x, 2: −z, 3: −x; u runs left to right as seen from the centre.
        const wx = dx * t,
          wz = dz * t,
          hy = room.cam + dy * t;
        const wall = t === tz ? (dz > 0 ? 0 : 2) : dx > 0 ? 1 : 3;
        const u = wall === 0 ? wx : wall === 1 ? -wz : wall === 2 ? -wx : wz;
        c = [
          [205, 195, 175],
          [185, 200, 190],
          [200, 185, 195],
          [190, 190, 205],
        ][wall]!;
        for (const p of walls[wall]!) if (u >= p.u0 && u < p.u1 && hy >= p.y0 && hy < p.y1) c = p.c;
      }
      px.set(c, (y * W + x) * 3);
    }
  return px;
}

/** renderRoomView as an encoded image. */
export const renderRoomViewImage = (o: Parameters<typeof renderRoomView>[0] & { format?: 'png' | 'jpeg' }) => {
  const img = sharp(renderRoomView(o), { raw: { width: o.width, height: o.height, channels: 3 } });
  return o.format === 'jpeg' ? img.jpeg({ quality: 90 }).toBuffer() : img.png().toBuffer();
};

/**
 * A space pool that waits for `opened` after publishing a stage-preview result of a job titled
 * "hold", so a test's poll sees the preview on a processing job without racing the final tier.
 */
export function holdAfterPreview<I extends { title: string | null }, O extends Record<string, unknown>>(
  def: PoolDefinition<I, O>,
  opened: () => Promise<void>,
): PoolDefinition<I, O> {
  return {
    ...def,
    process: (plan, ctx) =>
      def.process(plan, {
        ...ctx,
        progress: async (raw, message, partial) => {
          await ctx.progress(raw, message, partial);
          if (partial && plan.title === 'hold') await opened();
        },
      }),
  };
}
