import type { DriveTextExtractor } from './drive-text.engine';
import { readXlsx } from './xlsx-reader';
import { assertZipInflateWithin, OFFICE_INFLATED_BYTES_MAX } from './zip-guard';

/** Cells read at most over all sheets. */
export const XLSX_MAX_CELLS = 500_000;

/**
 * ooxml-xlsx-v1: every worksheet in workbook order, a `# <sheet name>` line, then each row with a
 * value as one line of tab-separated cell texts (xlsx-reader.ts says what each kind of cell
 * shows: strings and rich text as plain text, numbers as JavaScript prints them, dates in ISO
 * 8601, formulas by their cached value); a missing cell keeps its column, empty trailing cells
 * are dropped. Stops once the text passes `maxChars` or the cells read pass `maxCells`
 * (XLSX_MAX_CELLS), with `truncated`.
 */
export function createXlsxExtractor(opts: { maxCells?: number } = {}): DriveTextExtractor {
  const maxCells = opts.maxCells ?? XLSX_MAX_CELLS;
  return {
    name: 'ooxml-xlsx-v1',
    async extract(bytes, { signal, maxChars, maxInflatedBytes = OFFICE_INFLATED_BYTES_MAX }) {
      const zip = await assertZipInflateWithin(bytes, signal, maxInflatedBytes);
      const lines: string[] = [];
      let chars = -1; // the text's length: lines joined by newlines
      let cells = 0;
      let truncated = false;
      const add = (line: string) => {
        lines.push(line);
        chars += line.length + 1;
        truncated = chars > maxChars;
        return !truncated;
      };
      await readXlsx(
        zip,
        {
          sheet: (name) => add(`# ${name}`),
          row: (texts, read) => {
            cells += read;
            if (cells > maxCells) {
              truncated = true;
              return false;
            }
            return texts.length ? add(texts.join('\t')) : true;
          },
        },
        { signal, maxPartBytes: maxInflatedBytes },
      );
      return { text: lines.join('\n'), truncated };
    },
  };
}
