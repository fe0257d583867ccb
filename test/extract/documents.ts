import JSZip from 'jszip';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import PptxGenJS from 'pptxgenjs';
import sharp from 'sharp';

/** Documents the extract tests make themselves (nothing is read from disk). */

export const PDF = 'application/pdf';
export const PPTX = 'application/vnd.openxmlformats-officedocument.presentationml.presentation';

/** A PDF: one line per entry, the `big` lines set at 24 pt, the rest at 12 pt; optional Title metadata. */
export async function makePdf(
  lines: { text: string; big?: boolean }[],
  opts: { title?: string; pages?: number } = {},
): Promise<Buffer> {
  const doc = await PDFDocument.create();
  if (opts.title) doc.setTitle(opts.title);
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const page = doc.addPage([595, 842]);
  let y = 780;
  for (const l of lines) {
    const size = l.big ? 24 : 12;
    page.drawText(l.text, { x: 56, y, size, font });
    y -= size * 1.8;
  }
  for (let i = 1; i < (opts.pages ?? 1); i++) doc.addPage([595, 842]);
  return Buffer.from(await doc.save());
}

/**
 * A PPTX: slides with a title placeholder (from a slide master, as PowerPoint makes them) and
 * body lines as bullets in a text box.
 */
export async function makePptx(slides: { title: string; bullets?: string[]; text?: string }[]): Promise<Buffer> {
  const pptx = new PptxGenJS();
  pptx.defineSlideMaster({
    title: 'TITLED',
    objects: [{ placeholder: { options: { name: 'title', type: 'title', x: 0.5, y: 0.3, w: 9, h: 1 }, text: '' } }],
  });
  for (const s of slides) {
    const slide = pptx.addSlide({ masterName: 'TITLED' });
    slide.addText(s.title, { placeholder: 'title' });
    if (s.text) slide.addText(s.text, { x: 0.5, y: 1.5, w: 9, h: 1 });
    if (s.bullets)
      slide.addText(
        s.bullets.map((b) => ({ text: b, options: { bullet: true, breakLine: true } })),
        { x: 0.5, y: 2.5, w: 9, h: 3 },
      );
  }
  return (await pptx.write({ outputType: 'nodebuffer' })) as Buffer;
}

const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Black text on white, rendered by sharp from an SVG (DejaVu Sans); `big` lines larger. */
export async function makeImage(
  lines: { text: string; big?: boolean }[],
  format: 'png' | 'jpeg' | 'webp' = 'png',
): Promise<Buffer> {
  const height = lines.length * 70 + 60;
  const texts = lines
    .map(
      (l, i) =>
        `<text x="40" y="${70 + i * 70}" font-family="DejaVu Sans" font-size="${l.big ? 52 : 34}" fill="black">${escapeXml(l.text)}</text>`,
    )
    .join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="${height}"><rect width="100%" height="100%" fill="white"/>${texts}</svg>`;
  const img = sharp(Buffer.from(svg));
  return format === 'png'
    ? img.png().toBuffer()
    : format === 'jpeg'
      ? img.jpeg({ quality: 90 }).toBuffer()
      : img.webp({ quality: 90 }).toBuffer();
}

/** A blank white PNG (no text to find). */
export const blankPng = () =>
  sharp({ create: { width: 400, height: 300, channels: 3, background: '#ffffff' } })
    .png()
    .toBuffer();

/** A ZIP that is not a presentation. */
export async function makeZip(): Promise<Buffer> {
  const z = new JSZip();
  z.file('notes.txt', 'not a presentation');
  return z.generateAsync({ type: 'nodebuffer' });
}

/** The first bytes of a Linux executable (ELF), padded. */
export const elfBytes = () =>
  Buffer.concat([Buffer.from('7f454c4602010100000000000000000002003e0001000000', 'hex'), Buffer.alloc(512)]);

export const b64 = (b: Buffer) => b.toString('base64');
