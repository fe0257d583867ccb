import JSZip from 'jszip';
import { TooLargeError } from './drive-text.engine';

/** Bytes an Office file (a ZIP) may inflate to in all, for the drive pool (a 4 MB upload is far below; a ZIP bomb is not). */
export const OFFICE_INFLATED_BYTES_MAX = 100 * 1024 * 1024;

/** JSZip's internal stream of one entry (the pull API readPart in workers/engines/extract/pptx.extractor.ts uses). */
interface EntryStream {
  on(event: 'data', cb: (chunk: Uint8Array) => void): EntryStream;
  on(event: 'error', cb: (err: Error) => void): EntryStream;
  on(event: 'end', cb: () => void): EntryStream;
  pause(): EntryStream;
  resume(): EntryStream;
}

const tooLarge = (max: number) => new TooLargeError(`the document inflates to more than ${Math.round(max / 1048576)} MB`);

/** Inflate one entry, keeping nothing, counting its bytes; rejects once `budget` is spent. Resolves with the bytes counted. */
function inflatedSize(file: JSZip.JSZipObject, budget: number, max: number, signal: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    let size = 0;
    let done = false;
    const stream = (file as unknown as { internalStream(type: 'uint8array'): EntryStream }).internalStream('uint8array');
    const stop = (err: Error) => {
      if (done) return;
      done = true;
      stream.pause();
      reject(err);
    };
    stream
      .on('data', (chunk) => {
        if (done) return;
        size += chunk.length;
        if (size > budget) return stop(tooLarge(max));
        if (signal.aborted) return stop(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      })
      .on('error', (err) => stop(new Error(`the file is not a readable ZIP container (${file.name} cannot be inflated: ${err.message})`)))
      .on('end', () => {
        if (done) return;
        done = true;
        resolve(size);
      })
      .resume();
  });
}

/**
 * Refuse a ZIP that inflates to more than `max` bytes in all, before mammoth or exceljs inflate it
 * whole (they take no limit). The sizes the archive declares are checked first (nothing inflated),
 * then every entry is really inflated through JSZip's stream, bytes counted and dropped, and the
 * walk stops as soon as the total passes `max`: a ZIP whose headers lie about its sizes is
 * refused after at most `max` bytes of work, never held in memory.
 */
export async function assertZipInflateWithin(bytes: Buffer, signal: AbortSignal, max = OFFICE_INFLATED_BYTES_MAX): Promise<void> {
  signal.throwIfAborted();
  let zip: JSZip;
  try {
    zip = await JSZip.loadAsync(bytes, { checkCRC32: false });
  } catch (err) {
    throw new Error(`the file is not a readable ZIP container (${(err as Error).message})`);
  }
  const entries = Object.values(zip.files).filter((f) => !f.dir);
  let declared = 0;
  for (const f of entries) {
    declared += (f as unknown as { _data?: { uncompressedSize?: number } })._data?.uncompressedSize ?? 0;
    if (declared > max) throw tooLarge(max);
  }
  let total = 0;
  for (const f of entries) {
    signal.throwIfAborted();
    total += await inflatedSize(f, max - total, max, signal);
  }
}

/** `p`, or a rejection with the signal's reason once it aborts (for libraries that take no signal). */
export function raceSignal<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
