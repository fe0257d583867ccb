import { crc32 } from 'node:zlib';
import sharp from 'sharp';

/** Raw 8-bit pixels, row-major, `channels` bytes per pixel. */
export interface RawImage {
  width: number;
  height: number;
  channels: 3 | 4;
  data: Buffer;
}

/** A decoded file: its pixels, its format and (PNG only) its tEXt chunks. */
export interface DecodedImage extends RawImage {
  format: string;
  text: Record<string, string>;
}

const rawInput = (img: RawImage) => {
  if (img.data.length !== img.width * img.height * img.channels) throw new Error(`expected ${img.width * img.height * img.channels} bytes, got ${img.data.length}`);
  return sharp(img.data, { raw: { width: img.width, height: img.height, channels: img.channels } });
};

/**
 * PNG through sharp (libvips + libspng). sharp has no API to write tEXt chunks, so the few we
 * stamp (Software, Seed, ...) are inserted after IHDR by hand: a chunk is length, type, data and
 * a CRC-32 (PNG spec 5.3), which is all this does. Deterministic: same pixels, same bytes.
 */
export async function encodePng(img: RawImage, opts: { text?: Record<string, string>; compressionLevel?: number } = {}): Promise<Buffer> {
  const png = await rawInput(img).png({ compressionLevel: opts.compressionLevel ?? 6, adaptiveFiltering: false }).toBuffer();
  return withText(png, opts.text);
}

/**
 * Rasterise an SVG document (librsvg inside sharp: anti-aliased shapes, text shaped by pango with
 * fontconfig's fonts) to PNG at 1 px per SVG unit. Slides are drawn this way. Deterministic.
 */
export async function renderSvgPng(svg: string, opts: { text?: Record<string, string>; compressionLevel?: number } = {}): Promise<Buffer> {
  const png = await sharp(Buffer.from(svg), { density: 72, failOn: 'error' }).png({ compressionLevel: opts.compressionLevel ?? 6, adaptiveFiltering: false }).toBuffer();
  return withText(png, opts.text);
}

function withText(png: Buffer, text: Record<string, string> = {}): Buffer {
  const entries = Object.entries(text);
  if (!entries.length) return png;
  const ihdrEnd = 8 + 8 + 13 + 4; // signature, IHDR length+type, IHDR data, CRC
  return Buffer.concat([png.subarray(0, ihdrEnd), ...entries.map(([k, v]) => textChunk(k, v)), png.subarray(ihdrEnd)]);
}

function textChunk(keyword: string, text: string): Buffer {
  const data = Buffer.from(`${keyword}\0${text}`, 'latin1');
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write('tEXt', 4, 'ascii');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)) >>> 0, 8 + data.length);
  return out;
}

/** Baseline JPEG through sharp (mozjpeg off: plain libjpeg-turbo, deterministic). */
export function encodeJpeg(img: RawImage, quality = 88): Promise<Buffer> {
  return rawInput(img).jpeg({ quality }).toBuffer();
}

/**
 * Decode PNG, JPEG, WebP (anything sharp reads) to raw pixels with `channels` channels (default:
 * the file's own, alpha kept when present). Throws on bytes that are not an image.
 */
export async function decodeImage(bytes: Buffer, opts: { channels?: 3 | 4 } = {}): Promise<DecodedImage> {
  const img = sharp(bytes, { failOn: 'error' });
  const meta = await img.metadata();
  const wantAlpha = opts.channels ? opts.channels === 4 : Boolean(meta.hasAlpha);
  const { data, info } = await (wantAlpha ? img.ensureAlpha() : img.removeAlpha()).raw().toBuffer({ resolveWithObject: true });
  const text = Object.fromEntries((meta.comments ?? []).map((c) => [c.keyword, c.text]));
  return { width: info.width, height: info.height, channels: info.channels as 3 | 4, data, format: meta.format ?? 'unknown', text };
}
