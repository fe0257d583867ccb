import { Document, Packer, Paragraph, TextRun } from 'docx';
import JSZip from 'jszip';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import PptxGenJS from 'pptxgenjs';
import type { Client } from '../../scripts/harness/http';

/** Documents the Drive text and search tests make themselves (nothing read from disk): with maintained libraries, XLSX by hand. */

export const b64 = (b: Buffer | Uint8Array) => Buffer.from(b).toString('base64');

/** A PDF with a text layer: one page per entry of `pages`, one line per string (Helvetica: Latin-1 text only). */
export async function makePdf(pages: string[][]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = doc.addPage([595, 842]);
    for (const [i, l] of lines.entries()) page.drawText(l, { x: 56, y: 780 - i * 20, size: 12, font });
  }
  return Buffer.from(await doc.save());
}

/** A Word document: one paragraph per string. */
export async function makeDocx(paragraphs: string[]): Promise<Buffer> {
  const doc = new Document({
    sections: [{ children: paragraphs.map((p) => new Paragraph({ children: [new TextRun(p)] })) }],
  });
  return Buffer.from(await Packer.toBuffer(doc));
}

/**
 * A cell of makeXlsx: a string (in the shared-string table), a number, a boolean, null (no cell
 * element: the cells after it keep their columns), or one of: an inline string; a shared string
 * of rich-text runs (every other run bold); a date (its serial, with number format 14 m/d/yyyy
 * unless `format` says another built-in id or a custom code); a number with a number format; a
 * formula with its cached value (none when `value` is left out); an error value.
 */
export type XlsxCell =
  | string
  | number
  | boolean
  | null
  | { inline: string }
  | { rich: string[] }
  | { date: Date; format?: number | string }
  | { number: number; format: number | string }
  | { formula: string; value?: string | number | boolean }
  | { error: string };

export interface XlsxSheet {
  name: string;
  rows: XlsxCell[][];
}

const xmlEscape = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
const tText = (s: string) => `<t xml:space="preserve">${xmlEscape(s)}</t>`;
const colName = (n: number): string =>
  (n > 26 ? colName(Math.floor((n - 1) / 26)) : '') + String.fromCharCode(65 + ((n - 1) % 26));
const NS = 'http://schemas.openxmlformats.org/spreadsheetml/2006/main';
const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';

/**
 * An Excel workbook written by hand (SpreadsheetML parts over jszip, as Excel writes them: shared
 * strings, styles, one part per sheet): sheets of rows. `date1904` uses the 1904 date system;
 * `reversedParts` numbers the sheet parts backwards (the first sheet in sheetN.xml), as a workbook
 * whose sheets were reordered in Excel does, so a reader must follow the workbook's order.
 */
