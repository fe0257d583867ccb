import type { DriveFileDoc } from '../../../platform/drive/drive.types';

/**
 * Text extraction for Drive files (the drive pool): one extractor per format, picked by the file's
 * kind, MIME type and extension. Engine names say what they are and are stored with the text.
 * WARNING: engine names are persisted (DriveTextDoc.engine, file.text.engine); add, never rename.
 * `exceljs-xlsx-v1` no longer runs (ooxml-xlsx-v1 reads XLSX now) but names texts stored before.
 */
export const DRIVE_TEXT_ENGINES = [
  'pdfjs-text-v1',
  'mammoth-docx-v1',
  'exceljs-xlsx-v1',
  'ooxml-xlsx-v1',
  'pptx-xml-v1',
  'utf8-text-v1',
] as const;
export type DriveTextEngineName = (typeof DRIVE_TEXT_ENGINES)[number];

export interface DriveExtracted {
  text: string;
  /** The extractor stopped before the end (page, sheet or character limit). */
  truncated: boolean;
}

export interface DriveExtractContext {
  /** Aborted at the time limit: stop and throw. */
  signal: AbortSignal;
  /** Characters worth producing (the stored cap): an extractor may stop once it has this many. */
  maxChars: number;
  /** Bytes an Office file (a ZIP) may really inflate to in all (zip-guard.ts; default OFFICE_INFLATED_BYTES_MAX). */
  maxInflatedBytes?: number;
}

export interface DriveTextExtractor {
  readonly name: DriveTextEngineName;
  /** Throws NotTextError when the bytes hold no text of this format (stored as `none`); anything else is `failed`. */
  extract(bytes: Buffer, ctx: DriveExtractContext): Promise<DriveExtracted>;
}

/** The bytes are not text of the expected format (invalid UTF-8, a binary file named .txt): status `none`. */
export class NotTextError extends Error {
  override name = 'NotTextError';
}

/** The file would take more work than the drive pool allows (inflated size, cells): status `failed` with this reason. */
export class TooLargeError extends Error {
  override name = 'TooLargeError';
}

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
const PPTX = 'application/vnd.openxmlformats-officedocument.presentationml.presentation';
/** MIME types read as UTF-8 text whatever their kind. */
const TEXT_MIME =
  /^(text\/|application\/(json|xml|javascript|x-javascript|typescript|x-typescript|x-sh|x-yaml|yaml|toml|sql|x-sql|graphql|ld\+json|x-ndjson)\b)/;

export type DriveFormat = 'pdf' | 'docx' | 'xlsx' | 'pptx' | 'text' | null;

/**
 * Which extractor reads a file: PDF by kind; DOCX, XLSX, PPTX by MIME type or extension (the
 * kind says the bytes are an Office document); text and code files, and any text/* MIME type, as
 * UTF-8. Everything else (images, audio, video, archives, legacy .doc/.xls/.ppt, ODF) has no text:
 * null, stored as `none`.
 */
export function formatOf(file: Pick<DriveFileDoc, 'kind' | 'mimeType' | 'ext'>): DriveFormat {
  const { kind, mimeType, ext } = file;
  if (kind === 'pdf') return 'pdf';
  if (kind === 'document' && (mimeType === DOCX || ext === 'docx')) return 'docx';
  if (kind === 'spreadsheet' && (mimeType === XLSX || ext === 'xlsx')) return 'xlsx';
  if (kind === 'presentation' && (mimeType === PPTX || ext === 'pptx')) return 'pptx';
  if (kind === 'text' || kind === 'code') return 'text';
  if (TEXT_MIME.test(mimeType) && !['image', 'video', 'audio', 'archive'].includes(kind)) return 'text';
  return null;
}
