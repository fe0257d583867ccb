import { posix } from 'node:path';
import JSZip from 'jszip';
import { AppError } from '../../../platform/infra/errors';
import {
  attrs,
  child,
  findAll,
  kids,
  ooxmlParser,
  ownText,
  path,
  PartInflateError,
  readPart as inflatePart,
  tagOf,
  type XNode,
} from '../ooxml';
import type { ExtractedText, TextExtractor } from './extract.engine';

/** Slides read at most; the rest of a longer deck is left out (with a note). */
export const PPTX_MAX_SLIDES = 500;
/** Largest XML part inflated (a slide, the presentation); a larger one (a ZIP bomb) is refused. */
export const PPTX_MAX_PART_BYTES = 8 * 1024 * 1024;

const parser = ooxmlParser();

/** An a:p paragraph's text: runs and fields joined, a:br as a line break. */
function paragraphText(p: XNode): string {
  let s = '';
  const walk = (n: XNode) => {
    for (const k of kids(n)) {
      const t = tagOf(k);
      if (t === '#text') continue;
      if (t === 'a:t') s += ownText(k);
      else if (t === 'a:br') s += '\n';
      else if (t !== 'a:pPr' && t !== 'a:rPr' && t !== 'a:endParaRPr') walk(k);
    }
  };
  walk(p);
  return s.replace(/[ \t]+/g, ' ').trim();
}

type ShapeText = { title: boolean; lines: string[] };

/** The text of one shape (p:sp): its paragraphs with list markers where the slide shows them. */
function shapeText(sp: XNode): ShapeText | null {
  const ph = path(sp, 'p:nvSpPr', 'p:nvPr', 'p:ph');
  const phType = ph ? (attrs(ph).type ?? 'body') : null;
  const title = phType === 'title' || phType === 'ctrTitle';
  // A subtitle reads as a section heading (a note beside the flow), not as a step.
  const subtitle = phType === 'subTitle';
  // Paragraphs of a body placeholder are bulleted by the master unless they say buNone.
  const bodyPlaceholder = phType === 'body' || phType === 'obj';
  const body = child(sp, 'p:txBody');
  if (!body) return null;
  const lines: string[] = [];
  let number = 0;
  for (const p of findAll(body, 'a:p')) {
    const text = paragraphText(p);
    if (!text) continue;
    const pPr = child(p, 'a:pPr');
    const autoNum = pPr && child(pPr, 'a:buAutoNum');
    const bullet = pPr && child(pPr, 'a:buChar');
    const none = pPr && child(pPr, 'a:buNone');
    const first = text.split('\n');
    let prefix = '';
    if (title) prefix = '';
    else if (subtitle) prefix = '## ';
    else if (autoNum) prefix = `${++number}. `;
    else if (bullet || (bodyPlaceholder && !none)) prefix = '- ';
    if (!autoNum) number = 0;
    lines.push(`${prefix}${first[0]}`, ...first.slice(1));
  }
  return lines.length ? { title, lines } : null;
}

/** A slide's lines: the title placeholder first (as `# Title`), then the other shapes and tables in order. */
export function slideLines(xml: string): string[] {
  const doc = parser.parse(xml) as XNode[];
  const sld = doc.find((n) => tagOf(n) === 'p:sld');
  const tree = sld && path(sld, 'p:cSld', 'p:spTree');
  if (!tree) return [];
  const titles: string[] = [];
  const rest: string[] = [];
  const walk = (n: XNode) => {
    for (const k of kids(n)) {
      const t = tagOf(k);
      if (t === 'p:sp') {
        const s = shapeText(k);
        if (s?.title) titles.push(s.lines.join(' '));
        else if (s) rest.push(...s.lines);
      } else if (t === 'p:grpSp') walk(k);
      else if (t === 'p:graphicFrame') {
        // Tables: one line per cell, row by row.
        for (const tc of findAll(k, 'a:tc')) {
          const cell = findAll(tc, 'a:p').map(paragraphText).filter(Boolean).join(' ');
          if (cell) rest.push(cell);
        }
      }
    }
  };
  walk(tree);
  return [...titles.map((t) => `# ${t}`), ...rest];
}

/** Inflate one part, refusing more than `max` bytes however large the entry says it is. */
async function readPart(file: JSZip.JSZipObject, max: number, signal: AbortSignal): Promise<string> {
  try {
    return await inflatePart(
      file,
      max,
      signal,
      () =>
        new AppError(
          'unreadable_document',
          `documentBase64: ${file.name} inflates to more than ${max} bytes; this is not a presentation we read`,
        ),
    );
  } catch (err) {
    throw err instanceof PartInflateError ? new AppError('unreadable_document', `documentBase64: ${err.message}`) : err;
  }
}

