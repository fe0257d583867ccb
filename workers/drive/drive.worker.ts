import { z } from 'zod';
import { openDriveBlob } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc } from '../../platform/drive/drive.types';
import { cutAtWord, recordDriveText, type DriveTextOutcome } from '../../platform/drive/text';
import { createDriveTexts } from '../../platform/drive/text.repository';
import type { DriveTextRequest } from '../../platform/drive/text-queue';
import type { Store } from '../../platform/infra/mongo';
import type { Runtime } from '../../platform/runtime';
import {
  formatOf,
  NotTextError,
  TooLargeError,
  type DriveFormat,
  type DriveTextExtractor,
} from '../engines/drive/drive-text.engine';
import { createDocxExtractor } from '../engines/drive/docx.extractor';
import { createDrivePdfExtractor } from '../engines/drive/pdf.extractor';
import { createDrivePptxExtractor } from '../engines/drive/pptx.extractor';
import { createUtf8Extractor } from '../engines/drive/utf8.extractor';
import { createXlsxExtractor } from '../engines/drive/xlsx.extractor';
import type { ConsumerContext, ConsumerDefinition } from '../pool/consumer';

/** Hard limits of one extraction (whatever the upload limits are). */
export const DRIVE_TEXT_WORK_LIMITS = {
  /** Files larger than this are not read (text status `failed`, reason given). */
  maxBytes: 32 * 1024 * 1024,
  /** An extraction still running after this is stopped (status `failed`). */
  timeoutMs: 60_000,
  /** A message delivered this many times without an ack (the extraction stopped the worker) is given up (status `failed`). */
  maxDeliveries: 3,
} as const;

/** The drive pool message (platform/drive/text-queue.ts). */
export const DriveTextMessage = z.object({ fileId: z.string().min(1).max(128), accountId: z.string().min(1).max(128) });

const EXTRACTORS: Record<Exclude<DriveFormat, null>, () => DriveTextExtractor> = {
  pdf: createDrivePdfExtractor,
  docx: createDocxExtractor,
  xlsx: createXlsxExtractor,
  pptx: createDrivePptxExtractor,
  text: createUtf8Extractor,
};

type Outcome = DriveTextOutcome;

/** Read a blob whole, refusing more than `max` bytes. */
async function readBlob(store: Store, blobId: string, max: number, signal: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const stream = openDriveBlob(store, blobId);
  const stop = () => stream.destroy(signal.reason as Error);
  signal.addEventListener('abort', stop, { once: true });
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > max) {
        stream.destroy();
        throw new TooLargeError(`the file is larger than the ${Math.round(max / 1048576)} MB the drive pool reads`);
      }
      chunks.push(chunk);
    }
  } finally {
    signal.removeEventListener('abort', stop);
  }
  return Buffer.concat(chunks, size);
}

/** Run the extractor of the file's format, within the work limits. Throws only when the worker itself is stopping. */
async function extract(rt: Runtime, file: DriveFileDoc, ctx: ConsumerContext): Promise<Outcome> {
  const format = formatOf(file);
  if (!format) return { status: 'none', engine: null, error: null };
  const extractor = EXTRACTORS[format]();
  if (file.sizeBytes > DRIVE_TEXT_WORK_LIMITS.maxBytes) {
    return {
      status: 'failed',
      engine: extractor.name,
      error: `the file is larger than the ${DRIVE_TEXT_WORK_LIMITS.maxBytes / 1048576} MB the drive pool reads`,
    };
  }
  const timeout = AbortSignal.timeout(DRIVE_TEXT_WORK_LIMITS.timeoutMs);
  const signal = AbortSignal.any([ctx.signal, timeout]);
  const maxChars = rt.config.DRIVE_TEXT_STORED_CHARS;
  try {
    const bytes = await readBlob(rt.store, file.blobId, DRIVE_TEXT_WORK_LIMITS.maxBytes, signal);
    const r = await extractor.extract(bytes, {
      signal,
      maxChars,
      maxInflatedBytes: rt.config.DRIVE_TEXT_INFLATED_MAX_BYTES,
    });
    const text = r.text.replace(/\u0000/g, '').trim();
    if (!text) return { status: 'none', engine: extractor.name, error: null };
    const capped = cutAtWord(text, maxChars);
    return { status: 'ready', text: capped.text, truncated: r.truncated || capped.cut, engine: extractor.name };
  } catch (err) {
    if (ctx.signal.aborted) throw err; // stopping: the message goes back to the queue
    if (err instanceof NotTextError) return { status: 'none', engine: extractor.name, error: err.message };
    if (timeout.aborted)
      return {
        status: 'failed',
        engine: extractor.name,
        error: `extraction took longer than ${DRIVE_TEXT_WORK_LIMITS.timeoutMs / 1000} s`,
      };
    const message = err instanceof Error ? err.message : String(err);
    ctx.log.warn('drive text extraction failed', { fileId: file._id, engine: extractor.name, err: err as Error });
    return { status: 'failed', engine: extractor.name, error: message.slice(0, 300) };
  }
}

/**
 * Extract, store and index the text of one file, then mark it (text.status ready | none | failed)
 * with a conditional update that only moves a `pending` file that is still live: a file trashed
 * or purged meanwhile is skipped. Idempotent: a file no longer pending is left as it is, and a
 * repeated run (redelivery, sweep) rewrites the same text and index entries. The status moves
 * last, so a crash before it leaves `pending` for the redelivery or the sweep.
 */
export async function extractDriveText(
  rt: Runtime,
  req: DriveTextRequest,
  ctx: ConsumerContext,
): Promise<'skipped' | Outcome['status']> {
  const mine = createDriveTexts(rt.store).forAccount(req.accountId);
  const file = await mine.liveFile(req.fileId);
  if (!file || (file.text && file.text.status !== 'pending')) return 'skipped';
  let outcome: Outcome;
  if (ctx.priorDeliveries >= DRIVE_TEXT_WORK_LIMITS.maxDeliveries) {
    outcome = {
      status: 'failed',
      engine: null,
      error: `the extraction stopped the worker ${ctx.priorDeliveries} times; given up`,
    };
  } else {
    outcome = await extract(rt, file, ctx);
  }
  return (await recordDriveText(rt.store, file, outcome, () => mine.liveFile(req.fileId))) ? outcome.status : 'skipped';
}

/** The drive pool: text extraction after upload (SPEC 4.10 GET …/text, search). */
export function driveWorker(rt: Runtime): ConsumerDefinition<DriveTextRequest> {
  return {
    pool: 'drive',
    input: DriveTextMessage,
    async handle(req, ctx) {
      const outcome = await extractDriveText(rt, req, ctx);
      ctx.log.debug('drive text', { fileId: req.fileId, outcome });
    },
  };
}
