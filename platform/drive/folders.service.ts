import {
  DRIVE_LIMITS,
  type DriveFolder,
  type DriveFolderCreate,
  type DriveFolderListQuery,
  type DriveFolderTree,
  type DriveFolderUpdate,
} from '../../contracts/drive';
import { AppError } from '../infra/errors';
import { pageWhole } from '../infra/lists';
import { newId } from '../infra/ids';
import { isPinned, personalScope, resolveDriveScope, teamDriveReadOnly } from './access';
import { createDriveRepository, nameKeyOf, toDriveFolder } from './drive.repository';
import { isDuplicateKey } from '../infra/mongo';
import type { DriveFolderDoc } from './drive.types';
import { createDriveFileRows } from './files.repository';
import type { Runtime } from '../runtime';
import { normFolderRef, type DriveActor } from './drive.service';

/** #abc or #AABBCC → #aabbcc. */
export const normColor = (c: string) =>
  (c.length === 4 ? `#${[...c.slice(1)].map((x) => x + x).join('')}` : c).toLowerCase();

const nameTaken = (name: string) =>
  new AppError(
    'conflict',
    `name: a folder named "${name}" already exists here (folder names are unique among siblings, case-insensitive)`,
  );

/**
 * Drive folders: the tree (flat, parents first, with file counts), create, and update (rename,
 * recolour, sticker, move). Folder creates and moves hold the drive's folder-tree lock, so a
 * move's cycle check and its rewrite of the subtree's `path` see a tree nobody else is changing.
 * A move updates the folder, then its descendants' paths; the drive stays marked in between, so
 * paths a crash left stale are recomputed (see withFolderLock and platform/drive/repair.ts).
 * Length: a factory whose 5 operations share the Drive repository and the folder view; the longest, update
 * (rename and move with the paths below), is 85 lines.
 */
