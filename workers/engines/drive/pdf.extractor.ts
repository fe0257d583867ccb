import type { TextItem } from 'pdfjs-dist/types/src/display/api';
import { pageLines, withPdf } from '../extract/pdf.extractor';
import type { DriveTextExtractor } from './drive-text.engine';

/** Pages read at most; the rest of a longer PDF is left out (truncated). */
export const DRIVE_PDF_MAX_PAGES = 500;

/**
 * pdfjs-text-v1: the text layer of each page with pdfjs-dist's legacy build (no rendering, no OCR:
 * a scan without a text layer gives no text), lines joined on their baselines, pages separated by
 * a blank line. Stops at DRIVE_PDF_MAX_PAGES pages or once `maxChars` characters were read.
 */
export function createDrivePdfExtractor(): DriveTextExtractor {
  return {
    name: 'pdfjs-text-v1',
    async extract(bytes, { signal, maxChars }) {
      // The worker keeps the bytes it read, so pdfjs gets a copy.
      return withPdf(bytes, signal, { transfer: false }, async (pdf) => {
        const pages = Math.min(pdf.numPages, DRIVE_PDF_MAX_PAGES);
        const parts: string[] = [];
        let chars = 0;
        for (let n = 1; n <= pages && chars <= maxChars; n++) {
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
      });
    },
  };
}
