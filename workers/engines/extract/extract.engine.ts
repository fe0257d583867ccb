import type { ExtractEngineName, ExtractMimeType } from '../../../contracts/extract';

/**
 * What a text extractor gives back: the document's text, one line per line of the document, with
 * headings written as Markdown (`# Heading`) where the document shows them (larger type, a slide
 * title placeholder), so that text-structure-v1 (flowchart.ts) can read the structure.
 */
export interface ExtractedText {
  engine: ExtractEngineName;
  text: string;
  /** A title the document declares apart from its text (PDF Title), or null. */
  metadataTitle: string | null;
  /** Pages (PDF), slides (PPTX) or 1 (image) read. */
  pages: number;
  ocr: boolean;
  /** Something was left out (page limit, unreadable parts). */
  truncated: boolean;
  notes: string[];
}

/**
 * Reads the text out of one kind of document. Throws AppError `unreadable_document` when the
 * bytes cannot be read as that kind; stops when `signal` aborts (the caller's deadline).
 */
export interface TextExtractor {
  readonly name: ExtractEngineName;
  readonly mimeTypes: readonly ExtractMimeType[];
  extract(bytes: Buffer, ctx: { signal: AbortSignal }): Promise<ExtractedText>;
}

/** A line of a page with the size of its type (PDF font size, OCR line height). */
export interface SizedLine {
  text: string;
  size: number;
}

/**
 * Lines to text, with lines set clearly larger than the body type written as `# Heading`. The
 * body size is the median size per character (half of the text is set at most that large); a
 * heading is at least `ratio` times it and at most 120 characters.
 */
export function linesToText(lines: SizedLine[], ratio = 1.3): string {
  const sized = lines.filter((l) => l.text.length > 0).sort((a, b) => a.size - b.size);
  const total = sized.reduce((n, l) => n + l.text.length, 0);
  let body = 0;
  for (let seen = 0, i = 0; i < sized.length && seen * 2 < total; i++) {
    seen += sized[i]!.text.length;
    body = sized[i]!.size;
  }
  return lines
    .map((l) =>
      body > 0 && l.size >= body * ratio && l.text.length <= 120 && !/^#/.test(l.text) ? `# ${l.text}` : l.text,
    )
    .join('\n');
}
