import { DRIVE_LIMITS, type DriveFileText, type DriveSearchQuery, type DriveSearchResult } from '../../contracts/drive';
import { resolveDriveScope, teamScope, personalScope, type DriveCaller, type DriveScope } from './access';
import { createDriveRepository, toDriveFile } from './drive.repository';
import { searchDrive, type SearchScope } from './search-index.repository';
import { createTeams } from './teams.repository';
import { readDriveText } from './text';
import { notFound } from '../infra/errors';
import type { Runtime } from '../runtime';

/**
 * GET /drive/files/{id}/text and GET /drive/search. Every lookup goes through the Drive
 * repository (tenant, team membership, key pins): what the caller cannot reach is 404 on …/text
 * and never a hit.
 */
export function createDriveSearchService(rt: Runtime) {
  const repo = createDriveRepository(rt.store);
  const base = rt.config.PUBLIC_BASE_URL;

  /** The drives a search covers: one team (teamId), else the personal drive and every team of the account. */
  async function drivesOf(caller: DriveCaller, teamId: string | undefined): Promise<DriveScope[]> {
    if (teamId) return [await resolveDriveScope(rt.store, caller, { teamId })];
    const teams = await createTeams(rt.store).listForAccount(caller.accountId);
    return [personalScope(caller), ...teams.map((m) => teamScope(caller, m))];
  }

  return {
    /** The file's stored text, cut at about 12K characters on a word boundary; '' while pending. */
    async text(caller: DriveCaller, fileId: string): Promise<{ body: DriveFileText; pending: boolean }> {
      const found = await repo.findFileForCaller(caller, fileId);
      if (!found) throw notFound('file');
      const t = await readDriveText(rt.store, found.file, { maxChars: DRIVE_LIMITS.textReadChars });
      const body: DriveFileText = {
        file: toDriveFile(base, found.file),
        content: t.content,
        truncated: t.truncated,
        textStatus: t.status,
        textError: found.file.text?.error ?? null,
        engine: t.engine,
      };
      return { body, pending: t.status === 'pending' };
    },

    async search(caller: DriveCaller, q: DriveSearchQuery): Promise<DriveSearchResult> {
      const drives = await drivesOf(caller, q.teamId);
      const scopes: SearchScope[] = await Promise.all(
        drives.map(async (d) => {
          const visible = await repo.visibleFolderIds(d);
          return {
            accountId: d.accountId,
            teamId: d.teamId,
            visibleFolderIds: visible === null ? null : new Set(visible),
          };
        }),
      );
      // A pinned key that sees no folder of a drive sees nothing there (root files are outside every pin).
      const searchable = scopes.filter((s) => s.visibleFolderIds === null || s.visibleFolderIds.size > 0);
      const r = await searchDrive(rt.store, { scopes: searchable, query: q.q, kind: q.kind ?? null, limit: q.limit });
      return {
        query: q.q,
        terms: r.terms,
        data: r.hits.map((h) => ({
          file: toDriveFile(base, h.file),
          score: h.score,
          matchField: h.matchField,
          snippet: h.snippet,
          highlights: h.highlights,
        })),
        hasMore: r.hasMore,
      };
    },
  };
}
