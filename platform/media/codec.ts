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
  if (img.data.length !== img.width * img.height * img.channels)
    throw new Error(`expected ${img.width * img.height * img.channels} bytes, got ${img.data.length}`);
  return sharp(img.data, { raw: { width: img.width, height: img.height, channels: img.channels } });
};

/**
 * PNG through sharp (libvips + libspng). sharp has no API to write tEXt chunks, so the few we
 * stamp (Software, Seed, ...) are inserted after IHDR by hand: a chunk is length, type, data and
 * a CRC-32 (PNG spec 5.3), which is all this does. Deterministic: same pixels, same bytes.
 */
export async function encodePng(
  img: RawImage,
  opts: { text?: Record<string, string>; compressionLevel?: number } = {},
): Promise<Buffer> {
  const png = await rawInput(img)
    .png({ compressionLevel: opts.compressionLevel ?? 6, adaptiveFiltering: false })
    .toBuffer();
  return withText(png, opts.text);
}

/**
 * Rasterise an SVG document (librsvg inside sharp: anti-aliased shapes, text shaped by pango with
 * fontconfig's fonts) to PNG at 1 px per SVG unit. Slides are drawn this way. Deterministic.
 */
export async function renderSvgPng(
  svg: string,
  opts: { text?: Record<string, string>; compressionLevel?: number } = {},
): Promise<Buffer> {
  const png = await sharp(Buffer.from(svg), { density: 72, failOn: 'error' })
    .png({ compressionLevel: opts.compressionLevel ?? 6, adaptiveFiltering: false })
    .toBuffer();
  return withText(png, opts.text);
}

function withText(png: Buffer, text: Record<string, string> = {}): Buffer {
  const entries = Object.entries(text);
  if (!entries.length) return png;
  const ihdrEnd = 8 + 8 + 13 + 4; // signature, IHDR length+type, IHDR data, CRC
  return Buffer.concat([png.subarray(0, ihdrEnd), ...entries.map(([k, v]) => textChunk(k, v)), png.subarray(ihdrEnd)]);
}

/**
 * Printable Latin-1 (PNG spec 11.3.4.3): 0x20-0x7E and 0xA1-0xFF; text may also hold a
 * no-break space (0xA0) and newlines. NFC first, so "e" + combining accent is one "é".
 */
const latin1 = (s: string, part: 'keyword' | 'text') =>
  Array.from(s.normalize('NFC'), (ch) => {
    const c = ch.codePointAt(0)!;
    return (c >= 0x20 && c <= 0x7e) || (c >= 0xa1 && c <= 0xff) || (part === 'text' && (c === 0xa0 || c === 0x0a))
      ? ch
      : '?';
  }).join('');

/**
 * A tEXt chunk, sanitised so callers may pass any string (a slide title, a prompt): the keyword
 * becomes 1-79 printable Latin-1 characters without leading, trailing or doubled spaces, the text
 * printable Latin-1 and newlines (no NUL, which would end it); any other character reads '?'.
 * Node's 'latin1' encoding alone would keep only the low byte of each character.
 */
function textChunk(keyword: string, text: string): Buffer {
  const key = latin1(keyword, 'keyword').replace(/ {2,}/g, ' ').trim().slice(0, 79).trimEnd();
  if (!key) throw new Error('a PNG text keyword needs at least one printable Latin-1 character');
  const data = Buffer.from(`${key}\0${latin1(text, 'text')}`, 'latin1');
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write('tEXt', 4, 'ascii');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)) >>> 0, 8 + data.length);
  return out;
}

/**
 * Decode PNG, JPEG, WebP (anything sharp reads) to raw pixels with `channels` channels (default:
 * the file's own, alpha kept when present). Throws on bytes that are not an image.
 */
export async function decodeImage(bytes: Buffer, opts: { channels?: 3 | 4 } = {}): Promise<DecodedImage> {
  const img = sharp(bytes, { failOn: 'error' });
  const meta = await img.metadata();
  const wantAlpha = opts.channels ? opts.channels === 4 : Boolean(meta.hasAlpha);
  const { data, info } = await (wantAlpha ? img.ensureAlpha() : img.removeAlpha())
    .raw()
    .toBuffer({ resolveWithObject: true });
  const text = {
    ...Object.fromEntries((meta.comments ?? []).map((c) => [c.keyword, c.text])),
    ...(meta.format === 'png' ? pngText(bytes) : {}),
  };
  return {
    width: info.width,
    height: info.height,
    channels: info.channels as 3 | 4,
    data,
    format: meta.format ?? 'unknown',
    text,
  };
}

/**
 * A PNG's tEXt chunks read as the Latin-1 they are (PNG spec 11.3.4.3). sharp reports them as
 * UTF-8, which turns "café" into "caf\ufffd", so the few chunks are walked here: length, type,
 * data, CRC (spec 5.3). The image itself was already decoded, and checked, by sharp.
 */
function pngText(png: Buffer): Record<string, string> {
  const text: Record<string, string> = {};
  for (let at = 8; at + 12 <= png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IEND' || at + 12 + length > png.length) break;
    if (type === 'tEXt') {
      const data = png.subarray(at + 8, at + 8 + length);
      const nul = data.indexOf(0);
      if (nul > 0) text[data.toString('latin1', 0, nul)] = data.toString('latin1', nul + 1);
    }
    at += 12 + length;
  }
  return text;
}
