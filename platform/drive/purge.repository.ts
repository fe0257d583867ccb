import type { Store } from '../infra/mongo';
import { usageIdOf } from './access';
import { driveCollections } from './drive.repository';
import type { DriveFileDoc } from './drive.types';

/** The queries of the trash purge (platform/drive/purge.ts holds its steps and their order). */

export type PurgeFile = Pick<DriveFileDoc, '_id' | 'accountId' | 'teamId' | 'blobId' | 'sizeBytes'>;

/** Files past the trash window and unclaimed, or whose claim is older than `staleClaim`; at most `limit`. */
export const findDuePurges = (store: Store, cutoff: Date, staleClaim: Date, limit: number) =>
  driveCollections(store)
    .files.find(
      {
        $or: [
          { trashedAt: { $ne: null, $lte: cutoff }, purgingAt: null },
          { purgingAt: { $ne: null, $lt: staleClaim } },
        ],
      },
      { projection: { _id: 1, accountId: 1, teamId: 1, blobId: 1, sizeBytes: 1 } },
    )
    .limit(limit)
    .toArray();

/** Sets `purgingAt` = now on a file due or whose claim is older than `staleClaim`; true when it did. */
export async function claimPurge(
  store: Store,
  file: PurgeFile,
  cutoff: Date,
  staleClaim: Date,
  now: Date,
): Promise<boolean> {
  const r = await driveCollections(store).files.updateOne(
    {
      _id: file._id,
      $or: [{ trashedAt: { $ne: null, $lte: cutoff }, purgingAt: null }, { purgingAt: { $ne: null, $lt: staleClaim } }],
    },
    { $set: { purgingAt: now } },
  );
  return r.modifiedCount === 1;
}

export async function deletePurgedText(store: Store, file: PurgeFile): Promise<void> {
  await driveCollections(store).texts.deleteOne({ _id: file._id });
}

/** Moves the meter once per file (`purgedRefs` is the marker), and only while the file is claimed. */
export async function meterPurge(store: Store, file: PurgeFile): Promise<void> {
  const { files, usage } = driveCollections(store);
  if (!(await files.findOne({ _id: file._id, purgingAt: { $ne: null } }, { projection: { _id: 1 } }))) return;
  await usage.updateOne(
    { _id: usageIdOf(file), purgedRefs: { $ne: file._id } },
    { $inc: { bytesUsed: -file.sizeBytes, fileCount: -1 }, $push: { purgedRefs: file._id } },
  );
}

export async function deletePurgedRecord(store: Store, file: PurgeFile): Promise<void> {
  await driveCollections(store).files.deleteOne({ _id: file._id, purgingAt: { $ne: null } });
}

export async function unmarkPurge(store: Store, file: PurgeFile): Promise<void> {
  await driveCollections(store).usage.updateOne({ _id: usageIdOf(file) }, { $pullAll: { purgedRefs: [file._id] } });
}
