import { posix } from 'node:path';
import type JSZip from 'jszip';
import { attrs, child, findAll, kids, ooxmlParser, readPart, streamElements, tagOf, type XNode } from '../ooxml';
import { TooLargeError } from './drive-text.engine';

/**
 * A small XLSX reader for text: the sheets in workbook order and, row by row, each cell's text as
 * Excel shows it, without formatting numbers beyond dates. The package's structure (workbook,
 * relationships, styles) is parsed with fast-xml-parser. Worksheets and the shared-string table
 * are read as they inflate, one `<row>` or `<si>` at a time, so a large sheet is never held whole
 * and reading stops as soon as the caller has enough; their cells and string items, a few small
 * and regular XML shapes, are read with regular expressions: eight times faster than parsing each
 * row with fast-xml-parser (about 9 MB of XML a second), which matters because the whole
 * shared-string table is read for any sheet.
 *
 * What a cell shows:
 * - shared string (`t="s"`), inline string (`t="inlineStr"`), rich text: the runs' text joined,
 *   phonetic runs left out, `_xHHHH_` escapes decoded;
 * - number: as JavaScript prints it (`1200`, `35.5`, `0.1`), unless its number format is a date
 *   or time format (built-in 14–22 and 45–47, or a custom format with date or time tokens):
 *   a date format shows `2024-03-05`, a date-and-time format `2024-03-05T14:30:00`, a time format
 *   `14:30:00`, an elapsed-time format (`[h]:mm:ss`) `36:00:00`; seconds are rounded, no zone
 *   (Excel has none); the 1904 date system is honoured; a serial outside 0–2958465 shows as a number;
 * - boolean: `TRUE` or `FALSE`; error: its code (`#DIV/0!`); formula: its cached value (by its
 *   type, as above), empty when the file holds none; `t="d"` (an ISO date in the file): as written.
 */

/** What the reader hands over; return false from either to stop reading. */
export interface XlsxVisitor {
  /** A sheet begins (worksheets only, chart sheets have no cells). */
  // biome-ignore lint/suspicious/noConfusingVoidType: a visitor may return nothing (go on) or false (stop); `undefined` would force every visitor to return.
  sheet(name: string): boolean | void;
  /** A row with at least one cell: texts by column (a missing cell is '', trailing empty cells dropped) and the cell elements read. */
  // biome-ignore lint/suspicious/noConfusingVoidType: as sheet() above.
  row(texts: string[], cellsRead: number): boolean | void;
}

export type DateKind = 'date' | 'datetime' | 'time' | 'elapsed';

const parser = ooxmlParser({ removeNSPrefix: true });
const parse = (xml: string) => parser.parse(xml) as XNode[];
const rootOf = (doc: XNode[], tag: string) => doc.find((n) => tagOf(n) === tag);

/** Built-in number formats that are dates or times (ECMA-376 Part 1, 18.8.30). */
const BUILTIN_DATES: Record<number, DateKind> = {
  14: 'date',
  15: 'date',
  16: 'date',
  17: 'date',
  18: 'time',
  19: 'time',
  20: 'time',
  21: 'time',
  22: 'datetime',
  45: 'time',
  46: 'elapsed',
  47: 'time',
};

/** Whether a custom number format shows a date or time, judged on its first section with literals, colours and conditions removed. */
export function dateKindOf(formatCode: string): DateKind | null {
  let s = formatCode.replace(/"[^"]*"|\\.|[_*]./g, '');
  const elapsed = /\[(h+|m+|s+)\]/i.test(s.split(';')[0] ?? '');
  s = (s.replace(/\[[^\]]*\]/g, '').split(';')[0] ?? '').replace(/general/gi, '').toLowerCase();
  if (elapsed) return 'elapsed';
  const time = /[hs]|am\/pm|a\/p/.test(s);
  const date = /[yd]/.test(s) || (!time && s.includes('m'));
  if (date && time) return 'datetime';
  return date ? 'date' : time ? 'time' : null;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const DAY_MS = 86_400_000;

/** A date serial as Excel would show it in a format of that kind, ISO 8601 (see the module's comment). */
export function formatSerial(serial: number, kind: DateKind, date1904 = false): string {
  if (kind === 'elapsed') {
    const secs = Math.round(Math.abs(serial) * 86_400);
    return `${serial < 0 ? '-' : ''}${Math.floor(secs / 3600)}:${pad(Math.floor(secs / 60) % 60)}:${pad(secs % 60)}`;
  }
  if (!(serial >= 0 && serial < 2_958_466)) return String(serial);
  const secs = Math.round(serial * 86_400);
  const time = `${pad(Math.floor(secs / 3600) % 24)}:${pad(Math.floor(secs / 60) % 60)}:${pad(secs % 60)}`;
  if (kind === 'time') return time;
  // The 1900 system counts a 29 February 1900 that never was (serial 60), as Lotus 1-2-3 did.
  const epoch = date1904 ? Date.UTC(1904, 0, 1) : serial < 60 ? Date.UTC(1899, 11, 31) : Date.UTC(1899, 11, 30);
  const days = kind === 'date' ? Math.floor(serial) : Math.floor(secs / 86_400);
  const day = !date1904 && days === 60 ? '1900-02-29' : new Date(epoch + days * DAY_MS).toISOString().slice(0, 10);
  return kind === 'date' ? day : `${day}T${time}`;
}

