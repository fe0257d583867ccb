import { randomBytes } from 'node:crypto';
import type { AnyBulkWriteOperation, Filter } from 'mongodb';
import type { DriveFile as DriveFileView, DriveFolder as DriveFolderView } from '../../contracts/drive';
import { AppError } from '../infra/errors';
import { COLLECTIONS, isDuplicateKey, type Database, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { folderInsidePins, isPinned, usageIdOf, type DriveCaller, type DriveRole, type DriveScope } from './access';
import type { DriveFileDoc, DriveFolderDoc, DriveReservationDoc, DriveTextDoc, DriveUsageDoc } from './drive.types';
import { createTeams } from './teams.repository';

/**
 * Drive files, folders and storage meters. Every lookup goes through the caller (account, team
 * membership, key pins): another account's file, a team the caller is not in, or a folder outside
 * the key's pins is simply not found. The download stream, the text and the search use
 * `findFileForCaller` (the search `visibleFolderIds`) too, so pins and teams hold on every route.
 */

/** A file as the caller reaches it. */
export interface CallerFile {
  file: DriveFileDoc;
  /** true for a team-drive file: every write is 403 team_drive_read_only. */
  readOnly: boolean;
  /** The caller's team role (team files) or null (own files). */
  teamRole: DriveRole | null;
}

export interface CallerFolder {
  folder: DriveFolderDoc;
  readOnly: boolean;
}

/** The active-name key of a file or folder (unique per folder, case-insensitive). */
export const nameKeyOf = (name: string) => name.toLowerCase();
/** The name key of a trashed file: never equal to a valid name (no extension). */
export const trashedNameKey = (fileId: string) => `#trash:${fileId}`;

/** "report.pdf", 2 → "report (2).pdf". */
export function suffixedName(name: string, n: number): string {
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : '';
  const suffix = ` (${n})`;
  // Keep the name within 255 characters: the stem gives way.
  const room = 255 - ext.length - suffix.length;
  return `${stem.slice(0, Math.max(1, room))}${suffix}${ext}`;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Conditional `$inc` attempts of a reservation whose meter was missing or changed under it (each a write and a read). */
const RESERVE_ATTEMPTS = 10;

/** Attempts at a free name before a create/move/restore gives up (each a read and a write). */
const NAME_ATTEMPTS = 60;

const indexedDbs = new WeakMap<Database, Promise<unknown>>();

/**
 * The Drive's collections, typed, for the Drive's own background steps whose queries are their
 * story (the purge, the text pipeline and its sweep, the repairs, the download toucher). A read
 * on behalf of a key goes through `createDriveRepository`, which checks the caller.
 */
export function driveCollections(store: Store) {
  const db = openStore(store);
  return {
    files: db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles),
    folders: db.db.collection<DriveFolderDoc>(COLLECTIONS.driveFolders),
    usage: db.db.collection<DriveUsageDoc>(COLLECTIONS.driveUsage),
    texts: db.db.collection<DriveTextDoc>(COLLECTIONS.driveTexts),
    reservations: db.db.collection<DriveReservationDoc>(COLLECTIONS.driveReservations),
  };
}

/**
 * The download toucher's write (platform/drive/downloads.ts): `lastAccessedAt` = now on a file
 * whose stored value is null or older than `stale`.
 */
export function createLastAccessedWriter(store: Store) {
  const { files } = driveCollections(store);
  return (fileId: string, stale: Date, now: Date) =>
    files.updateOne(
      { _id: fileId, $or: [{ lastAccessedAt: null }, { lastAccessedAt: { $lt: stale } }] },
      { $set: { lastAccessedAt: now } },
    );
}

/** Drives marked `pathsDirtyAt` before `before` (a folder move that did not finish), at most `limit`. */
export const findDirtyPathDrives = (store: Store, before: Date, limit: number) =>
  driveCollections(store)
    .usage.find({ pathsDirtyAt: { $lt: before } }, { projection: { _id: 1 } })
    .limit(limit)
    .toArray();

// Length: the Drive's data access: 18 functions share its four collections, the teams and the index set-up;
// the longest, withFolderLock, is 63 lines.
export function createDriveRepository(store: Store) {
  const db = openStore(store);
  const { files, folders, usage, reservations } = driveCollections(store);
  const teams = createTeams(store);

  const ensureIndexes = () => {
    let p = indexedDbs.get(db);
    if (!p) {
      p = Promise.all([
        // Active names are unique per folder (trashed files carry `#trash:<id>`).
        files.createIndex({ accountId: 1, teamId: 1, folderId: 1, nameKey: 1 }, { unique: true }),
        files.createIndex({ accountId: 1, teamId: 1, createdAt: -1, _id: -1 }),
        files.createIndex({ accountId: 1, teamId: 1, trashedAt: -1, _id: -1 }),
        folders.createIndex({ accountId: 1, teamId: 1, parentFolderId: 1, nameKey: 1 }, { unique: true }),
        folders.createIndex({ accountId: 1, teamId: 1, path: 1 }),
        // What drive.repair looks for: reservations past their grace, drives whose paths a move marked.
        reservations.createIndex({ until: 1 }),
        usage.createIndex({ pathsDirtyAt: 1 }),
      ]).catch((err) => {
        indexedDbs.delete(db);
        throw err;
      });
      indexedDbs.set(db, p);
    }
    return p;
  };

  /** Owner fields of the drive a document lives in. */
  const ownerOf = (d: { accountId: string; teamId: string | null }) => ({ accountId: d.accountId, teamId: d.teamId });

  /** Can the caller's account reach documents of this owner? Returns the team role, 'owner' for the personal drive, or null. */
  async function reach(
    caller: DriveCaller,
    owner: { accountId: string; teamId: string | null },
  ): Promise<DriveRole | null> {
    if (owner.teamId === null) return owner.accountId === caller.accountId ? 'owner' : null;
    const m = await teams.membership(owner.teamId, caller.accountId);
    return m && m.team.ownerAccountId === owner.accountId ? m.role : null;
  }

  async function folderVisible(
    caller: DriveCaller,
    folderId: string | null,
    owner: { accountId: string; teamId: string | null },
  ): Promise<boolean> {
    if (!isPinned(caller)) return true;
    if (folderId === null) return false; // root files are outside every pin
    const f = await folders.findOne(
      { _id: folderId, accountId: owner.accountId, teamId: owner.teamId },
      { projection: { path: 1 } },
    );
    return !!f && folderInsidePins(caller, { _id: folderId, path: f.path });
  }

  const repo = {
    ensureIndexes,

    /**
     * The file `fileId` as `caller` may reach it: their own file, or a file of a team drive their
     * account belongs to, inside the key's pins. Null otherwise (answer 404). One to three reads.
     */
    async findFileForCaller(caller: DriveCaller, fileId: string): Promise<CallerFile | null> {
      const file = await files.findOne({
        _id: fileId,
        $or: [{ accountId: caller.accountId, teamId: null }, { teamId: { $ne: null } }],
      } as Filter<DriveFileDoc>);
      if (!file) return null;
      const role = await reach(caller, ownerOf(file));
      if (!role) return null;
      if (!(await folderVisible(caller, file.folderId, ownerOf(file)))) return null;
      return { file, readOnly: file.teamId !== null, teamRole: file.teamId ? role : null };
    },

    /** The folder `folderId` as `caller` may reach it (own or team, inside the pins), or null. */
    async findFolderForCaller(caller: DriveCaller, folderId: string): Promise<CallerFolder | null> {
      const folder = await folders.findOne({
        _id: folderId,
        $or: [{ accountId: caller.accountId, teamId: null }, { teamId: { $ne: null } }],
      } as Filter<DriveFolderDoc>);
      if (!folder) return null;
      if (!(await reach(caller, ownerOf(folder)))) return null;
      if (!folderInsidePins(caller, folder)) return null;
      return { folder, readOnly: folder.teamId !== null };
    },

    /** One account's own operations (not through a caller: the console's, for its signed-in account). */
    forAccount(accountId: string) {
      const myFolders = accountSlice(folders, accountId);
      return {
        /** Whether `folderId` is a folder of the account's own Drive (not a team's): what a key may be pinned to. */
        async ownFolderExists(folderId: string): Promise<boolean> {
          return !!(await myFolders.findOne({ _id: folderId, teamId: null }, { projection: { _id: 1 } }));
        },
      };
    },

    /** Ids of the drive's folders the caller may see; null when the key has no pins (all of them). */
    async visibleFolderIds(scope: DriveScope): Promise<string[] | null> {
      if (!isPinned(scope.caller)) return null;
      const pins = [...scope.caller.pins];
      const docs = await folders
        .find(
          { accountId: scope.accountId, teamId: scope.teamId, $or: [{ _id: { $in: pins } }, { path: { $in: pins } }] },
          { projection: { _id: 1 } },
        )
        .toArray();
      return docs.map((d) => d._id);
    },

    /** Every folder of the drive inside the pins, parents before children, siblings by name. */
    async folderTree(scope: DriveScope): Promise<DriveFolderDoc[]> {
      const filter: Filter<DriveFolderDoc> = { accountId: scope.accountId, teamId: scope.teamId };
      const all = await folders.find(filter).toArray();
      const mine = isPinned(scope.caller) ? all.filter((f) => folderInsidePins(scope.caller, f)) : all;
      return orderTree(mine);
    },

    /** Active files per folder (null = root) of the drive. One aggregation. */
    async activeFileCounts(scope: DriveScope): Promise<Map<string | null, number>> {
      const rows = await files
        .aggregate<{ _id: string | null; n: number }>([
          { $match: { accountId: scope.accountId, teamId: scope.teamId, trashedAt: null } },
          { $group: { _id: '$folderId', n: { $sum: 1 } } },
        ])
        .toArray();
      return new Map(rows.map((r) => [r._id ?? null, r.n]));
    },

    async usageOf(usageId: string): Promise<{ bytesUsed: number; fileCount: number }> {
      const u = await usage.findOne({ _id: usageId }, { projection: { bytesUsed: 1, fileCount: 1 } });
      return { bytesUsed: u?.bytesUsed ?? 0, fileCount: u?.fileCount ?? 0 };
    },

    /**
     * Reserve `bytes` (and one file) on the meter with one conditional `$inc`: refused with 413
     * storage_quota_exceeded when bytesUsed + bytes would pass `quota`. When the `$inc` matches
     * nothing, the meter is read to tell why: missing (the drive's first upload: create it with a
     * unique insert, a duplicate key meaning a racing upload created it first) or changed since
     * (it appeared, or space was freed): try the `$inc` again; over the quota: 413.
     *
     * `ref` (an upload's reservation id) is pushed to `reservedRefs` in the same update, so the
     * meter itself says whether it holds this reservation: `release` gives back only what it
     * holds, once (see platform/drive/reservations.repository.ts).
     */
    async reserve(usageId: string, bytes: number, quota: number, ref?: string): Promise<void> {
      for (let attempt = 0; attempt < RESERVE_ATTEMPTS; attempt++) {
        const r = ref
          ? await usage.updateOne(
              { _id: usageId, bytesUsed: { $lte: quota - bytes }, reservedRefs: { $ne: ref } },
              { $inc: { bytesUsed: bytes, fileCount: 1 }, $push: { reservedRefs: ref } },
            )
          : await usage.updateOne(
              { _id: usageId, bytesUsed: { $lte: quota - bytes } },
              { $inc: { bytesUsed: bytes, fileCount: 1 } },
            );
        if (r.matchedCount === 1) return;
        const u = await usage.findOne(
          { _id: usageId },
          { projection: ref ? { bytesUsed: 1, reservedRefs: 1 } : { bytesUsed: 1 } },
        );
        if (!u) {
          await usage.insertOne({ _id: usageId, bytesUsed: 0, fileCount: 0 }).catch((err: unknown) => {
            if (!isDuplicateKey(err)) throw err;
          });
          continue;
        }
        if (ref && u.reservedRefs?.includes(ref)) return; // taken already (a retried command)
        if (u.bytesUsed + bytes > quota) {
          throw new AppError(
            'storage_quota_exceeded',
            `storage quota exceeded: ${u.bytesUsed} of ${quota} bytes used, this file needs ${bytes} more; free space (trashed files count until purged) or upgrade the plan`,
          );
        }
      }
      throw new AppError('conflict', 'the storage meter kept changing during this upload; try again');
    },

    /**
     * Give back the reservation `ref` (its upload failed or died): ONE conditional update that
     * moves the meter and drops the marker, so it happens only if the meter holds `ref`, and once.
     * True when this call gave it back.
     */
    async release(usageId: string, bytes: number, ref: string): Promise<boolean> {
      const r = await usage.updateOne(
        { _id: usageId, reservedRefs: ref },
        { $inc: { bytesUsed: -bytes, fileCount: -1 }, $pullAll: { reservedRefs: [ref] } },
      );
      return r.modifiedCount === 1;
    },

    /** The file of reservation `ref` is recorded: the meter keeps its bytes, the marker goes. */
    async keepReserved(usageId: string, ref: string): Promise<void> {
      await usage.updateOne({ _id: usageId, reservedRefs: ref }, { $pullAll: { reservedRefs: [ref] } });
    },

    /**
     * The first free name for `name` in a folder: `name` itself, else "stem (n).ext" with the
     * lowest n not taken by an active file. One read.
     */
    async freeName(
      owner: { accountId: string; teamId: string | null },
      folderId: string | null,
      name: string,
    ): Promise<string> {
      const dot = name.lastIndexOf('.');
      const stem = (dot > 0 ? name.slice(0, dot) : name).toLowerCase();
      const taken = new Set(
        (
          await files
            .find(
              {
                accountId: owner.accountId,
                teamId: owner.teamId,
                folderId,
                nameKey: { $regex: `^${escapeRe(stem.slice(0, 200))}` },
              },
              { projection: { nameKey: 1 } },
            )
            .toArray()
        ).map((d) => d.nameKey),
      );
      if (!taken.has(nameKeyOf(name))) return name;
      for (let n = 1; ; n++) {
        const candidate = suffixedName(name, n);
        if (!taken.has(nameKeyOf(candidate))) return candidate;
      }
    },

    /**
     * Run `write(name)` (an insert or an update that sets the name key) with `name`, and on a
     * duplicate name in the folder with the next free suffix, until it lands. Race-safe: the
     * unique index decides, the suffix is only re-read after a loss.
     */
    async withFreeName<T>(
      owner: { accountId: string; teamId: string | null },
      folderId: string | null,
      name: string,
      write: (name: string) => Promise<T>,
    ): Promise<{ name: string; result: T }> {
      await ensureIndexes();
      let candidate = name;
      for (let attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
        try {
          return { name: candidate, result: await write(candidate) };
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
          candidate = await repo.freeName(owner, folderId, name);
          // Under heavy contention several writers read the same free suffix; spread the retries.
          if (attempt > 2) await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
        }
      }
      throw new AppError('conflict', `could not find a free name for "${name}" in this folder; try again`);
    },

    /**
     * Run `fn` holding the folder-tree lock of a drive (folder creates and moves): two moves can
     * then never build a cycle, and a subtree's path rewrite never races a create inside it.
     * The lock expires after 15 s in case its holder died.
     *
     * `movesFolders`: `fn` rewrites paths (a move); the drive is marked `pathsDirtyAt` in the
     * same update that takes the lock, and the mark is cleared in the one that releases it only
     * when `fn` finished or refused with an AppError (which `fn` must throw before writing). A
     * mark found when the lock is taken is a move that did not finish (its process died or its
     * rewrite failed): every path of the drive is recomputed first, so the cycle check and new
     * paths never build on stale ones. The scheduler's `drive.repair` takes
     * the lock of drives marked for more than a minute for the same reason.
     */
    async withFolderLock<T>(usageId: string, fn: () => Promise<T>, opts: { movesFolders?: boolean } = {}): Promise<T> {
      const token = randomBytes(8).toString('hex');
      const deadline = Date.now() + 10_000;
      let before: Pick<DriveUsageDoc, 'pathsDirtyAt'>;
      for (let attempt = 0; ; attempt++) {
        const now = new Date();
        const set: Partial<DriveUsageDoc> = {
          folderLockUntil: new Date(now.getTime() + 15_000),
          folderLockToken: token,
        };
        if (opts.movesFolders) set.pathsDirtyAt = now;
        const r = await usage.findOneAndUpdate(
          {
            _id: usageId,
            $or: [
              { folderLockUntil: { $exists: false } },
              { folderLockUntil: null },
              { folderLockUntil: { $lt: now } },
            ],
          } as Filter<DriveUsageDoc>,
          { $set: set },
          // No projection: FerretDB 1.24 does not implement one on findAndModify.
          { returnDocument: 'before' },
        );
        if (r) {
          before = r;
          break;
        }
        if (!(await usage.findOne({ _id: usageId }, { projection: { _id: 1 } }))) {
          await usage.insertOne({ _id: usageId, bytesUsed: 0, fileCount: 0 }).catch((err: unknown) => {
            if (!isDuplicateKey(err)) throw err;
          });
          continue;
        }
        if (Date.now() > deadline)
          throw new AppError('conflict', 'the folder tree is being changed by another request; try again');
        await new Promise((res) => setTimeout(res, Math.min(100, 5 + attempt * 5)));
      }
      // The mark goes once an earlier unfinished move is repaired and this one (if it moves) is done.
      let priorFixed = !before.pathsDirtyAt;
      let moveDone = !opts.movesFolders;
      try {
        if (before.pathsDirtyAt) {
          await repo.recomputePaths(usageId);
          priorFixed = true;
        }
        try {
          const out = await fn();
          moveDone = true;
          return out;
        } catch (err) {
          // A refusal (cycle, not found, name taken, version conflict) comes before any write.
          if (err instanceof AppError) moveDone = true;
          throw err;
        }
      } finally {
        // Conditional on the token: a holder whose lock expired (and so may have been marked
        // again by the next holder) clears nothing.
        const unset: Partial<DriveUsageDoc> = { folderLockUntil: null, folderLockToken: null };
        if (priorFixed && moveDone && (before.pathsDirtyAt || opts.movesFolders)) unset.pathsDirtyAt = null;
        await usage.updateOne({ _id: usageId, folderLockToken: token }, { $set: unset });
      }
    },

    /**
     * Recompute the `path` of every folder of a drive from `parentFolderId` (at most 1000
     * folders, 20 levels) and fix those that differ (one bulkWrite, each update guarded by the
     * parent it was computed from). Call it holding the drive's folder-tree lock. A folder whose
     * parent is missing, or that sits in a parent cycle, is left as it is (counted in `unplaced`).
     */
    async recomputePaths(usageId: string): Promise<{ fixed: number; unplaced: number }> {
      const owner: Filter<DriveFolderDoc> = usageId.startsWith('team:')
        ? { teamId: usageId.slice('team:'.length) }
        : { accountId: usageId, teamId: null };
      const all = await folders.find(owner, { projection: { parentFolderId: 1, path: 1 } }).toArray();
      const byId = new Map(all.map((f) => [f._id, f]));
      const pathOf = (f: Pick<DriveFolderDoc, '_id' | 'parentFolderId'>): string[] | null => {
        const path: string[] = [];
        const seen = new Set([f._id]);
        for (let cur = f; cur.parentFolderId !== null; ) {
          const parent = byId.get(cur.parentFolderId);
          if (!parent || seen.has(parent._id)) return null;
          seen.add(parent._id);
          path.unshift(parent._id);
          cur = parent;
        }
        return path;
      };
      const now = new Date();
      const ops: AnyBulkWriteOperation<DriveFolderDoc>[] = [];
      let unplaced = 0;
      for (const f of all) {
        const path = pathOf(f);
        if (!path) {
          unplaced++;
          continue;
        }
        if (path.length === f.path.length && path.every((id, i) => f.path[i] === id)) continue;
        ops.push({
          updateOne: {
            filter: { _id: f._id, parentFolderId: f.parentFolderId },
            update: { $set: { path, updatedAt: now }, $inc: { version: 1 } },
          },
        });
      }
      if (ops.length) await folders.bulkWrite(ops, { ordered: false });
      return { fixed: ops.length, unplaced };
    },

    usageIdOf,
  };
  return repo;
}

/** Folders ordered parents before children (by depth), siblings by name then id. */
export function orderTree(list: DriveFolderDoc[]): DriveFolderDoc[] {
  const byParent = new Map<string | null, DriveFolderDoc[]>();
  const ids = new Set(list.map((f) => f._id));
  for (const f of list) {
    // A pinned key's top folders have parents it cannot see: they start the tree.
    const parent = f.parentFolderId !== null && ids.has(f.parentFolderId) ? f.parentFolderId : null;
    const arr = byParent.get(parent) ?? [];
    arr.push(f);
    byParent.set(parent, arr);
  }
  const cmp = (a: DriveFolderDoc, b: DriveFolderDoc) =>
    a.nameKey < b.nameKey ? -1 : a.nameKey > b.nameKey ? 1 : a._id < b._id ? -1 : 1;
  const out: DriveFolderDoc[] = [];
  const walk = (parent: string | null) => {
    for (const f of (byParent.get(parent) ?? []).sort(cmp)) {
      out.push(f);
      walk(f._id);
    }
  };
  walk(null);
  return out;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

/** Relative in-app preview page of a file (SPEC 2.19 previewPath). */
export const drivePreviewPath = (fileId: string) => `/drive/preview/${fileId}`;

/**
 * A stored file as answered (SPEC 2.19 DriveFile): storage internals (blob id, sha256, name key,
 * purge marks) never leave. `publicBaseUrl` makes previewUrl absolute.
 */
export function toDriveFile(publicBaseUrl: string, f: DriveFileDoc): DriveFileView {
  const previewPath = drivePreviewPath(f._id);
  return {
    id: f._id,
    name: f.name,
    kind: f.kind,
    mimeType: f.mimeType,
    sizeBytes: f.sizeBytes,
    ext: f.ext,
    folderId: f.folderId,
    teamId: f.teamId,
    isStarred: f.isStarred,
    tags: f.tags,
    description: f.description,
    trashedAt: iso(f.trashedAt),
    lastAccessedAt: iso(f.lastAccessedAt),
    textStatus: f.text?.status ?? 'pending',
    version: f.version,
    createdAt: iso(f.createdAt)!,
    updatedAt: iso(f.updatedAt)!,
    previewPath,
    previewUrl: `${publicBaseUrl}${previewPath}`,
  };
}

/** A stored folder as answered (DriveFolder) with its active file count. */
export function toDriveFolder(f: DriveFolderDoc, fileCount: number): DriveFolderView {
  return {
    id: f._id,
    name: f.name,
    parentFolderId: f.parentFolderId,
    path: f.path,
    fileCount,
    color: f.color,
    sticker: f.sticker,
    teamId: f.teamId,
    version: f.version,
    createdAt: iso(f.createdAt)!,
    updatedAt: iso(f.updatedAt)!,
  };
}
