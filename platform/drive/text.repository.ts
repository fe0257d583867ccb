import type { Filter } from 'mongodb';
import type { Store } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { driveCollections } from './drive.repository';
import type { DriveFileDoc, DriveTextDoc } from './drive.types';

/**
 * The queries of the Drive's text pipeline: the stored texts (`drive_texts`, `_id` = the file
 * id), the text status of files, and what the research engine and the scheduler's sweep read
 * (platform/drive/text.ts and text-queue.ts hold the logic).
 */

const driveTexts = (store: Store) => driveCollections(store).texts;
const driveFiles = (store: Store) => driveCollections(store).files;

/**
 * One account's files and texts, as the text pipeline and the research engine read them (the
 * account a file, a text request or a research job names): another account's file is not found.
 */
export function createDriveTexts(store: Store) {
  const { files, folders, texts } = driveCollections(store);
  return {
    forAccount(accountId: string) {
      const myFiles = accountSlice(files, accountId);
      const myFolders = accountSlice(folders, accountId);
      const myTexts = accountSlice(texts, accountId);
      return {
        /** The stored text of the file `fileId`. */
        text: (fileId: string) => myTexts.findOne({ _id: fileId }),

        /** A folder of the account's personal drive: its id and path. */
        personalFolderPath: (folderId: string) =>
          myFolders.findOne({ _id: folderId, teamId: null }, { projection: { _id: 1, path: 1 } }),

        /** A file of the account's personal drive. */
        personalFile: (fileId: string) => myFiles.findOne({ _id: fileId, teamId: null }),

        /** The file of a text request as long as it is still worth extracting: stored, not trashed, not being purged. */
        liveFile: (fileId: string) => myFiles.findOne({ _id: fileId, trashedAt: null, purgingAt: null }),

        /** Sets the text status of a live file still `pending`; true when it matched. */
        async settleStatus(fileId: string, text: DriveFileDoc['text']): Promise<boolean> {
          const moved = await myFiles.updateOne(
            { _id: fileId, trashedAt: null, purgingAt: null, 'text.status': 'pending' },
            { $set: { text } },
          );
          return moved.matchedCount === 1;
        },
      };
    },
  };
}

export async function saveDriveText(store: Store, doc: DriveTextDoc): Promise<void> {
  await driveTexts(store).replaceOne({ _id: doc._id }, doc, { upsert: true });
}

export const driveFileExists = async (store: Store, fileId: string) =>
  !!(await driveFiles(store).findOne({ _id: fileId }, { projection: { _id: 1 } }));

export async function deleteDriveText(store: Store, fileId: string): Promise<void> {
  await driveTexts(store).deleteOne({ _id: fileId });
}

const sweepIndexed = new WeakSet<Store>();

/** Files whose text is still `pending`, live, created before `before`; at most `limit`. */
export async function findPendingDriveTexts(store: Store, before: Date, limit: number) {
  const files = driveFiles(store);
  if (!sweepIndexed.has(store)) {
    // Serves this sweep on MongoDB (FerretDB 1.24 scans either way).
    await files.createIndex({ 'text.status': 1, createdAt: 1 });
    sweepIndexed.add(store);
  }
  return files
    .find(
      {
        'text.status': 'pending',
        trashedAt: null,
        purgingAt: null,
        createdAt: { $lt: before },
      },
      { projection: { _id: 1, accountId: 1, createdAt: 1, textRequestedAt: 1, textRequests: 1 } },
    )
    .limit(limit)
    .toArray();
}

/** Marks a still-pending file's text `failed` after `requests` requests; how many it moved (0 or 1). */
export async function failPendingDriveText(store: Store, fileId: string, requests: number, now: Date) {
  const r = await driveFiles(store).updateOne(
    { _id: fileId, 'text.status': 'pending' },
    {
      $set: {
        text: {
          status: 'failed',
          chars: 0,
          truncated: false,
          engine: null,
          error: `no drive worker finished the extraction after ${requests} requests`,
          at: now,
        },
      },
    },
  );
  return r.modifiedCount;
}

/**
 * Claims one republish of a pending file, guarded by the request count read (`f.textRequests`),
 * so two sweeps never both publish it. True when this sweep got it.
 */
export async function claimDriveTextRequest(
  store: Store,
  f: Pick<DriveFileDoc, '_id' | 'textRequests'>,
  n: number,
  now: Date,
): Promise<boolean> {
  const claim = await driveFiles(store).updateOne(
    { _id: f._id, 'text.status': 'pending', textRequests: f.textRequests ?? null } as Filter<DriveFileDoc>,
    { $set: { textRequestedAt: now, textRequests: n + 1 } },
  );
  return claim.modifiedCount === 1;
}
