import { ExtractRpcRequest, type ExtractMimeType, type ExtractRpcReply } from '../../contracts/extract';
import type { Config } from '../../platform/infra/config';
import { AppError } from '../../platform/infra/errors';
import type { Runtime } from '../../platform/runtime';
import type { TextExtractor } from '../engines/extract/extract.engine';
import { LAYOUT_NAME, textToFlowchart } from '../engines/extract/flowchart';
import { createOcrExtractor } from '../engines/extract/ocr.extractor';
import { createPdfExtractor } from '../engines/extract/pdf.extractor';
import { createPptxExtractor } from '../engines/extract/pptx.extractor';
import type { ResponderDefinition } from '../pool/responder';

/** The text extractors of this build: pdfjs for PDF, slide XML for PPTX, tesseract for images. */
export function extractorsFrom(config: Pick<Config, 'EXTRACT_OCR_LANGUAGES'>): TextExtractor[] {
  return [createPdfExtractor(), createPptxExtractor(), createOcrExtractor({ languages: config.EXTRACT_OCR_LANGUAGES })];
}

/**
 * The extract pool (request/reply, POST /extract-flowchart): decode the document, read its text
 * with the extractor of its type, turn the text into a flowchart (text-structure-v1) and answer
 * with the title, the content and a report. The API has already checked the encoding, the size
 * and that the bytes are of the declared type; a document that still cannot be read answers
 * `unreadable_document`, one without text `no_text_found` (the API charges neither).
 */
export function extractResponder(
  rt: Pick<Runtime, 'config'>,
  extractors: TextExtractor[] = extractorsFrom(rt.config),
): ResponderDefinition<ExtractRpcRequest, ExtractRpcReply> {
  const byType = new Map<ExtractMimeType, TextExtractor>();
  for (const e of extractors) for (const m of e.mimeTypes) byType.set(m, e);
  return {
    pool: 'extract',
    input: ExtractRpcRequest,
    async handle(req, ctx) {
      const extractor = byType.get(req.mimeType);
      if (!extractor) throw new AppError('service_unavailable', `this extract worker reads no ${req.mimeType}`);
      const bytes = Buffer.from(req.documentBase64, 'base64');
      const got = await extractor.extract(bytes, { signal: ctx.signal });
      ctx.signal.throwIfAborted();
      const characters = got.text.replace(/^#+\s/gm, '').replace(/\s+/g, '').length;
      if (characters === 0) {
        const what = got.ocr
          ? 'no text could be read in the image'
          : req.mimeType === 'application/pdf'
            ? 'the PDF has no text layer (a scan? send its pages as images to read them with OCR)'
            : 'the slides hold no text';
        throw new AppError('no_text_found', `documentBase64: ${what}; nothing was charged`);
      }
      const chart = textToFlowchart({ text: got.text, metadataTitle: got.metadataTitle, fileName: req.fileName });
      return {
        title: chart.title,
        content: chart.content,
        extraction: {
          engine: got.engine,
          layout: LAYOUT_NAME,
          mimeType: req.mimeType,
          pages: got.pages,
          characters,
          ocr: got.ocr,
          titleSource: chart.titleSource,
          steps: chart.steps,
          decisions: chart.decisions,
          truncated: got.truncated || chart.truncated,
          notes: [...got.notes, ...chart.notes],
        },
      };
    },
  };
}