export async function makeXlsx(
  sheets: XlsxSheet[],
  opts: { date1904?: boolean; reversedParts?: boolean } = {},
): Promise<Buffer> {
  const shared: string[] = [];
  const sharedIndex = new Map<string, number>();
  const share = (item: string) => {
    if (!sharedIndex.has(item)) sharedIndex.set(item, shared.push(item) - 1);
    return sharedIndex.get(item)!;
  };
  const formats: (number | string)[] = [0];
  const styleOf = (format: number | string) =>
    formats.includes(format) ? formats.indexOf(format) : formats.push(format) - 1;
  const epoch = opts.date1904 ? Date.UTC(1904, 0, 1) : Date.UTC(1899, 11, 30);
  // Excel's 1900 system counts a 29 February 1900: serials before 1 March 1900 are one less.
  const serialOf = (d: Date) => {
    const days = (d.getTime() - epoch) / 86_400_000;
    return !opts.date1904 && days < 61 ? days - 1 : days;
  };
  const cellXml = (ref: string, cell: Exclude<XlsxCell, null>): string => {
    if (typeof cell === 'string') return `<c r="${ref}" t="s"><v>${share(`<si>${tText(cell)}</si>`)}</v></c>`;
    if (typeof cell === 'number') return `<c r="${ref}"><v>${cell}</v></c>`;
    if (typeof cell === 'boolean') return `<c r="${ref}" t="b"><v>${cell ? 1 : 0}</v></c>`;
    if ('inline' in cell) return `<c r="${ref}" t="inlineStr"><is>${tText(cell.inline)}</is></c>`;
    if ('rich' in cell)
      return `<c r="${ref}" t="s"><v>${share(`<si>${cell.rich.map((run, i) => `<r>${i % 2 ? '<rPr><b/></rPr>' : ''}${tText(run)}</r>`).join('')}</si>`)}</v></c>`;
    if ('date' in cell) return `<c r="${ref}" s="${styleOf(cell.format ?? 14)}"><v>${serialOf(cell.date)}</v></c>`;
    if ('number' in cell) return `<c r="${ref}" s="${styleOf(cell.format)}"><v>${cell.number}</v></c>`;
    if ('error' in cell) return `<c r="${ref}" t="e"><v>${xmlEscape(cell.error)}</v></c>`;
    const { value } = cell;
    const t = typeof value === 'string' ? ' t="str"' : typeof value === 'boolean' ? ' t="b"' : '';
    const v =
      value === undefined ? '' : `<v>${typeof value === 'boolean' ? Number(value) : xmlEscape(String(value))}</v>`;
    return `<c r="${ref}"${t}><f>${xmlEscape(cell.formula)}</f>${v}</c>`;
  };
  const sheetXml = (s: XlsxSheet) => {
    const rows = s.rows.map((row, r) => {
      const cells = row.map((cell, c) => (cell === null ? '' : cellXml(`${colName(c + 1)}${r + 1}`, cell))).join('');
      return `<row r="${r + 1}">${cells}</row>`;
    });
    return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="${NS}" xmlns:r="${REL}"><sheetData>${rows.join('')}</sheetData></worksheet>`;
  };
  const partOf = (i: number) => `worksheets/sheet${opts.reversedParts ? sheets.length - i : i + 1}.xml`;

  const zip = new JSZip();
  for (const [i, s] of sheets.entries()) zip.file(`xl/${partOf(i)}`, sheetXml(s));
  const custom = formats.map((f, i) => ({ f, id: typeof f === 'string' ? 164 + i : f }));
  zip.file(
    '[Content_Types].xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>${sheets.map((_, i) => `<Override PartName="/xl/${partOf(i)}" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>`).join('')}<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/></Types>`,
  );
  zip.file(
    '_rels/.rels',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="${REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
  );
  zip.file(
    'xl/workbook.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<workbook xmlns="${NS}" xmlns:r="${REL}"><workbookPr${opts.date1904 ? ' date1904="1"' : ''}/><sheets>${sheets.map((s, i) => `<sheet name="${xmlEscape(s.name)}" sheetId="${i + 1}" r:id="rId${i + 3}"/>`).join('')}</sheets></workbook>`,
  );
  zip.file(
    'xl/_rels/workbook.xml.rels',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="${REL}/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rId2" Type="${REL}/styles" Target="styles.xml"/>${sheets.map((_, i) => `<Relationship Id="rId${i + 3}" Type="${REL}/worksheet" Target="${partOf(i)}"/>`).join('')}</Relationships>`,
  );
  // Written after the sheets: writing them fills the shared strings and the formats.
  zip.file(
    'xl/sharedStrings.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="${NS}" count="${shared.length}" uniqueCount="${shared.length}">${shared.join('')}</sst>`,
  );
  zip.file(
    'xl/styles.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<styleSheet xmlns="${NS}"><numFmts count="${custom.filter((c) => typeof c.f === 'string').length}">${custom
      .filter((c) => typeof c.f === 'string')
      .map((c) => `<numFmt numFmtId="${c.id}" formatCode="${xmlEscape(c.f as string)}"/>`)
      .join(
        '',
      )}</numFmts><fonts count="2"><font><sz val="11"/><name val="Calibri"/></font><font><b/><sz val="11"/><name val="Calibri"/></font></fonts><fills count="2"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill></fills><borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders><cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs><cellXfs count="${custom.length}">${custom
      .map(
        (c) =>
          `<xf numFmtId="${c.id}" fontId="0" fillId="0" borderId="0" xfId="0"${c.id ? ' applyNumberFormat="1"' : ''}/>`,
      )
      .join('')}</cellXfs></styleSheet>`,
  );
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
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
