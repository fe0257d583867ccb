import mammoth from 'mammoth';
import { assertZipInflateWithin, raceSignal } from './zip-guard';
import type { DriveTextExtractor } from './drive-text.engine';

/** mammoth-docx-v1: the raw text of a Word document (paragraphs separated by blank lines), with mammoth. */
export function createDocxExtractor(): DriveTextExtractor {
  return {
    name: 'mammoth-docx-v1',
    async extract(bytes, { signal, maxInflatedBytes }) {
      await assertZipInflateWithin(bytes, signal, maxInflatedBytes);
      const r = await raceSignal(mammoth.extractRawText({ buffer: bytes }), signal);
      const text = r.value
        .replace(/\r\n?/g, '\n')
        .replace(/\n{3,}/g, '\n\n')
        .trim();
      return { text, truncated: false };
    },
  };
}
