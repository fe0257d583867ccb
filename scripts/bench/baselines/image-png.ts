// BASELINE ONLY (issue 15 bench): the hand-written PNG encoder the old renderers used, copied
// from git (platform/media/png.ts at HEAD, encoder only). Not used by the service.
import { crc32, deflateSync } from 'node:zlib';

/**
 * Minimal, dependency-free PNG codec for 8-bit RGB/RGBA images (colour types 2 and 6, no
 * interlace). Deterministic: the same pixels give the same bytes.
 */
const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const chunk = (type: string, data: Buffer) => {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td) >>> 0);
  return Buffer.concat([len, td, crc]);
};

/** Encode `pixels` (width*height*channels bytes, row-major) as PNG. */
export function encodePng(width: number, height: number, pixels: Uint8Array, channels: 3 | 4 = 4, text: Record<string, string> = {}): Buffer {
  if (pixels.length !== width * height * channels) throw new Error(`expected ${width * height * channels} bytes, got ${pixels.length}`);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = channels === 4 ? 6 : 2;
  ihdr[10] = 0;
  ihdr[11] = 0;
  ihdr[12] = 0;
  const stride = width * channels;
  const raw = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y++) {
    raw[y * (stride + 1)] = 0; // filter: none
    Buffer.from(pixels.buffer, pixels.byteOffset + y * stride, stride).copy(raw, y * (stride + 1) + 1);
  }
  const texts = Object.entries(text).map(([k, v]) => chunk('tEXt', Buffer.from(`${k}\0${v}`, 'latin1')));
  return Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), ...texts, chunk('IDAT', deflateSync(raw, { level: 6 })), chunk('IEND', Buffer.alloc(0))]);
}
