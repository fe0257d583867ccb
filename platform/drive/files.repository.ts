import type { AnyBulkWriteOperation, Filter, UpdateFilter } from 'mongodb';
import { keysetPage, type KeysetOptions } from '../infra/lists';
import type { Store } from '../infra/mongo';
import { updateVersioned } from '../infra/versioned';
import { driveCollections, nameKeyOf, trashedNameKey } from './drive.repository';
import type { DriveFileDoc, DriveFolderDoc } from './drive.types';

/**
 * The queries of the Drive's file and folder routes (platform/drive/drive.service.ts and
 * folders.service.ts hold the checks; a caller's reach is checked there or by createDriveRepository).
 * A bulk action's filters start from the service's `mine` filter: the caller's own, still reachable file.
 */
// Length: one method per query of the two services (16), each a few lines.
export function createDriveFileRows(store: Store) {
  const { files, folders } = driveCollections(store);
  const bump = { $inc: { version: 1 } } as const;
  return {
    page: (filter: Filter<DriveFileDoc>, opts: KeysetOptions) => keysetPage(files, filter, opts),

    insertFile: (d: DriveFileDoc) => files.insertOne(d),

    updateFile: (
      accountId: string,
      id: string,
      update: UpdateFilter<DriveFileDoc>,
      opts: Parameters<typeof updateVersioned<DriveFileDoc>>[4],
    ) => updateVersioned(files, accountId, id, update, opts),

    /** A folder's path, in the drive of `d`. */
    folderPath: (d: Pick<DriveFileDoc, 'accountId' | 'teamId'>, folderId: string) =>
      folders.findOne({ _id: folderId, accountId: d.accountId, teamId: d.teamId }, { projection: { path: 1 } }),

    /** The file, when it is the caller's own or in a team drive (the team is checked after). */
    bulkCandidate: (id: string, accountId: string) =>
      files.findOne({
        _id: id,
        $or: [{ accountId, teamId: null }, { teamId: { $ne: null } }],
      } as Filter<DriveFileDoc>),

    reread: (mine: Filter<DriveFileDoc>) =>
      files.findOne(mine, { projection: { trashedAt: 1, isStarred: 1, folderId: 1, purgingAt: 1 } }),

    /** True when it matched a live file not yet in that state. */
    async star(mine: Filter<DriveFileDoc>, v: boolean, now: Date): Promise<boolean> {
      const r = await files.updateOne(
        { ...mine, trashedAt: null, isStarred: !v },
        { $set: { isStarred: v, updatedAt: now }, ...bump },
      );
      return r.matchedCount === 1;
    },

    async trash(mine: Filter<DriveFileDoc>, id: string, now: Date): Promise<boolean> {
      const r = await files.updateOne(
        { ...mine, trashedAt: null },
        { $set: { trashedAt: now, nameKey: trashedNameKey(id), updatedAt: now }, ...bump },
      );
      return r.matchedCount === 1;
    },

    /** Restores a file trashed since `cutoff` and not being purged, as `name`. */
    async restore(mine: Filter<DriveFileDoc>, cutoff: Date, name: string, ext: string, now: Date): Promise<boolean> {
      const r = await files.updateOne(
        {
          ...mine,
          trashedAt: { $ne: null, $gte: cutoff },
          $or: [{ purgingAt: { $exists: false } }, { purgingAt: null }],
        } as Filter<DriveFileDoc>,
        {
          $set: { trashedAt: null, name, ext, nameKey: nameKeyOf(name), updatedAt: now },
          ...bump,
        },
      );
      return r.matchedCount === 1;
    },

    async move(mine: Filter<DriveFileDoc>, dest: string | null, name: string, ext: string, now: Date) {
      const r = await files.updateOne(
        { ...mine, trashedAt: null },
        { $set: { folderId: dest, name, ext, nameKey: nameKeyOf(name), updatedAt: now }, ...bump },
      );
      return r.matchedCount === 1;
    },

    /** Active files of a folder of the account's personal drive. */
    activeInFolder: (accountId: string, folderId: string) =>
      files.countDocuments({ accountId, teamId: null, folderId, trashedAt: null }),

    /** Folders of the account's personal drive. */
    folderCount: (accountId: string) => folders.countDocuments({ accountId, teamId: null }),

    insertFolder: (doc: DriveFolderDoc) => folders.insertOne(doc),

    updateFolder: (
      accountId: string,
      id: string,
      update: UpdateFilter<DriveFolderDoc>,
      opts: Parameters<typeof updateVersioned<DriveFolderDoc>>[4],
    ) => updateVersioned(folders, accountId, id, update, opts),

    /** The folders under `id` in the account's personal drive, with their paths. */
    descendants: (accountId: string, id: string) =>
      folders.find({ accountId, teamId: null, path: id }, { projection: { path: 1 } }).toArray(),

    rewriteFolders: (ops: AnyBulkWriteOperation<DriveFolderDoc>[]) => folders.bulkWrite(ops, { ordered: false }),
  };
}
