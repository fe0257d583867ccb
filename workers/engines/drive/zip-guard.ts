import JSZip from 'jszip';
import { PartInflateError, streamPart } from '../ooxml';
import { TooLargeError } from './drive-text.engine';

/** Bytes an Office file (a ZIP) may inflate to in all, for the drive pool (a 4 MB upload is far below; a ZIP bomb is not). */
export const OFFICE_INFLATED_BYTES_MAX = 100 * 1024 * 1024;

const tooLarge = (max: number) =>
  new TooLargeError(`the document inflates to more than ${Math.round(max / 1048576)} MB`);

/**
 * Refuse a ZIP that inflates to more than `max` bytes in all, before a reader inflates it whole
 * (mammoth takes no limit). The sizes the archive declares are checked first (nothing inflated),
 * then every entry is really inflated through JSZip's stream, bytes counted and dropped, and the
 * walk stops as soon as the total passes `max`: a ZIP whose headers lie about its sizes is
 * refused after at most `max` bytes of work, never held in memory. Resolves with the opened ZIP.
 */
export async function assertZipInflateWithin(
  bytes: Buffer,
  signal: AbortSignal,
  max = OFFICE_INFLATED_BYTES_MAX,
): Promise<JSZip> {
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
    await streamPart(f, signal, (chunk) => {
      total += chunk.length;
      if (total > max) throw tooLarge(max);
    }).catch((err: unknown) => {
      throw err instanceof PartInflateError
        ? new Error(`the file is not a readable ZIP container (${err.message})`)
        : err;
    });
  }
  return zip;
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