/** A 1-based column number from a cell reference (`C5` → 3), or null without one. */
export function columnOf(ref: string | undefined): number | null {
  const letters = ref && /^\$?([A-Za-z]{1,3})/.exec(ref)?.[1];
  if (!letters) return null;
  let n = 0;
  for (const ch of letters.toUpperCase()) n = n * 26 + (ch.charCodeAt(0) - 64);
  return n;
}

/** `_xHHHH_` is how OOXML strings carry characters XML cannot (ST_Xstring); `_x005F_` is a literal underscore. */
const unescapeX = (s: string) =>
  s.includes('_x') ? s.replace(/_x([0-9A-Fa-f]{4})_/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))) : s;

// The shapes of cells and string items, any namespace prefix (`<x:c>`); `(?<!\/)>` ends a start tag that is not self-closing.
const NS = '(?:[\\w.-]+:)?';
const CELL = new RegExp(`<${NS}c(?=[\\s/>])([^>]*?)(?:/>|>([\\s\\S]*?)</${NS}c>)`, 'g');
const ATTR = /([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
const element = (tag: string, flags = '') =>
  new RegExp(`<${NS}${tag}(?:\\s[^>]*)?(?<!/)>([\\s\\S]*?)</${NS}${tag}>`, flags);
const V = element('v');
const IS = element('is');
const T = element('t', 'g');
const RPH = element('rPh', 'g');
const ENTITY = /&(?:#(\d+)|#x([0-9A-Fa-f]+)|(lt|gt|amp|quot|apos));/g;
const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** XML character data as text: references decoded, CDATA sections taken as they are. */
function xmlText(raw: string): string {
  const decode = (s: string) =>
    s.includes('&')
      ? s.replace(ENTITY, (m, dec?: string, hex?: string, name?: string) => {
          if (name) return NAMED[name]!;
          const cp = dec ? Number(dec) : parseInt(hex!, 16);
          return cp <= 0x10ffff ? String.fromCodePoint(cp) : m;
        })
      : s;
  if (!raw.includes('<![CDATA[')) return decode(raw);
  return raw
    .split(/(<!\[CDATA\[[\s\S]*?\]\]>)/)
    .map((part) => (part.startsWith('<![CDATA[') ? part.slice(9, -3) : decode(part)))
    .join('');
}

const attributes = (s: string) => {
  const out: Record<string, string> = {};
  for (const m of s.matchAll(ATTR)) out[m[1]!.replace(/^.*:/, '')] = xmlText(m[2] ?? m[3] ?? '');
  return out;
};

/** The text of a string item (the XML inside `si` or `is`): its `t`, or its runs' `t` joined; phonetic runs (`rPh`) left out. */
function stringItemText(xml: string): string {
  let s = '';
  for (const m of xml.replace(RPH, '').matchAll(T)) s += xmlText(m[1]!);
  return unescapeX(s);
}

interface Workbook {
  sheets: { name: string; part: string | null }[];
  sharedStrings: string | null;
  styles: string | null;
  date1904: boolean;
}

/** A relationship's target as a part name: absolute (`/xl/…`) or relative to the source part's folder. */
const resolveTarget = (from: string, target: string) =>
  target.startsWith('/') ? target.slice(1) : posix.normalize(posix.join(posix.dirname(from), target));

/** The workbook part (from the package relationships, else xl/workbook.xml), its sheets in order, and where its shared strings and styles are. */
async function readWorkbook(zip: JSZip, read: (name: string) => Promise<string | null>): Promise<Workbook> {
  let main = 'xl/workbook.xml';
  const pkgRels = await read('_rels/.rels');
  if (pkgRels) {
    const office = findAll(rootOf(parse(pkgRels), 'Relationships') ?? {}, 'Relationship').find((r) =>
      /\/officeDocument$/.test(attrs(r).Type ?? ''),
    );
    if (office) main = resolveTarget('', attrs(office).Target ?? main);
  }
  const xml = await read(main);
  if (xml === null) throw new Error(`the ZIP holds no ${main}; it is not an Excel workbook`);
  const rels = new Map<string, { type: string; part: string }>();
  const relsXml = await read(posix.join(posix.dirname(main), '_rels', `${posix.basename(main)}.rels`));
  if (relsXml) {
    for (const r of findAll(rootOf(parse(relsXml), 'Relationships') ?? {}, 'Relationship')) {
      const a = attrs(r);
      if (a.TargetMode !== 'External' && a.Id && a.Target)
        rels.set(a.Id, { type: a.Type ?? '', part: resolveTarget(main, a.Target) });
    }
  }
  const byType = (suffix: string) => [...rels.values()].find((r) => r.type.endsWith(suffix))?.part ?? null;
  const wb = rootOf(parse(xml), 'workbook');
  if (!wb) throw new Error(`${main} is not a workbook`);
  const pr = attrs(child(wb, 'workbookPr') ?? {});
  const sheets: Workbook['sheets'] = [];
  for (const s of kids(child(wb, 'sheets') ?? {}).filter((k) => tagOf(k) === 'sheet')) {
    const rel = rels.get(attrs(s).id ?? '');
    if (rel && !rel.type.endsWith('/worksheet')) continue; // a chart sheet, a dialog sheet, a macro sheet
    sheets.push({ name: attrs(s).name ?? '', part: rel && zip.file(rel.part) ? rel.part : null });
  }
  return {
    sheets,
    sharedStrings: byType('/sharedStrings'),
    styles: byType('/styles'),
    date1904: pr.date1904 === '1' || pr.date1904 === 'true',
  };
}

/** For each cell style (`s`, an index into cellXfs), the kind of date its number format shows, or null. */
function dateStyles(xml: string | null): (DateKind | null)[] {
  if (!xml) return [];
  const sheet = rootOf(parse(xml), 'styleSheet');
  if (!sheet) return [];
  const custom = new Map<number, string>();
  for (const f of kids(child(sheet, 'numFmts') ?? {}).filter((k) => tagOf(k) === 'numFmt'))
    custom.set(Number(attrs(f).numFmtId), attrs(f).formatCode ?? '');
  return kids(child(sheet, 'cellXfs') ?? {})
    .filter((k) => tagOf(k) === 'xf')
    .map((xf) => {
      const id = Number(attrs(xf).numFmtId ?? 0);
      const code = custom.get(id);
      return code !== undefined ? dateKindOf(code) : (BUILTIN_DATES[id] ?? null);
    });
}

/** One `c` element's text (see the module's comment), from its attributes and inner XML. */
function cellText(
  a: Record<string, string>,
  inner: string,
  shared: string[],
  styles: (DateKind | null)[],
  date1904: boolean,
): string {
  if (a.t === 'inlineStr') {
    const is = IS.exec(inner);
    return is ? stringItemText(is[1]!) : '';
  }
  const v = V.exec(inner);
  const raw = v ? xmlText(v[1]!) : '';
  if (raw === '') return '';
  switch (a.t) {
    case 's':
      return shared[Number(raw)] ?? '';
    case 'b':
      return raw === '1' || raw === 'true' ? 'TRUE' : 'FALSE';
    case 'str':
      return unescapeX(raw);
    case 'e':
    case 'd':
      return raw;
  }
  const n = Number(raw);
  if (!Number.isFinite(n)) return raw;
  const kind = styles[Number(a.s ?? 0)];
  return kind ? formatSerial(n, kind, date1904) : String(n);
}

/** One `row` element's cell texts by column (a missing cell is ''), and the cell elements it holds. */
function rowTexts(
  xml: string,
  shared: string[],
  styles: (DateKind | null)[],
  date1904: boolean,
): { texts: string[]; cells: number } {
  const texts: string[] = [];
  let cells = 0;
  let col = 0;
  for (const m of xml.matchAll(CELL)) {
    cells++;
    const a = attributes(m[1]!);
    col = columnOf(a.r) ?? col + 1;
    const text = m[2] ? cellText(a, m[2], shared, styles, date1904).replace(/[\t\r\n]+/g, ' ') : '';
    if (text) texts[col - 1] = text;
  }
  return { texts: Array.from(texts, (t) => t ?? ''), cells };
}

/**
 * Read a workbook already opened with JSZip (and checked against ZIP bombs: parts read whole are
 * still capped at `maxPartBytes`), calling `visit` for each worksheet and each row with a value.
 * Stops when the visitor returns false or the signal aborts (rejecting with its reason).
 */
export async function readXlsx(
  zip: JSZip,
  visit: XlsxVisitor,
  opts: { signal: AbortSignal; maxPartBytes: number },
): Promise<void> {
  const { signal, maxPartBytes } = opts;
  const read = async (name: string) => {
    const f = zip.file(name);
    return f
      ? readPart(
          f,
          maxPartBytes,
          signal,
          () => new TooLargeError(`${name} inflates to more than ${Math.round(maxPartBytes / 1048576)} MB`),
        )
      : null;
  };
  const wb = await readWorkbook(zip, read);
  const styles = dateStyles(wb.styles ? await read(wb.styles) : null);
  const shared: string[] = [];
  const sst = wb.sharedStrings ? zip.file(wb.sharedStrings) : null;
  if (sst) await streamElements(sst, 'si', signal, (xml) => void shared.push(stringItemText(xml)));
  for (const sheet of wb.sheets) {
    signal.throwIfAborted();
    if (visit.sheet(sheet.name) === false) return;
    const part = sheet.part ? zip.file(sheet.part) : null;
    if (!part) continue;
    let stop = false;
    await streamElements(part, 'row', signal, (xml) => {
      signal.throwIfAborted();
      const { texts, cells } = rowTexts(xml, shared, styles, wb.date1904);
      while (texts.length && texts[texts.length - 1] === '') texts.pop();
      if (!texts.length && !cells) return true;
      stop = visit.row(texts, cells) === false;
      return !stop;
    });
    if (stop) return;
  }
}
