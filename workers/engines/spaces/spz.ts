import { gzipSync } from 'node:zlib';

/**
 * SPZ version 3 writer (the open format of nianticlabs/spz). The file is the gzip of:
 *
 *   header, 16 bytes, little-endian:
 *     u32 magic 0x5053474e ("NGSP"), u32 version 3, u32 numPoints,
 *     u8 shDegree (0 here: colour only), u8 fractionalBits, u8 flags (0), u8 reserved (0)
 *   then planar arrays, each covering every point before the next begins:
 *     positions  numPoints × 3 × 3 bytes: x, y, z as 24-bit signed two's-complement fixed point,
 *                little-endian, value = int / 2^fractionalBits (metres here)
 *     alphas     numPoints × 1 byte: sigmoid(opacity) × 255
 *     colours    numPoints × 3 bytes: r, g, b as the SH DC term, byte = (dc × 0.15 + 0.5) × 255,
 *                where colour = 0.5 + 0.282095 × dc
 *     scales     numPoints × 3 bytes: per-axis log(σ), byte = (log σ + 10) × 16
 *     rotations  numPoints × 4 bytes (v3 "smallest three"): a u32, little-endian; bits 30-31 the
 *                index of the largest |component| of the unit quaternion (x, y, z, w), then for the
 *                three others in order, 10 bits each (first in the highest): a sign bit (set when
 *                the component's sign differs from the largest's) and 9 bits of |c| / √½ × 511
 *     (no spherical-harmonic bytes at shDegree 0)
 *
 * Coordinates follow the SPZ convention RUB: x right, y up, z back (the camera looks down -z).
 */
export const SPZ_MAGIC = 0x5053474e;
export const SPZ_VERSION = 3;
export const SPZ_FRACTIONAL_BITS = 12;
const SH_C0 = 0.28209479177387814;
const COLOUR_SCALE = 0.15;

export interface Splats {
  count: number;
  /** xyz per point, metres, RUB. */
  positions: Float32Array;
  /** log σ per axis. */
  logScales: Float32Array;
  /** Unit quaternions, x y z w. */
  rotations: Float32Array;
  /** 0..1 linear-ish display colour per channel. */
  colours: Float32Array;
  /** 0..1 opacity after the sigmoid. */
  alphas: Float32Array;
}

const u8 = (v: number) => Math.max(0, Math.min(255, Math.round(v)));

/** The uncompressed SPZ payload (header + planar arrays), before gzip. */
export function packSpz(s: Splats): Buffer {
  const n = s.count;
  const out = Buffer.alloc(16 + n * (9 + 1 + 3 + 3 + 4));
  out.writeUInt32LE(SPZ_MAGIC, 0);
  out.writeUInt32LE(SPZ_VERSION, 4);
  out.writeUInt32LE(n, 8);
  out.writeUInt8(0, 12);
  out.writeUInt8(SPZ_FRACTIONAL_BITS, 13);
  out.writeUInt8(0, 14);
  out.writeUInt8(0, 15);
  let o = 16;
  const scale = 1 << SPZ_FRACTIONAL_BITS;
  const lim = (1 << 23) - 1;
  for (let i = 0; i < n * 3; i++) {
    const fixed = Math.max(-lim - 1, Math.min(lim, Math.round(s.positions[i]! * scale)));
    out[o++] = fixed & 0xff;
    out[o++] = (fixed >> 8) & 0xff;
    out[o++] = (fixed >> 16) & 0xff;
  }
  for (let i = 0; i < n; i++) out[o++] = u8(s.alphas[i]! * 255);
  for (let i = 0; i < n * 3; i++) {
    const dc = (s.colours[i]! - 0.5) / SH_C0;
    out[o++] = u8((dc * COLOUR_SCALE + 0.5) * 255);
  }
  for (let i = 0; i < n * 3; i++) out[o++] = u8((s.logScales[i]! + 10) * 16);
  for (let i = 0; i < n; i++) {
    out.writeUInt32LE(smallestThree(s.rotations, i * 4), o);
    o += 4;
  }
  return out;
}

/** gzip(packSpz): the .spz file. */
export function encodeSpz(s: Splats): Buffer {
  return gzipSync(packSpz(s), { level: 6 });
}

function smallestThree(q: Float32Array, at: number): number {
  const len = Math.hypot(q[at]!, q[at + 1]!, q[at + 2]!, q[at + 3]!) || 1;
  let largest = 0;
  for (let i = 1; i < 4; i++) if (Math.abs(q[at + i]!) > Math.abs(q[at + largest]!)) largest = i;
  const negate = q[at + largest]! < 0;
  let comp = largest;
  for (let i = 0; i < 4; i++) {
    if (i === largest) continue;
    const c = q[at + i]! / len;
    const neg = c < 0 !== negate ? 1 : 0;
    const mag = Math.min(511, Math.floor(511 * (Math.abs(c) / Math.SQRT1_2) + 0.5));
    comp = ((comp << 10) | (neg << 9) | mag) >>> 0;
  }
  return comp >>> 0;
}
