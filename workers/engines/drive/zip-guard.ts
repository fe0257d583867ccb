import JSZip from 'jszip';
import { TooLargeError } from './drive-text.engine';

/** Bytes an Office file (a ZIP) may inflate to in all, for the drive pool (a 4 MB upload is far below; a ZIP bomb is not). */
export const OFFICE_INFLATED_BYTES_MAX = 100 * 1024 * 1024;

/**
 * Refuse a ZIP whose entries declare more than OFFICE_INFLATED_BYTES_MAX once inflated (read from
 * the central directory, nothing inflated), before mammoth or exceljs inflate it whole.
 */
export async function assertZipInflateWithin(bytes: Buffer, signal: AbortSignal, max = OFFICE_INFLATED_BYTES_MAX): Promise<void> {
  signal.throwIfAborted();
  let zip: JSZip;
  try {
    zip = await JSZip.loadAsync(bytes, { checkCRC32: false });
  } catch (err) {
    throw new Error(`the file is not a readable ZIP container (${(err as Error).message})`);
  }
  let total = 0;
  for (const f of Object.values(zip.files)) {
    const size = (f as unknown as { _data?: { uncompressedSize?: number } })._data?.uncompressedSize ?? 0;
    total += size;
    if (total > max) throw new TooLargeError(`the document inflates to more than ${Math.round(max / 1048576)} MB`);
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
