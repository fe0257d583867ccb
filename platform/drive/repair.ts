import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import { createDriveRepository, findDirtyPathDrives } from './drive.repository';
import { settleExpiredDriveReservations } from './reservations.repository';

/** A drive marked `pathsDirtyAt` for longer than this has a folder move that did not finish: its paths are recomputed. */
export const DRIVE_PATHS_GRACE_MS = 60_000;

/** Drives whose paths are repaired per run at most; the next run takes the rest. */
export const PATHS_BATCH = 100;

/**
 * Recompute the folder paths of every drive marked `pathsDirtyAt` more than DRIVE_PATHS_GRACE_MS
 * ago (a folder move whose process died, or whose subtree rewrite failed, between the folder's
 * own update and its descendants'). Each drive is repaired under its folder-tree lock, which does
 * the work when it finds the mark and clears the mark in the update that releases it (only its
 * own holder can clear it, so a move that marked it again meanwhile keeps its mark).
 */
export async function repairDrivePaths(
  rt: { store: Store; log: Logger },
  opts: { now?: Date; limit?: number } = {},
): Promise<{ repaired: number; failed: number }> {
  const now = opts.now ?? new Date();
  const dirty = await findDirtyPathDrives(
    rt.store,
    new Date(now.getTime() - DRIVE_PATHS_GRACE_MS),
    opts.limit ?? PATHS_BATCH,
  );
  const repo = createDriveRepository(rt.store);
  const out = { repaired: 0, failed: 0 };
  for (const { _id } of dirty) {
    try {
      // Taking the lock repairs a marked drive (see withFolderLock); nothing else to do under it.
      await repo.withFolderLock(_id, async () => undefined);
      out.repaired++;
    } catch (err) {
      out.failed++;
      rt.log.warn('drive folder paths not repaired; a later run tries again', { drive: _id, err: err as Error });
    }
  }
  if (out.repaired || out.failed) rt.log.info('drive folder paths repaired', out);
  return out;
}

/**
 * The scheduler's `drive.repair`: what a crash in the middle of a Drive write leaves behind.
 * Upload reservations past their grace (bytes deleted and the meter given back, or just the
 * reservation when the file was recorded), then folder paths a move left stale.
 */
export async function repairDrive(rt: { store: Store; log: Logger }, opts: { now?: Date } = {}) {
  const reservations = await settleExpiredDriveReservations(rt, opts);
  const paths = await repairDrivePaths(rt, opts);
  return { reservations, paths };
}
