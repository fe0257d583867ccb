import {
  extOf,
  type DriveBulkRequest,
  type DriveBulkResult,
  type DriveFile,
  type DriveFileCreate,
  type DriveFileHandle,
  type DriveFileList,
  type DriveFileListQuery,
  type DriveFileUpdate,
} from '../../contracts/drive';
import type { Plan } from '../../contracts/registry';
import { eachLimited } from '../infra/concurrency';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { isDuplicateKey } from '../infra/mongo';
import {
  folderInsidePins,
  isPinned,
  listCallerTeams,
  personalScope,
  resolveDriveScope,
  teamDriveReadOnly,
  type DriveCaller,
  type DriveScope,
} from './access';
import { createDriveRepository, nameKeyOf, toDriveFile, toDriveFolder } from './drive.repository';
import type { DriveFileDoc } from './drive.types';
import { createDriveFileRows, type BulkTarget, type DriveFileListFilter } from './files.repository';
import { detectDriveType } from './kinds';
import { driveDownloadLink } from './links';
import { driveUploadSteps, newDriveReservation } from './reservations.repository';
import { reindexDriveFileMeta } from './search-index.repository';
import { requestDriveText } from './text-queue';
import type { Runtime } from '../runtime';

/** Who asks: the key's caller plus what the account says (name, plan). */
export interface DriveActor {
  caller: DriveCaller;
  accountName: string;
  plan: Plan;
}

/** `folderId` of a request: an id, or null for the root (`root`, null). */
export const normFolderRef = (v: string | null | undefined): string | null | undefined => (v === 'root' ? null : v);

const rootOutsidePins = (field: string) =>
  new AppError('not_found', `${field}: the drive root is outside the folders this key is pinned to`);

/** Bulk per-file updates run this many at a time. */
const BULK_CONCURRENCY = 8;

/**
 * Drive files (SPEC 4.10): list with the folder tree and the storage meter, upload, handle with a
 * signed link, update, bulk actions. Team drives are browsable and read-only.
 * Length: a factory whose 11 operations share the Drive repository, the quota and the file view; the longest,
 * bulk, has its own Length line.
 */