/** The slides' part names in presentation order (p:sldIdLst), else by slide number. */
async function slideOrder(zip: JSZip, signal: AbortSignal): Promise<string[]> {
  const byNumber = Object.keys(zip.files)
    .map((name) => ({ name, n: /^ppt\/slides\/slide(\d+)\.xml$/.exec(name)?.[1] }))
    .filter((s): s is { name: string; n: string } => s.n !== undefined)
    .sort((a, b) => Number(a.n) - Number(b.n))
    .map((s) => s.name);
  const pres = zip.file('ppt/presentation.xml');
  const rels = zip.file('ppt/_rels/presentation.xml.rels');
  if (!pres || !rels) return byNumber;
  try {
    const relDoc = parser.parse(await readPart(rels, PPTX_MAX_PART_BYTES, signal)) as XNode[];
    const target = new Map<string, string>();
    for (const root of relDoc)
      for (const r of findAll(root, 'Relationship')) target.set(attrs(r).Id ?? '', attrs(r).Target ?? '');
    const presDoc = parser.parse(await readPart(pres, PPTX_MAX_PART_BYTES, signal)) as XNode[];
    const ordered: string[] = [];
    for (const root of presDoc) {
      for (const id of findAll(root, 'p:sldId')) {
        const t = target.get(attrs(id)['r:id'] ?? '');
        if (!t) continue;
        const name = t.startsWith('/') ? t.slice(1) : posix.normalize(posix.join('ppt', t));
        if (zip.file(name)) ordered.push(name);
      }
    }
    return ordered.length ? ordered : byNumber;
  } catch (err) {
    if (err instanceof AppError || signal.aborted) throw err;
    return byNumber;
  }
}

/** A core-properties title that names the tool or a placeholder rather than the deck. */
const USELESS_TITLE = /^(?:pptxgenjs presentation|powerpoint presentation|presentation\d*|untitled.*|.*\.pptx?)$/i;

/** docProps/core.xml dc:title, when it says something. */
async function coreTitle(zip: JSZip, signal: AbortSignal): Promise<string | null> {
  const core = zip.file('docProps/core.xml');
  if (!core) return null;
  try {
    const doc = parser.parse(await readPart(core, PPTX_MAX_PART_BYTES, signal)) as XNode[];
    const t =
      doc
        .flatMap((root) => findAll(root, 'dc:title'))
        .map(paragraphText)
        .find(Boolean)
        ?.replace(/\s+/g, ' ') ?? '';
    return t && !USELESS_TITLE.test(t) ? t : null;
  } catch (err) {
    if (err instanceof AppError || signal.aborted) throw err;
    return null;
  }
}

/** pptx-xml-v1: the text of every slide's XML, in presentation order (jszip + fast-xml-parser). */
export function createPptxExtractor(): TextExtractor {
  return {
    name: 'pptx-xml-v1',
    mimeTypes: ['application/vnd.openxmlformats-officedocument.presentationml.presentation'],
    async extract(bytes, { signal }): Promise<ExtractedText> {
      let zip: JSZip;
      try {
        zip = await JSZip.loadAsync(bytes, { checkCRC32: false });
      } catch (err) {
        throw new AppError(
          'unreadable_document',
          `documentBase64: the presentation's ZIP could not be read (${(err as Error).message})`,
        );
      }
      if (!zip.file('ppt/presentation.xml'))
        throw new AppError(
          'unreadable_document',
          'documentBase64: the ZIP holds no ppt/presentation.xml; it is not a PowerPoint presentation',
        );
      const all = await slideOrder(zip, signal);
      const slides = all.slice(0, PPTX_MAX_SLIDES);
      const lines: string[] = [];
      const notes: string[] = [];
      for (const name of slides) {
        signal.throwIfAborted();
        const xml = await readPart(zip.file(name)!, PPTX_MAX_PART_BYTES, signal);
        try {
          lines.push(...slideLines(xml));
        } catch {
          notes.push(`${posix.basename(name)} could not be parsed and was left out.`);
        }
      }
      if (all.length > slides.length)
        notes.push(`The presentation has ${all.length} slides; the first ${slides.length} were read.`);
      const metadataTitle = await coreTitle(zip, signal);
      return {
        engine: 'pptx-xml-v1',
        text: lines.join('\n'),
        metadataTitle,
        pages: slides.length,
        ocr: false,
        truncated: all.length > slides.length,
        notes,
      };
    },
  };
}
