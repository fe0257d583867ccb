import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { getDocument, VerbosityLevel } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { PDFDocumentProxy, TextItem } from 'pdfjs-dist/types/src/display/api';
import { AppError } from '../../../platform/infra/errors';
import { linesToText, type ExtractedText, type SizedLine, type TextExtractor } from './extract.engine';

/** Pages read at most; the rest of a longer PDF is left out (with a note). */
export const PDF_MAX_PAGES = 300;

/** A PDF Title that names a file or a placeholder rather than the document. */
const USELESS_TITLE =
  /^(?:untitled|document\d*|microsoft (?:word|powerpoint) - .*|.*\.(?:docx?|pptx?|pdf|odt|txt|rtf))$/i;

// Character maps (CJK fonts) and the standard 14 fonts' data ship with pdfjs-dist; in Node they are read from disk.
const PDFJS_DIR = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
const ASSETS = {
  cMapUrl: `${join(PDFJS_DIR, 'cmaps')}/`,
  cMapPacked: true,
  standardFontDataUrl: `${join(PDFJS_DIR, 'standard_fonts')}/`,
};

type Run = { x: number; y: number; w: number; size: number; s: string };

/** A page's text items as lines: items on one baseline (within 40% of the type size) join, left to right. */
export function pageLines(items: TextItem[]): SizedLine[] {
  const lines: Run[][] = [];
  let current: Run[] = [];
  let baseline = Number.NaN;
  for (const it of items) {
    const [a = 0, b = 0, , d = 0, x = 0, y = 0] = it.transform as number[];
    const size = Math.max(Math.hypot(a, b), Math.abs(d), it.height || 0);
    if (it.str.trim() !== '') {
      if (current.length && Math.abs(y - baseline) > Math.max(1, 0.4 * size)) {
        lines.push(current);
        current = [];
      }
      if (!current.length) baseline = y;
      current.push({ x, y, w: it.width, size, s: it.str });
    }
    if (it.hasEOL && current.length) {
      lines.push(current);
      current = [];
    }
  }
  if (current.length) lines.push(current);
  return lines.map((runs) => {
    runs.sort((p, q) => p.x - q.x);
    let text = '';
    let end = Number.NEGATIVE_INFINITY;
    for (const r of runs) {
      const gap = r.x - end;
      if (text && gap > 0.15 * r.size && !/\s$/.test(text) && !/^\s/.test(r.s)) text += ' ';
      text += r.s;
      end = r.x + r.w;
    }
    return { text: text.replace(/\s+/g, ' ').trim(), size: Math.max(...runs.map((r) => r.size)) };
  });
}

/** Why a PDF could not be opened: password-protected, or damaged (with pdfjs's message). */
export class PdfOpenError extends Error {
  override name = 'PdfOpenError';
  constructor(
    readonly reason: 'password' | 'damaged',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Open a PDF with pdfjs-dist's legacy build (fonts and character maps from the package, no
 * rendering), run `use` on it, and always destroy it; the caller's abort destroys it at once.
 * pdfjs transfers (detaches) the ArrayBuffer it is given: a Buffer that owns its whole ArrayBuffer
 * is handed over when `transfer` is set (the caller does not use it afterwards), else it is copied.
 */
export async function withPdf<T>(
  bytes: Buffer,
  signal: AbortSignal,
  opts: { transfer: boolean },
  use: (pdf: PDFDocumentProxy) => Promise<T>,
): Promise<T> {
  signal.throwIfAborted();
  const owned =
    opts.transfer &&
    bytes.byteOffset === 0 &&
    bytes.buffer.byteLength === bytes.length &&
    bytes.buffer instanceof ArrayBuffer;
  const data = owned ? new Uint8Array(bytes.buffer) : new Uint8Array(bytes);
  const task = getDocument({
    data,
    ...ASSETS,
    disableFontFace: true,
    useSystemFonts: false,
    verbosity: VerbosityLevel.ERRORS,
    stopAtErrors: false,
  });
  const onAbort = () => void task.destroy();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    let pdf: PDFDocumentProxy;
    try {
      pdf = await task.promise;
    } catch (err) {
      signal.throwIfAborted();
      if ((err as Error).name === 'PasswordException')
        throw new PdfOpenError('password', 'the PDF is password-protected');
      throw new PdfOpenError('damaged', `the PDF could not be read (${(err as Error).message})`);
    }
    return await use(pdf);
  } finally {
    signal.removeEventListener('abort', onAbort);
    await task.destroy().catch(() => {});
  }
}

/** pdfjs-text-v1: the text layer of every page with pdfjs-dist (no rendering, no OCR of scans). */
export function createPdfExtractor(): TextExtractor {
  return {
    name: 'pdfjs-text-v1',
    mimeTypes: ['application/pdf'],
    async extract(bytes, { signal }): Promise<ExtractedText> {
      try {
        return await withPdf(bytes, signal, { transfer: true }, async (pdf) => {
          const info = ((await pdf.getMetadata().catch(() => null))?.info ?? {}) as { Title?: unknown };
          const rawTitle = typeof info.Title === 'string' ? info.Title.replace(/\s+/g, ' ').trim() : '';
          const pages = Math.min(pdf.numPages, PDF_MAX_PAGES);
          const lines: SizedLine[] = [];
          const empty: number[] = [];
          for (let n = 1; n <= pages; n++) {
            signal.throwIfAborted();
            const page = await pdf.getPage(n);
            const content = await page.getTextContent();
            const got = pageLines(content.items.filter((i): i is TextItem => 'str' in i));
            if (!got.length) empty.push(n);
            lines.push(...got);
            page.cleanup();
          }
          const notes: string[] = [];
          if (pdf.numPages > pages) notes.push(`The PDF has ${pdf.numPages} pages; the first ${pages} were read.`);
          if (empty.length && empty.length < pages)
            notes.push(
              `No text on page${empty.length > 1 ? 's' : ''} ${empty.slice(0, 20).join(', ')}${empty.length > 20 ? ', …' : ''} (scanned pages without a text layer are not read with OCR; send them as images).`,
            );
          return {
            engine: 'pdfjs-text-v1',
            text: linesToText(lines),
            metadataTitle: rawTitle && !USELESS_TITLE.test(rawTitle) ? rawTitle : null,
            pages,
            ocr: false,
            truncated: pdf.numPages > pages,
            notes,
          };
        });
      } catch (err) {
        if (!(err instanceof PdfOpenError)) throw err;
        throw new AppError(
          'unreadable_document',
          err.reason === 'password'
            ? 'documentBase64: the PDF is password-protected; send it without a password'
            : `documentBase64: ${err.message}`,
        );
      }
    },
  };
}
