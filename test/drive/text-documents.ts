import { Document, Packer, Paragraph, TextRun } from 'docx';
import ExcelJS from 'exceljs';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import PptxGenJS from 'pptxgenjs';
import type { Client } from '../helpers/http';

/** Documents the Drive text and search tests make themselves, with maintained libraries (nothing read from disk). */

export const b64 = (b: Buffer | Uint8Array) => Buffer.from(b).toString('base64');

/** A PDF with a text layer: one page per entry of `pages`, one line per string (Helvetica: Latin-1 text only). */
export async function makePdf(pages: string[][]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = doc.addPage([595, 842]);
    lines.forEach((l, i) => page.drawText(l, { x: 56, y: 780 - i * 20, size: 12, font }));
  }
  return Buffer.from(await doc.save());
}

/** A Word document: one paragraph per string. */
export async function makeDocx(paragraphs: string[]): Promise<Buffer> {
  const doc = new Document({ sections: [{ children: paragraphs.map((p) => new Paragraph({ children: [new TextRun(p)] })) }] });
  return Buffer.from(await Packer.toBuffer(doc));
}

/** An Excel workbook: sheets of rows. */
export async function makeXlsx(sheets: { name: string; rows: (string | number)[][] }[]): Promise<Buffer> {
  const wb = new ExcelJS.Workbook();
  for (const s of sheets) {
    const ws = wb.addWorksheet(s.name);
    for (const r of s.rows) ws.addRow(r);
  }
  return Buffer.from(await wb.xlsx.writeBuffer());
}

/** A PowerPoint deck: slides with a title and body lines. */
export async function makePptx(slides: { title: string; lines: string[] }[]): Promise<Buffer> {
  const pptx = new PptxGenJS();
  for (const s of slides) {
    const slide = pptx.addSlide();
    slide.addText(s.title, { x: 0.5, y: 0.3, w: 9, h: 1, fontSize: 28 });
    slide.addText(s.lines.join('\n'), { x: 0.5, y: 1.5, w: 9, h: 3, fontSize: 16 });
  }
  return (await pptx.write({ outputType: 'nodebuffer' })) as Buffer;
}

/** Upload a file; returns its id. */
export async function upload(api: Client, body: Record<string, unknown>): Promise<string> {
  const r = await api.post('/drive/files', body);
  if (r.status !== 201) throw new Error(`upload of ${String(body.name)} answered ${r.status}: ${r.text}`);
  return r.body.id as string;
}

/** Poll GET /drive/files/{id}/text until the extraction is done (textStatus not pending). */
export async function waitForText(api: Client, fileId: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await api.get(`/drive/files/${fileId}/text`);
    if (r.status !== 200) throw new Error(`GET text of ${fileId} answered ${r.status}: ${r.text}`);
    if (r.body.textStatus !== 'pending') return r;
    if (Date.now() > deadline) throw new Error(`text of ${fileId} still pending after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
