import type { Readable } from 'node:stream';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import { deleteDriveBlob, putDriveBlob, type StoredDriveBlob } from './blobs.repository';
import { createDriveRepository, driveCollections } from './drive.repository';
import type { DriveReservationDoc } from './drive.types';

/**
 * How long an upload's reservation is left to the upload (from its start, and again from right
 * before its record is inserted); after that the scheduler's `drive.repair` settles it.
 */
export const DRIVE_RESERVATION_GRACE_MS = 10 * 60_000;

/** How long a settler's claim keeps other settlers off a reservation (a settler that died is resumed after it). */
export const DRIVE_RESERVATION_CLAIM_MS = 5 * 60_000;

/** Reservations settled per run at most; the next run takes the rest. */
export const RESERVATION_BATCH = 200;

const reservationsOf = (store: Store) => driveCollections(store).reservations;

/** A new reservation for an upload of `bytes` to the drive `drive` (not stored yet: see `driveUploadSteps.open`). */
export function newDriveReservation(
  input: { drive: string; accountId: string; bytes: number; fileId: string },
  now = new Date(),
): DriveReservationDoc {
  return {
    _id: newId('drs'),
    ...input,
    blobId: newId('dbb'),
    createdAt: now,
    until: new Date(now.getTime() + DRIVE_RESERVATION_GRACE_MS),
    settlingAt: null,
  };
}

/**
 * The steps of an upload around its storage meter, in order (platform/drive/drive.service.ts
 * `create`). No transaction spans them, so the order leaves every crash repairable: the
 * reservation document is stored before the meter moves, the meter records the reservation in
 * the very update that reserves it (`reservedRefs`), the bytes go under a GridFS id known from
 * the start, and the reservation goes last. A reservation left behind is settled by
 * `settleDriveReservation`. Exported as an object so tests can make one step fail (or, for the
 * cleanup, not run: a crash).
 */
export const driveUploadSteps = {
  /** 1. The reservation document, before anything else. */
  async open(store: Store, r: DriveReservationDoc): Promise<void> {
    await reservationsOf(store).insertOne(r);
  },
  /** 2. The meter: one conditional `$inc` that also records the reservation (413 past the quota). */
  async reserve(store: Store, r: DriveReservationDoc, quota: number): Promise<void> {
    await createDriveRepository(store).reserve(r.drive, r.bytes, quota, r._id);
  },
  /** 3. The bytes, under the reservation's blob id. */
  async bytes(
    store: Store,
    r: DriveReservationDoc,
    data: Buffer | Readable,
    meta: { contentType: string; filename: string },
  ): Promise<StoredDriveBlob> {
    return putDriveBlob(store, data, { ...meta, accountId: r.accountId, fileId: r.fileId, blobId: r.blobId });
  },
  /**
   * 4. Right before the record: keep settlers off for another grace period, unless one took the
   * reservation over already (the upload stalled past its grace): then the upload must not
   * insert its record (the settler is deleting its bytes) and fails with 409 conflict.
   */
  async commit(store: Store, r: DriveReservationDoc): Promise<void> {
    const res = await reservationsOf(store).updateOne(
      { _id: r._id, settlingAt: null },
      { $set: { until: new Date(Date.now() + DRIVE_RESERVATION_GRACE_MS) } },
    );
    if (res.matchedCount !== 1) throw new AppError('conflict', 'the upload took too long and was given up; try again');
  },
  /** 5. The record exists: the meter keeps the bytes, the marker and then the reservation go. */
  async close(store: Store, r: DriveReservationDoc): Promise<void> {
    await createDriveRepository(store).keepReserved(r.drive, r._id);
    await reservationsOf(store).deleteOne({ _id: r._id });
  },
  /** The meter refused the reservation (413, or it kept changing): it never moved, so only the document goes. */
  async discard(store: Store, r: DriveReservationDoc): Promise<void> {
    await reservationsOf(store).deleteOne({ _id: r._id });
  },
  /** The upload failed after step 1: settle it now (bytes deleted, meter given back if it moved), as the scheduler would. */
  async abort(store: Store, r: DriveReservationDoc): Promise<void> {
    await settleDriveReservation(store, r._id);
  },
};

/**
 * Settle one reservation: claim it (`settlingAt`, so one settler works on it at a time; a claim
 * older than DRIVE_RESERVATION_CLAIM_MS is taken over), then
 * - its file record exists (the upload finished, its process died before step 5): the meter
 *   keeps the bytes; marker and reservation go ('kept');
 * - otherwise: the bytes go (GridFS chunks, then the files document: never orphan chunks), the
 *   meter is given back if it holds the reservation (one conditional update, so once however
 *   often this runs), then the reservation goes ('released').
 * Every step is safe to repeat, and the reservation goes last, so a settle that dies half-way is
 * finished by the next. `expiredBefore` settles it only when its `until` is before then (the
 * scheduler). 'gone' when there was nothing to claim (settled, or another settler holds it).
 */
export async function settleDriveReservation(
  store: Store,
  id: string,
  opts: { expiredBefore?: Date; now?: Date } = {},
): Promise<'kept' | 'released' | 'gone'> {
  const now = opts.now ?? new Date();
  const reservations = reservationsOf(store);
  const r = await reservations.findOneAndUpdate(
    {
      _id: id,
      ...(opts.expiredBefore ? { until: { $lt: opts.expiredBefore } } : {}),
      $or: [{ settlingAt: null }, { settlingAt: { $lt: new Date(now.getTime() - DRIVE_RESERVATION_CLAIM_MS) } }],
    },
    { $set: { settlingAt: now } },
    { returnDocument: 'after' },
  );
  if (!r) return 'gone';
  const repo = createDriveRepository(store);
  if ((await driveCollections(store).files.countDocuments({ _id: r.fileId, accountId: r.accountId })) > 0) {
    await repo.keepReserved(r.drive, r._id);
    await reservations.deleteOne({ _id: r._id });
    return 'kept';
  }
  await deleteDriveBlob(store, r.blobId);
  await repo.release(r.drive, r.bytes, r._id);
  await reservations.deleteOne({ _id: r._id });
  return 'released';
}

/**
 * The reservations of uploads whose process died (past their `until`: see the grace above),
 * each settled by `settleDriveReservation`. Safe to run twice at once (two schedulers): the claim
 * lets one settler through, and the meter moves at most once per reservation anyway.
 */
export async function settleExpiredDriveReservations(
  rt: { store: Store; log: Logger },
  opts: { now?: Date; limit?: number } = {},
): Promise<{ kept: number; released: number; failed: number }> {
  const now = opts.now ?? new Date();
  const due = await reservationsOf(rt.store)
    .find({ until: { $lt: now } }, { projection: { _id: 1 } })
    .limit(opts.limit ?? RESERVATION_BATCH)
    .toArray();
  const out = { kept: 0, released: 0, failed: 0 };
  for (const { _id } of due) {
    try {
      const r = await settleDriveReservation(rt.store, _id, { expiredBefore: now, now });
      if (r !== 'gone') out[r]++;
    } catch (err) {
      out.failed++;
      rt.log.warn('drive reservation not settled; a later run resumes it', { reservationId: _id, err: err as Error });
    }
  }
  if (out.kept || out.released || out.failed) rt.log.info('drive reservations settled', out);
  return out;
}
