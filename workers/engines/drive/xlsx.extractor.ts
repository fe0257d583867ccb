import ExcelJS from 'exceljs';
import { assertZipInflateWithin, raceSignal } from './zip-guard';
import type { DriveTextExtractor } from './drive-text.engine';

/** Cells read at most over all sheets. */
export const XLSX_MAX_CELLS = 500_000;

/**
 * exceljs-xlsx-v1: every sheet in workbook order, a `# <sheet name>` line, then each row with a
 * value as one line of tab-separated cell texts (as Excel shows them: formatted numbers and
 * dates, formula results, rich text as plain text); empty trailing cells dropped.
 */
export function createXlsxExtractor(): DriveTextExtractor {
  return {
    name: 'exceljs-xlsx-v1',
    async extract(bytes, { signal, maxChars, maxInflatedBytes }) {
      await assertZipInflateWithin(bytes, signal, maxInflatedBytes);
      const wb = new ExcelJS.Workbook();
      await raceSignal(wb.xlsx.load(bytes as unknown as ArrayBuffer), signal);
      const lines: string[] = [];
      let chars = 0;
      let cells = 0;
      let truncated = false;
      outer: for (const ws of wb.worksheets) {
        signal.throwIfAborted();
        lines.push(`# ${ws.name}`);
        chars += ws.name.length + 3;
        for (let r = 1; r <= ws.rowCount; r++) {
          const row = ws.getRow(r);
          if (!row.hasValues) continue;
          const vals: string[] = [];
          for (let c = 1; c <= row.cellCount; c++) {
            let t = '';
            try {
              t = row.getCell(c).text ?? '';
            } catch {
              t = '';
            }
            vals.push(t.replace(/[\t\r\n]+/g, ' '));
          }
          cells += row.cellCount;
          while (vals.length && vals[vals.length - 1] === '') vals.pop();
          if (!vals.length) continue;
          const line = vals.join('\t');
          lines.push(line);
          chars += line.length + 1;
          if (chars > maxChars || cells > XLSX_MAX_CELLS) {
            truncated = cells > XLSX_MAX_CELLS;
            break outer;
          }
        }
      }
      return { text: lines.join('\n'), truncated };
    },
  };
}