export function createFoldersService(rt: Runtime) {
  const repo = createDriveRepository(rt.store);
  const rows = createDriveFileRows(rt.store);

  /** The parent a folder write names, checked: null (root) or a folder of the personal drive inside the pins. */
  async function writableParent(actor: DriveActor, ref: string | null): Promise<DriveFolderDoc | null> {
    if (ref === null) {
      if (isPinned(actor.caller))
        throw new AppError('not_found', 'parentFolderId: the drive root is outside the folders this key is pinned to');
      return null;
    }
    const f = await repo.findFolderForCaller(actor.caller, ref);
    if (!f) throw new AppError('not_found', 'parentFolderId: folder not found');
    if (f.readOnly) throw teamDriveReadOnly();
    return f.folder;
  }

  return {
    async tree(actor: DriveActor, q: DriveFolderListQuery): Promise<DriveFolderTree> {
      await repo.ensureIndexes();
      const scope = await resolveDriveScope(rt.store, actor.caller, {
        teamId: q.teamId,
        accountName: actor.accountName,
      });
      const [tree, counts] = await Promise.all([repo.folderTree(scope), repo.activeFileCounts(scope)]);
      const page = pageWhole(tree, q, 'drive-folders');
      return {
        data: page.data.map((f) => toDriveFolder(f, counts.get(f._id) ?? 0)),
        total: page.total,
        ...(page.cursor ? { cursor: page.cursor } : {}),
        rootFileCount: isPinned(actor.caller) ? 0 : (counts.get(null) ?? 0),
        scope: { type: scope.type, id: scope.id, name: scope.name, role: scope.role },
      };
    },

    async create(actor: DriveActor, body: DriveFolderCreate): Promise<DriveFolder> {
      await repo.ensureIndexes();
      const { caller } = actor;
      const mine = rows.forAccount(caller.accountId);
      const ref = normFolderRef(body.parentFolderId) ?? null;
      await writableParent(actor, ref);
      const scope = personalScope(caller);
      return repo.withFolderLock(scope.usageId, async () => {
        // Read the parent again under the lock: its path is final now.
        const parent = ref === null ? null : await writableParent(actor, ref);
        const path = parent ? [...parent.path, parent._id] : [];
        if (path.length + 1 > DRIVE_LIMITS.folderDepthMax)
          throw new AppError(
            'limit_exceeded',
            `parentFolderId: folders nest at most ${DRIVE_LIMITS.folderDepthMax} levels deep`,
          );
        const count = await mine.folderCount();
        if (count >= DRIVE_LIMITS.foldersPerDrive)
          throw new AppError('limit_exceeded', `a drive holds at most ${DRIVE_LIMITS.foldersPerDrive} folders`);
        const now = new Date();
        const doc: DriveFolderDoc = {
          _id: newId('dfo'),
          accountId: caller.accountId,
          teamId: null,
          name: body.name,
          nameKey: nameKeyOf(body.name),
          parentFolderId: parent?._id ?? null,
          path,
          color: body.color ? normColor(body.color) : null,
          sticker: body.sticker ?? null,
          version: 1,
          createdAt: now,
          updatedAt: now,
        };
        try {
          await mine.insertFolder(doc);
        } catch (err) {
          if (isDuplicateKey(err)) throw nameTaken(body.name);
          throw err;
        }
        return toDriveFolder(doc, 0);
      });
    },

    /**
     * PATCH: rename, recolour, sticker (null clears), move with parentFolderId (root or null for
     * the root). Moving into itself or its own subtree is 409 folder_cycle; a move rewrites the
     * `path` of the folder and of every folder under it.
     */
    async update(
      actor: DriveActor,
      id: string,
      body: DriveFolderUpdate,
      ifMatch: number | undefined,
    ): Promise<DriveFolder> {
      await repo.ensureIndexes();
      const { caller } = actor;
      const mine = rows.forAccount(caller.accountId);
      const found = await repo.findFolderForCaller(caller, id);
      if (!found) throw new AppError('not_found', 'folder not found');
      if (found.readOnly) throw teamDriveReadOnly();
      const set: Partial<DriveFolderDoc> = {};
      if (body.name !== undefined) {
        set.name = body.name;
        set.nameKey = nameKeyOf(body.name);
      }
      if (body.color !== undefined) set.color = body.color === null ? null : normColor(body.color);
      if (body.sticker !== undefined) set.sticker = body.sticker;
      const save = async (extraSet: Partial<DriveFolderDoc>) => {
        try {
          return await mine.updateFolder(
            id,
            { $set: { ...set, ...extraSet } },
            { expectedVersion: ifMatch, extra: { teamId: null }, what: 'folder' },
          );
        } catch (err) {
          if (isDuplicateKey(err)) throw nameTaken(set.name ?? found.folder.name);
          throw err;
        }
      };
      const ref = normFolderRef(body.parentFolderId);
      if (ref === undefined || ref === found.folder.parentFolderId) {
        const after = await save({});
        return toDriveFolder(after, await mine.activeInFolder(id));
      }
      await writableParent(actor, ref);
      // The lock marks the drive (pathsDirtyAt) and clears the mark only once the subtree is
      // rewritten: a crash or failure in between is repaired from parentFolderId (withFolderLock, drive.repair).
      const after = await repo.withFolderLock(
        personalScope(caller).usageId,
        async () => {
          const current = await repo.findFolderForCaller(caller, id);
          if (!current) throw new AppError('not_found', 'folder not found');
          const parent = await writableParent(actor, ref);
          if (parent && (parent._id === id || parent.path.includes(id))) {
            throw new AppError(
              'folder_cycle',
              'parentFolderId: a folder cannot move into itself or into a folder inside it',
            );
          }
          const newPath = parent ? [...parent.path, parent._id] : [];
          const oldDepth = current.folder.path.length;
          const descendants = await mine.descendants(id);
          const deepest = descendants.reduce((m, d) => Math.max(m, d.path.length - oldDepth), 0);
          if (newPath.length + 1 + deepest > DRIVE_LIMITS.folderDepthMax) {
            throw new AppError(
              'limit_exceeded',
              `parentFolderId: folders nest at most ${DRIVE_LIMITS.folderDepthMax} levels deep (this subtree is ${deepest + 1} deep)`,
            );
          }
          const moved = await save({ parentFolderId: parent?._id ?? null, path: newPath });
          if (descendants.length) {
            await mine.rewritePaths(
              descendants.map((d) => ({ id: d._id, path: [...newPath, id, ...d.path.slice(d.path.indexOf(id) + 1)] })),
              new Date(),
            );
          }
          return moved;
        },
        { movesFolders: true },
      );
      return toDriveFolder(after, await mine.activeInFolder(id));
    },
  };
}
