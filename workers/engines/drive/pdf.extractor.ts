import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { getDocument, VerbosityLevel } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { TextItem } from 'pdfjs-dist/types/src/display/api';
import { pageLines } from '../extract/pdf.extractor';
import type { DriveTextExtractor } from './drive-text.engine';

/** Pages read at most; the rest of a longer PDF is left out (truncated). */
export const DRIVE_PDF_MAX_PAGES = 500;

// Character maps (CJK fonts) and the standard 14 fonts' data ship with pdfjs-dist; in Node they are read from disk.
const PDFJS_DIR = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
const ASSETS = { cMapUrl: join(PDFJS_DIR, 'cmaps') + '/', cMapPacked: true, standardFontDataUrl: join(PDFJS_DIR, 'standard_fonts') + '/' };

/**
 * pdfjs-text-v1: the text layer of each page with pdfjs-dist's legacy build (no rendering, no OCR:
 * a scan without a text layer gives no text), lines joined on their baselines, pages separated by
 * a blank line. Stops at DRIVE_PDF_MAX_PAGES pages or once `maxChars` characters were read.
 */
export function createDrivePdfExtractor(): DriveTextExtractor {
  return {
    name: 'pdfjs-text-v1',
    async extract(bytes, { signal, maxChars }) {
      signal.throwIfAborted();
      // pdfjs detaches the buffer it is given: always hand it a copy.
      const task = getDocument({ data: new Uint8Array(bytes), ...ASSETS, disableFontFace: true, useSystemFonts: false, verbosity: VerbosityLevel.ERRORS, stopAtErrors: false });
      const onAbort = () => void task.destroy();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        let pdf;
        try {
          pdf = await task.promise;
        } catch (err) {
          signal.throwIfAborted();
          if ((err as Error).name === 'PasswordException') throw new Error('the PDF is password-protected');
          throw new Error(`the PDF could not be read (${(err as Error).message})`);
        }
        const pages = Math.min(pdf.numPages, DRIVE_PDF_MAX_PAGES);
        const parts: string[] = [];
        let chars = 0;
        let n = 1;
        for (; n <= pages && chars <= maxChars; n++) {
          signal.throwIfAborted();
          const page = await pdf.getPage(n);
          const content = await page.getTextContent();
          const text = pageLines(content.items.filter((i): i is TextItem => 'str' in i))
            .map((l) => l.text)
            .join('\n');
          page.cleanup();
          if (text) {
            parts.push(text);
            chars += text.length + 2;
          }
        }
        return { text: parts.join('\n\n'), truncated: pdf.numPages > pages };
      } finally {
        signal.removeEventListener('abort', onAbort);
        await task.destroy().catch(() => {});
      }
    },
  };
}