export function createDriveService(rt: Runtime) {
  const repo = createDriveRepository(rt.store);
  const rows = createDriveFileRows(rt.store);
  const base = rt.config.PUBLIC_BASE_URL;
  const view = (f: DriveFileDoc): DriveFile => toDriveFile(base, f);

  const quotaOf = (plan: Plan) => rt.config.DRIVE_QUOTA_BYTES[plan];

  async function storageOf(scope: DriveScope, plan: Plan): Promise<DriveFileList['storage']> {
    if (isPinned(scope.caller)) return null;
    let quotaPlan = plan;
    if (scope.teamId) {
      const owner = await rt.accounts.forAccount(scope.accountId).plan();
      quotaPlan = owner?.plan ?? plan;
    }
    const u = await repo.usageOf(scope.usageId);
    return { bytesUsed: u.bytesUsed, quotaBytes: quotaOf(quotaPlan), fileCount: u.fileCount };
  }

  /** The destination folder of a write in the personal drive: null (root) or a folder id, checked. */
  async function writableFolder(caller: DriveCaller, ref: string | null, field: string): Promise<string | null> {
    if (ref === null) {
      if (isPinned(caller)) throw rootOutsidePins(field);
      return null;
    }
    const f = await repo.findFolderForCaller(caller, ref);
    if (!f) throw new AppError('not_found', `${field}: folder not found`);
    if (f.readOnly) throw teamDriveReadOnly();
    return f.folder._id;
  }

  /** Search sees the new name, tags and description (best effort: search re-checks them against the file). */
  const reindexMeta = (f: DriveFileDoc) =>
    reindexDriveFileMeta(rt, f).catch((err: unknown) =>
      rt.log.warn('drive search metadata not re-indexed', { fileId: f._id, err: err as Error }),
    );

  const service = {
    view,

    async list(actor: DriveActor, q: DriveFileListQuery): Promise<DriveFileList> {
      await repo.ensureIndexes();
      const scope = await resolveDriveScope(rt.store, actor.caller, {
        teamId: q.teamId,
        accountName: actor.accountName,
      });
      // The tree is needed first only to check a folderId filter or to apply pins; otherwise every read runs at once.
      const pinned = isPinned(actor.caller);
      const treeP = repo.folderTree(scope);
      const sideP = Promise.all([
        repo.activeFileCounts(scope),
        storageOf(scope, actor.plan),
        listCallerTeams(rt.store, actor.caller),
      ]);
      // Awaited below; these only keep an early 404 from leaving a rejection unhandled.
      sideP.catch(() => {});
      treeP.catch(() => {});
      const tree = (q.folderId !== undefined && q.folderId !== 'root') || pinned ? await treeP : null;
      const trash = q.trash === 'true';
      const filter: DriveFileListFilter = { trashed: trash };
      if (q.folderId === 'root') {
        if (pinned) throw rootOutsidePins('folderId');
        filter.folder = null;
      } else if (q.folderId !== undefined) {
        if (!tree!.some((f) => f._id === q.folderId)) throw new AppError('not_found', 'folderId: folder not found');
        filter.folder = q.folderId;
      } else if (pinned) {
        filter.folder = tree!.map((f) => f._id);
      }
      if (q.kind) filter.kind = q.kind;
      if (q.starred) filter.starred = q.starred === 'true';
      const field = trash ? 'trashedAt' : 'createdAt';
      const [page, [counts, storage, teams], folders] = await Promise.all([
        rows.page(scope, filter, {
          tag: `drive-files:${field}`,
          field,
          direction: -1,
          limit: q.limit,
          cursor: q.cursor,
        }),
        sideP,
        treeP,
      ]);
      return {
        data: page.data.map(view),
        total: page.total,
        hasMore: page.cursor !== null,
        cursor: page.cursor,
        folders: folders.map((f) => toDriveFolder(f, counts.get(f._id) ?? 0)),
        storage,
        scope: { type: scope.type, id: scope.id, name: scope.name, role: scope.role },
        teams,
      };
    },

    /**
     * Upload: check the folder, type the bytes, then the crash-safe steps of
     * platform/drive/reservations.repository.ts: store a reservation, reserve the space on the meter (one
     * conditional $inc that records the reservation), store the bytes in GridFS under an id
     * chosen up front, insert the record under a free name, drop the reservation; then ask the
     * drive pool for the text. A failure after the reservation deletes the bytes and gives the
     * space back; a crash is settled by the scheduler's `drive.repair` the same way.
     */
    async create(actor: DriveActor, body: DriveFileCreate): Promise<DriveFile> {
      const { caller } = actor;
      const mine = rows.forAccount(caller.accountId);
      await repo.ensureIndexes();
      const folderId = await writableFolder(caller, normFolderRef(body.folderId) ?? null, 'folderId');
      const scope = personalScope(caller, actor.accountName);
      const bytes =
        body.content !== undefined ? Buffer.from(body.content, 'utf8') : Buffer.from(body.contentBase64!, 'base64');
      const ext = extOf(body.name);
      const type = await detectDriveType(bytes, ext);
      const id = newId('dfl');
      const res = newDriveReservation({
        drive: scope.usageId,
        accountId: caller.accountId,
        bytes: bytes.length,
        fileId: id,
      });
      const steps = driveUploadSteps;
      const giveUp = (undo: Promise<void>) =>
        undo.catch((e: unknown) =>
          rt.log.warn('drive reservation not settled after a failed upload; drive.repair settles it', {
            reservationId: res._id,
            err: e as Error,
          }),
        );
      await steps.open(rt.store, res);
      try {
        await steps.reserve(rt.store, res, quotaOf(actor.plan));
      } catch (err) {
        // The meter refused it (413, or it kept changing): it never moved. Any other error may have moved it.
        await giveUp(err instanceof AppError ? steps.discard(rt.store, res) : steps.abort(rt.store, res));
        throw err;
      }
      let doc: DriveFileDoc;
      try {
        const stored = await steps.bytes(rt.store, res, bytes, { contentType: type.mimeType, filename: body.name });
        await steps.commit(rt.store, res);
        const now = new Date();
        const owner = { accountId: caller.accountId, teamId: null };
        ({ result: doc } = await repo.withFreeName(owner, folderId, body.name, async (name) => {
          const d: DriveFileDoc = {
            _id: id,
            accountId: caller.accountId,
            teamId: null,
            name,
            nameKey: nameKeyOf(name),
            ext,
            kind: type.kind,
            mimeType: type.mimeType,
            sizeBytes: bytes.length,
            folderId,
            isStarred: false,
            tags: [...new Set(body.tags ?? [])],
            description: body.description ?? '',
            blobId: stored.blobId,
            sha256: stored.sha256,
            trashedAt: null,
            lastAccessedAt: null,
            text: { status: 'pending', chars: 0, truncated: false, engine: null, error: null, at: null },
            version: 1,
            createdAt: now,
            updatedAt: now,
          };
          await mine.insertFile(d);
          return d;
        }));
      } catch (err) {
        await giveUp(steps.abort(rt.store, res));
        throw err;
      }
      // The file is stored: a failure here only leaves the reservation for drive.repair (which keeps the file).
      await steps.close(rt.store, res).catch((e: unknown) =>
        rt.log.warn('drive reservation not closed; drive.repair closes it', {
          reservationId: res._id,
          err: e as Error,
        }),
      );
      await requestDriveText(rt, { fileId: id, accountId: caller.accountId });
      return view(doc);
    },

    /**
     * The file as the caller reaches it (404 otherwise, and while it is being purged) with its
     * signed, time-limited download link: null while the file is in the trash.
     */
    async link(
      caller: DriveCaller,
      id: string,
    ): Promise<{ file: DriveFileDoc; link: { url: string; expiresAt: Date } | null }> {
      const cf = await repo.findFileForCaller(caller, id);
      if (!cf || cf.file.purgingAt) throw new AppError('not_found', 'file not found');
      const f = cf.file;
      return {
        file: f,
        link: f.trashedAt ? null : driveDownloadLink(rt.config, { fileId: f._id, keyId: caller.keyId }),
      };
    },

    async get(actor: DriveActor, id: string): Promise<DriveFileHandle> {
      const { file: f, link } = await service.link(actor.caller, id);
      const v = view(f);
      return {
        id: v.id,
        name: v.name,
        kind: v.kind,
        mimeType: v.mimeType,
        sizeBytes: v.sizeBytes,
        ext: v.ext,
        folderId: v.folderId,
        teamId: v.teamId,
        isStarred: v.isStarred,
        tags: v.tags,
        description: v.description,
        trashedAt: v.trashedAt,
        downloadUrl: link?.url ?? null,
        downloadExpiresAt: link ? link.expiresAt.toISOString() : null,
        previewUrl: v.previewUrl,
        version: v.version,
        createdAt: v.createdAt,
        updatedAt: v.updatedAt,
      };
    },

    /**
     * PATCH: only the fields sent change, in one conditional update (If-Match honoured). A new
     * name or folder must leave the name free in the destination (409 conflict otherwise:
     * PATCH never renames behind the caller's back). kind and mimeType stay as the bytes said.
     */
    async update(
      actor: DriveActor,
      id: string,
      body: DriveFileUpdate,
      ifMatch: number | undefined,
    ): Promise<DriveFile> {
      const { caller } = actor;
      const mine = rows.forAccount(caller.accountId);
      await repo.ensureIndexes();
      const cf = await repo.findFileForCaller(caller, id);
      if (!cf) throw new AppError('not_found', 'file not found');
      if (cf.readOnly) throw teamDriveReadOnly();
      const f = cf.file;
      if (f.trashedAt)
        throw new AppError(
          'conflict',
          'the file is in the trash: restore it first (POST /drive/files/bulk with action restore)',
        );
      const set: Partial<DriveFileDoc> = {};
      if (body.folderId !== undefined)
        set.folderId = await writableFolder(caller, normFolderRef(body.folderId) ?? null, 'folderId');
      if (body.name !== undefined) {
        set.name = body.name;
        set.ext = extOf(body.name);
        set.nameKey = nameKeyOf(body.name);
      }
      if (body.isStarred !== undefined) set.isStarred = body.isStarred;
      if (body.tags !== undefined) set.tags = [...new Set(body.tags)];
      if (body.description !== undefined) set.description = body.description;
      try {
        const after = await mine.updateFile(
          id,
          { $set: set },
          { expectedVersion: ifMatch, extra: { teamId: null, trashedAt: null }, what: 'file' },
        );
        if (body.name !== undefined || body.tags !== undefined || body.description !== undefined)
          await reindexMeta(after);
        return view(after);
      } catch (err) {
        if (isDuplicateKey(err))
          throw new AppError(
            'conflict',
            `name: a file named "${set.name ?? f.name}" already exists in that folder; choose another name`,
          );
        throw err;
      }
    },

    /**
     * Bulk: each file changes with one conditional update of its own (atomic per file, not across
     * files); each failure is reported with its reason. move and restore take the next free
     * "name (n).ext" when the name is taken in the destination.
     * Length: one bulk request: its per-file step (one, 83 lines), the destination folders it resolves and
     * the result it fills are shared across the files, run with a concurrency limit.
     */
    async bulk(actor: DriveActor, body: DriveBulkRequest): Promise<DriveBulkResult> {
      const { caller } = actor;
      await repo.ensureIndexes();
      const ids = [...new Set(body.fileIds)];
      const succeeded = new Set<string>();
      const failures = new Map<string, DriveBulkResult['failed'][number]['reason']>();
      // Which of the ids the caller reaches: one findOne per id (tenant-filtered, served by the
      // _id index), at most BULK_CONCURRENCY at once; team roles and folders read once each.
      const reachable = new Map<string, DriveFileDoc>();
      const teamRoles = new Map<string, Promise<boolean>>();
      const folderPaths = new Map<string, Promise<{ _id: string; path: string[] } | null>>();
      const teamReached = (d: DriveFileDoc) => {
        let p = teamRoles.get(d.teamId!);
        if (!p) {
          p = resolveDriveScope(rt.store, caller, { teamId: d.teamId })
            .then((scope) => scope.accountId === d.accountId)
            .catch(() => false);
          teamRoles.set(d.teamId!, p);
        }
        return p;
      };
      const folderOf = (d: DriveFileDoc, folderId: string) => {
        const key = `${d.accountId}/${d.teamId ?? ''}/${folderId}`;
        let p = folderPaths.get(key);
        if (!p) {
          p = rows.folderPath(d, folderId);
          folderPaths.set(key, p);
        }
        return p;
      };
      await eachLimited(ids, BULK_CONCURRENCY, async (id) => {
        const d = await rows.bulkCandidate(caller, id);
        if (!d) return;
        if (d.teamId === null ? d.accountId !== caller.accountId : !(await teamReached(d))) return;
        if (isPinned(caller)) {
          const folder = d.folderId ? await folderOf(d, d.folderId) : null;
          if (!folder || !folderInsidePins(caller, folder)) return;
        }
        reachable.set(d._id, d);
      });

      let dest: string | null = null;
      let destProblem: 'folder_not_found' | 'team_drive_read_only' | null = null;
      if (body.action === 'move') {
        const ref = normFolderRef(body.folderId) ?? null;
        if (ref === null) {
          if (isPinned(caller)) destProblem = 'folder_not_found';
        } else {
          const f = await repo.findFolderForCaller(caller, ref);
          if (!f) destProblem = 'folder_not_found';
          else if (f.readOnly) destProblem = 'team_drive_read_only';
          else dest = f.folder._id;
        }
      }

      const now = new Date();
      const cutoff = new Date(now.getTime() - rt.config.DRIVE_TRASH_DAYS * 86_400_000);
      const mine = rows.forAccount(caller.accountId);
      // A pinned caller's update also requires the file still in the folder read above: a file
      // moved out of the pins meanwhile is not changed (and fails as not_found).
      const target = (id: string): BulkTarget =>
        isPinned(caller) ? { id, folderId: reachable.get(id)!.folderId } : { id };
      const owner = { accountId: caller.accountId, teamId: null };

      /** Record one file's outcome (the bulk answer lists every file as succeeded or failed). */
      const fail = (id: string, reason: DriveBulkResult['failed'][number]['reason']): void => {
        failures.set(id, reason);
      };
      const done = (id: string): void => {
        succeeded.add(id);
      };

      const one = async (id: string): Promise<void> => {
        const d = reachable.get(id);
        if (!d) return fail(id, 'not_found');
        if (d.teamId !== null) return fail(id, 'team_drive_read_only');
        const reread = () => mine.reread(target(id));
        switch (body.action) {
          case 'star':
          case 'unstar': {
            const v = body.action === 'star';
            if (await mine.star(target(id), v, now)) return done(id);
            const cur = await reread();
            if (!cur) return fail(id, 'not_found');
            if (cur.trashedAt) return fail(id, 'trashed');
            return done(id); // already in that state
          }
          case 'trash': {
            if (await mine.trash(target(id), now)) return done(id);
            const cur = await reread();
            return fail(id, !cur ? 'not_found' : 'already_trashed');
          }
          case 'restore': {
            if (!d.trashedAt) {
              const cur = await reread();
              if (!cur) return fail(id, 'not_found');
              if (!cur.trashedAt) return fail(id, 'not_trashed');
            }
            const { name: restoredAs, result: matched } = await repo.withFreeName(owner, d.folderId, d.name, (name) =>
              mine.restore(target(id), cutoff, name, extOf(name), now),
            );
            if (matched) {
              if (restoredAs !== d.name) await reindexMeta({ ...d, name: restoredAs });
              return done(id);
            }
            const cur = await reread();
            if (!cur) return fail(id, 'not_found');
            if (!cur.trashedAt) return fail(id, 'not_trashed');
            return fail(id, 'restore_window_expired');
          }
          case 'move': {
            if (destProblem) return fail(id, destProblem);
            if (d.trashedAt) return fail(id, 'trashed');
            if (d.folderId === dest) return done(id);
            const { name: movedAs, result: matched } = await repo.withFreeName(owner, dest, d.name, (name) =>
              mine.move(target(id), dest, name, extOf(name), now),
            );
            if (matched) {
              if (movedAs !== d.name) await reindexMeta({ ...d, name: movedAs });
              return done(id);
            }
            const cur = await reread();
            return fail(id, !cur ? 'not_found' : 'trashed');
          }
        }
      };
      await eachLimited(ids, BULK_CONCURRENCY, async (id) => {
        try {
          await one(id);
        } catch (err) {
          if (err instanceof AppError && err.code === 'conflict') return fail(id, 'name_conflict');
          // Other files may have changed already (and other requests keep writing): report this
          // one as failed and let the rest finish, so the answer always names every file.
          succeeded.delete(id);
          failures.set(id, 'internal_error');
          rt.log.error('drive bulk: a file failed', { fileId: id, action: body.action, err: err as Error });
        }
      });
      return {
        action: body.action,
        succeeded: ids.filter((id) => succeeded.has(id)),
        failed: ids.filter((id) => failures.has(id)).map((fileId) => ({ fileId, reason: failures.get(fileId)! })),
      };
    },
  };
  return service;
}
