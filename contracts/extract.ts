import { z } from 'zod';
import { line } from './common';
import { FlowchartContent, Project } from './projects';

/**
 * POST /extract-flowchart (SPEC 2.9, 4.7): a PDF, PPTX or image in, a flowchart project out.
 * The API checks the document (encoding, size, that the bytes are of the declared type) before
 * anything is charged; the `extract` pool reads its text (pdfjs, slide XML, tesseract OCR) and
 * turns the text's structure into nodes and edges.
 */

export const PPTX_MIME = 'application/vnd.openxmlformats-officedocument.presentationml.presentation';

/** SPEC 2.9 document types. WARNING: public contract. */
export const EXTRACT_MIME_TYPES = ['application/pdf', PPTX_MIME, 'image/png', 'image/jpeg', 'image/webp'] as const;
export type ExtractMimeType = (typeof EXTRACT_MIME_TYPES)[number];

/** SPEC 8: the document is at most 10 MB (10 MiB, 10485760 bytes) decoded. */
export const EXTRACT_MAX_BYTES = 10 * 1024 * 1024;
/** Longest documentBase64 that can decode to EXTRACT_MAX_BYTES (padding included). */
export const EXTRACT_MAX_BASE64_CHARS = Math.ceil(EXTRACT_MAX_BYTES / 3) * 4;

/** Canonical base64 (RFC 4648 section 4): A-Z a-z 0-9 + /, `=` padding to a multiple of 4, nothing else. */
// A flat character class (with the length check below): a grouped `(?:x{4})*` overflows the
// regexp stack on a 14-million-character document.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Bytes a canonical base64 string decodes to, computed from its length (no decoding). */
export const decodedLength = (b64: string) =>
  (b64.length / 4) * 3 - (b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0);

/**
 * Why `s` is not acceptable as documentBase64, or null. Checked in this order, each cheap and
 * before any decoding: a data: URL prefix, emptiness, the decoded size (from the length), the
 * alphabet and padding, and canonical trailing bits (the last character before `=` padding
 * carries no stray bits, so one document has exactly one encoding).
 */
export function base64Problem(s: string): string | null {
  if (/^\s*data:/i.test(s.slice(0, 64)))
    return 'must be plain base64 without a data: prefix; strip everything up to and including the first comma (data:<type>;base64,)';
  if (s.length === 0) return 'must not be empty';
  const approx = Math.floor((s.length * 3) / 4);
  if (approx > EXTRACT_MAX_BYTES + 2)
    return `must decode to at most ${EXTRACT_MAX_BYTES} bytes (10 MB); this one decodes to about ${approx} bytes`;
  if (s.length % 4 !== 0 || !BASE64.test(s)) {
    return 'must be canonical base64 (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4 characters; no whitespace, no line breaks, no URL-safe - or _)';
  }
  const size = decodedLength(s);
  if (size > EXTRACT_MAX_BYTES)
    return `must decode to at most ${EXTRACT_MAX_BYTES} bytes (10 MB); this one decodes to ${size} bytes`;
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  if (pad > 0) {
    const last = B64.indexOf(s[s.length - pad - 1]!);
    if ((pad === 2 && (last & 0x0f) !== 0) || (pad === 1 && (last & 0x03) !== 0))
      return 'must be canonical base64: the character before the = padding carries stray bits';
  }
  return null;
}

