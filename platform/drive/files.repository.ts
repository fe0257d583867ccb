import type { AnyBulkWriteOperation, Filter, UpdateFilter } from 'mongodb';
import { keysetPage, type KeysetOptions } from '../infra/lists';
import type { Store } from '../infra/mongo';
import { accountSlice, ownedBy } from '../infra/tenant';
import { updateVersioned } from '../infra/versioned';
import type { DriveCaller, DriveScope } from './access';
import { driveCollections, nameKeyOf, trashedNameKey } from './drive.repository';
import type { DriveFileDoc, DriveFolderDoc } from './drive.types';

/** What a list of a drive's files asks for (GET /drive/files, checked by the service). */
export interface DriveFileListFilter {
  /** A folder id (files directly in it), null (root files), a list (files in any of them: a pinned key's folders), or undefined (every file). */
  folder?: string | null | readonly string[];
  /** Trashed files only, else active files only. */
  trashed: boolean;
  kind?: DriveFileDoc['kind'];
  starred?: boolean;
}

/**
 * The file a bulk action changes: the account's own, still reachable file `id`. `folderId`
 * (a pinned key's) also requires it still in the folder read when its reach was checked, so a
 * file moved out of the pins meanwhile is not changed.
 */
export interface BulkTarget {
  id: string;
  folderId?: string | null;
}

const REREAD_PROJECTION = { trashedAt: 1, isStarred: 1, folderId: 1, purgingAt: 1 } as const;

/**
 * The queries of the Drive's file and folder routes (platform/drive/drive.service.ts and
 * folders.service.ts hold the checks; a caller's reach is checked there or by createDriveRepository).
 * The list reads a drive the service resolved (a DriveScope), a bulk action's candidate is read as
 * the caller reaches it, and every write goes through `forAccount`: the account's personal drive.
 */
export function createDriveFileRows(store: Store) {
  const { files, folders } = driveCollections(store);
  const bump = { $inc: { version: 1 } } as const;

  /** The filter of a list of the drive `scope`, in the order of the drive's indexes. */
  const listFilter = (scope: DriveScope, q: DriveFileListFilter) => {
    const filter: Filter<DriveFileDoc> = { accountId: scope.accountId, teamId: scope.teamId };
    if (q.folder !== undefined)
      filter.folderId = Array.isArray(q.folder) ? { $in: [...q.folder] } : (q.folder as string | null);
    filter.trashedAt = q.trashed ? { $ne: null } : null;
    if (q.kind) filter.kind = q.kind;
    if (q.starred !== undefined) filter.isStarred = q.starred;
    return filter;
  };

  return {
    /** A page of the files of the drive `scope` (personal or a team's, as resolved for the caller). */
    page: (scope: DriveScope, q: DriveFileListFilter, opts: KeysetOptions) =>
      keysetPage(files, listFilter(scope, q), opts),

    /** A folder's path, in the drive of `d`. */
    folderPath: (d: Pick<DriveFileDoc, 'accountId' | 'teamId'>, folderId: string) =>
      folders.findOne({ _id: folderId, accountId: d.accountId, teamId: d.teamId }, { projection: { path: 1 } }),

    /** The file, when it is the caller's own or in a team drive (the team is checked after). */
    bulkCandidate: (caller: DriveCaller, id: string) =>
      files.findOne({
        _id: id,
        $or: [{ accountId: caller.accountId, teamId: null }, { teamId: { $ne: null } }],
      } as Filter<DriveFileDoc>),

    /** The writes and counts of one account's personal drive. */
    forAccount(accountId: string) {
      const myFiles = accountSlice(files, accountId);
      const myFolders = accountSlice(folders, accountId);
      /** The target file of a bulk action (see BulkTarget). */
      const target = (t: BulkTarget): Filter<DriveFileDoc> => ({
        _id: t.id,
        teamId: null,
        ...(t.folderId !== undefined ? { folderId: t.folderId } : {}),
      });

      return {
        insertFile: (d: DriveFileDoc) => myFiles.insertOne(d),

        updateFile: (
          id: string,
          update: UpdateFilter<DriveFileDoc>,
          opts: Parameters<typeof updateVersioned<DriveFileDoc>>[4],
        ) => updateVersioned(myFiles, accountId, id, update, opts),

        reread: (t: BulkTarget) => myFiles.findOne(target(t), { projection: REREAD_PROJECTION }),

        /** True when it matched a live file not yet in that state. */
        async star(t: BulkTarget, v: boolean, now: Date): Promise<boolean> {
          const r = await myFiles.updateOne(
            { ...target(t), trashedAt: null, isStarred: !v },
            { $set: { isStarred: v, updatedAt: now }, ...bump },
          );
          return r.matchedCount === 1;
        },

        async trash(t: BulkTarget, now: Date): Promise<boolean> {
          const r = await myFiles.updateOne(
            { ...target(t), trashedAt: null },
            { $set: { trashedAt: now, nameKey: trashedNameKey(t.id), updatedAt: now }, ...bump },
          );
          return r.matchedCount === 1;
        },

        /** Restores a file trashed since `cutoff` and not being purged, as `name`. */
        async restore(t: BulkTarget, cutoff: Date, name: string, ext: string, now: Date): Promise<boolean> {
          const r = await myFiles.updateOne(
            {
              ...target(t),
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

        async move(t: BulkTarget, dest: string | null, name: string, ext: string, now: Date) {
          const r = await myFiles.updateOne(
            { ...target(t), trashedAt: null },
            { $set: { folderId: dest, name, ext, nameKey: nameKeyOf(name), updatedAt: now }, ...bump },
          );
          return r.matchedCount === 1;
        },

        /** Active files of a folder of the account's personal drive. */
        activeInFolder: (folderId: string) => myFiles.countDocuments({ teamId: null, folderId, trashedAt: null }),

        /** Folders of the account's personal drive. */
        folderCount: () => myFolders.countDocuments({ teamId: null }),

        insertFolder: (doc: DriveFolderDoc) => myFolders.insertOne(doc),

        updateFolder: (
          id: string,
          update: UpdateFilter<DriveFolderDoc>,
          opts: Parameters<typeof updateVersioned<DriveFolderDoc>>[4],
        ) => updateVersioned(myFolders, accountId, id, update, opts),

        /** The folders under `id` in the account's personal drive, with their paths. */
        descendants: (id: string) => myFolders.find({ teamId: null, path: id }, { projection: { path: 1 } }).toArray(),

        /** Sets the `path` of each folder (a moved subtree) in one unordered bulkWrite. */
        rewritePaths: (moves: { id: string; path: string[] }[], now: Date) =>
          folders.bulkWrite(
            moves.map(
              (m): AnyBulkWriteOperation<DriveFolderDoc> => ({
                updateOne: {
                  // The slice has no bulkWrite: each filter is narrowed to the account by hand.
                  filter: ownedBy<DriveFolderDoc>(accountId, { _id: m.id }),
                  update: { $set: { path: m.path, updatedAt: now }, $inc: { version: 1 } },
                },
              }),
            ),
            { ordered: false },
          ),
      };
    },
  };
}
