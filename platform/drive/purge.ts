import type { Config } from '../infra/config';
import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import { deleteDriveBlob } from './blobs.repository';
import {
  claimPurge,
  deletePurgedRecord,
  deletePurgedText,
  findDuePurges,
  meterPurge,
  type PurgeFile,
  unmarkPurge,
} from './purge.repository';
import { removeDriveTextIndex } from './search-index.repository';

/** Files purged per run at most; the next run takes the rest. */
export const PURGE_BATCH = 200;

/**
 * How long a claim (`purgingAt`) keeps other runs off a file. A run that died mid-purge is
 * resumed by the first run after it: never two runs on one file at once (Agenda keeps one run
 * at a time, but its lock expires after a minute, and a run may take longer).
 */
export const PURGE_CLAIM_MS = 10 * 60_000;

/**
 * The steps of one file's purge, in order. Each is safe to repeat, so a purge a crash (or an
 * error) interrupted at any step is finished by the next run. Exported as an object so tests can
 * make one step fail once.
 */
export const purgeSteps = {
  /**
   * 1. Claim the file: `purgingAt` = now, when it is past the trash window and unclaimed, or its
   * claim is older than PURGE_CLAIM_MS (a run that died: resume it). From here on restore
   * refuses it and every reader treats it as gone. False: restored meanwhile, or another run
   * holds it.
   */
  async mark(store: Store, file: PurgeFile, cutoff: Date, now: Date): Promise<boolean> {
    return claimPurge(store, file, cutoff, new Date(now.getTime() - PURGE_CLAIM_MS), now);
  },
  /** 2. The extracted text. */
  async text(store: Store, file: PurgeFile): Promise<void> {
    await deletePurgedText(store, file);
  },
  /** 3. The file's search postings, pages and forward document (the search index's own removal). */
  async tokens(store: Store, file: PurgeFile): Promise<void> {
    await removeDriveTextIndex(store, file);
  },
  /** 4. The bytes: GridFS chunks first, then the files document (never orphan chunks). */
  async bytes(store: Store, file: PurgeFile): Promise<void> {
    await deleteDriveBlob(store, file.blobId);
  },
  /**
   * 5. The storage meter: ONE conditional update that moves the meter and records the file in
   * `purgedRefs` (the marker), matching only while the marker is absent, so a repeat never counts
   * it twice. The marker stays until the record is gone (step 7); a run that stalled past its
   * claim and wakes after another run finished the file (record and marker gone) finds no
   * claimed record and leaves the meter alone.
   */
  async meter(store: Store, file: PurgeFile): Promise<void> {
    await meterPurge(store, file);
  },
  /** 6. The record (only a claimed file). */
  async record(store: Store, file: PurgeFile): Promise<void> {
    await deletePurgedRecord(store, file);
  },
  /**
   * 7. The meter marker, last: the record is gone, so no run can reach the meter step for this
   * file again; the marker list stays as short as the purges in flight. Only removes: safe to repeat.
   */
  async unmark(store: Store, file: PurgeFile): Promise<void> {
    await unmarkPurge(store, file);
  },
};

/**
 * The end of the trash window (SPEC 3.5; the scheduler's `drive.purge` task): every file trashed
 * more than DRIVE_TRASH_DAYS ago is purged for good: its extracted text, its search postings, its
 * bytes (GridFS chunks, then the files document), its share of the storage meter, and finally
 * its record. There is no way back and no permanent delete in the API: this is the only one.
 *
 * Resumable and idempotent: the file is claimed first (`purgingAt`), every step can be repeated,
 * the record goes last, so a later run finds the claimed file again (once the claim is older
 * than PURGE_CLAIM_MS) and finishes it. A file that fails is logged and left for a later run;
 * the others go on.
 */
export async function purgeTrashedDriveFiles(
  rt: { store: Store; log: Logger; config: Pick<Config, 'DRIVE_TRASH_DAYS'> },
  opts: { now?: Date; limit?: number } = {},
): Promise<{ purged: number; failed: number }> {
  const now = opts.now ?? new Date();
  const cutoff = new Date(now.getTime() - rt.config.DRIVE_TRASH_DAYS * 86_400_000);
  const due = await findDuePurges(
    rt.store,
    cutoff,
    new Date(now.getTime() - PURGE_CLAIM_MS),
    opts.limit ?? PURGE_BATCH,
  );
  let purged = 0;
  let failed = 0;
  for (const file of due) {
    try {
      if (!(await purgeSteps.mark(rt.store, file, cutoff, now))) continue; // restored meanwhile, or another run has it
      await purgeSteps.text(rt.store, file);
      await purgeSteps.tokens(rt.store, file);
      await purgeSteps.bytes(rt.store, file);
      await purgeSteps.meter(rt.store, file);
      await purgeSteps.record(rt.store, file);
      purged++;
      // The file is gone for good; a marker left behind only costs a few bytes on the meter document.
      await purgeSteps
        .unmark(rt.store, file)
        .catch((err: unknown) =>
          rt.log.warn('drive purge: meter marker not removed', { fileId: file._id, err: err as Error }),
        );
    } catch (err) {
      failed++;
      rt.log.warn('drive purge of a file failed; a later run resumes it', { fileId: file._id, err: err as Error });
    }
  }
  if (purged || failed) rt.log.info('drive trash purged', { purged, failed });
  return { purged, failed };
}