/** SPEC 2.9 request of POST /extract-flowchart. */
export const ExtractFlowchartRequest = z
  .strictObject({
    documentBase64: z
      .string({ error: 'must be a string' })
      .max(EXTRACT_MAX_BASE64_CHARS, {
        error: `must decode to at most ${EXTRACT_MAX_BYTES} bytes (10 MB)`,
        abort: true,
      })
      .superRefine((s, ctx) => {
        const problem = base64Problem(s);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .meta({ contentEncoding: 'base64' })
      .describe(
        `The document as canonical base64 WITHOUT a data: prefix; at most ${EXTRACT_MAX_BYTES} bytes (10 MB) decoded. The bytes must be of mimeType (sniffed from their content): anything else is 400 naming documentBase64.`,
      ),
    mimeType: z
      .enum(EXTRACT_MIME_TYPES, {
        error: (iss) => (iss.input === undefined ? 'is required' : `must be one of ${EXTRACT_MIME_TYPES.join(', ')}`),
      })
      .describe(
        'What the document is. PDF: text of every page (scanned pages without a text layer have none). PPTX: slide text in slide order. PNG, JPEG, WebP: OCR.',
      ),
    fileName: line(255)
      .optional()
      .describe(
        "The file's name; without its extension it titles the flowchart when the document has no title of its own.",
      ),
  })
  .meta({ id: 'ExtractFlowchartRequest' });
export type ExtractFlowchartRequest = z.infer<typeof ExtractFlowchartRequest>;

/** Engines that read text out of a document. WARNING: public contract (reported in `extraction.engine`). */
export const EXTRACT_ENGINES = ['pdfjs-text-v1', 'pptx-xml-v1', 'tesseract-ocr-v1'] as const;
export type ExtractEngineName = (typeof EXTRACT_ENGINES)[number];

/** Where the flowchart's name came from. */
export const TITLE_SOURCES = ['heading', 'metadata', 'first-line', 'fileName', 'default'] as const;
export type TitleSource = (typeof TITLE_SOURCES)[number];

/** What the extraction found and how. */
export const ExtractionReport = z
  .object({
    engine: z
      .enum(EXTRACT_ENGINES)
      .describe(
        'What read the text: pdfjs-text-v1 (PDF text layer), pptx-xml-v1 (slide XML), tesseract-ocr-v1 (OCR of an image).',
      ),
    layout: z.literal('text-structure-v1').describe('What turned the text into nodes and edges.'),
    mimeType: z.enum(EXTRACT_MIME_TYPES),
    pages: z.number().int().describe('Pages read (PDF), slides read (PPTX), or 1 (image).'),
    characters: z.number().int().describe('Non-blank characters of text found.'),
    ocr: z.boolean().describe('True when the text was read from pixels (images); OCR can misread characters.'),
    titleSource: z
      .enum(TITLE_SOURCES)
      .describe(
        'heading (first heading or slide title), metadata (PDF Title), first-line, fileName (without extension) or default ("Extracted flowchart").',
      ),
    steps: z.number().int().describe('Process nodes made.'),
    decisions: z.number().int().describe('Decision nodes made.'),
    truncated: z
      .boolean()
      .describe(
        'True when the document held more than the flowchart limits (500 nodes, 1000 edges) or the page limit; the rest was left out.',
      ),
    notes: z
      .array(z.string())
      .describe('Plain-language notes: pages without text, pages or steps left out, OCR confidence.'),
  })
  .meta({ id: 'ExtractionReport' });
export type ExtractionReport = z.infer<typeof ExtractionReport>;

/** 201 answer: the flowchart project as GET /projects/{id} shows it, how it was extracted, and what it cost. */
export const ExtractFlowchartResult = Project.extend({
  content: FlowchartContent.describe(
    'Nodes (start, process, decision, note, end) laid out top to bottom on a 280 x 120 px grid, and edges (yes / no labels out of decisions).',
  ),
  extraction: ExtractionReport,
  charged: z
    .number()
    .describe(
      'Credits charged for this extraction (0 when an Idempotency-Key retry found the project a crashed attempt had stored).',
    ),
}).meta({ id: 'ExtractFlowchartResult' });
export type ExtractFlowchartResult = z.infer<typeof ExtractFlowchartResult>;

/**
 * The extract pool's request/reply messages. Internal (API → extract pool), not public; both
 * sides validate them. The document travels as the caller's base64 string, not re-encoded.
 */
export const ExtractRpcRequest = z.object({
  accountId: z.string(),
  documentBase64: z.string().max(EXTRACT_MAX_BASE64_CHARS),
  mimeType: z.enum(EXTRACT_MIME_TYPES),
  fileName: z.string().nullable(),
});
export type ExtractRpcRequest = z.infer<typeof ExtractRpcRequest>;

export const ExtractRpcReply = z.object({
  title: z.string(),
  content: FlowchartContent,
  extraction: ExtractionReport,
});
export type ExtractRpcReply = z.infer<typeof ExtractRpcReply>;
