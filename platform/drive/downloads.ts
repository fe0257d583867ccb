import type { Config } from '../infra/config';
import { AppError } from '../infra/errors';
import type { Logger } from '../infra/log';
import type { ApiKeyDoc, Store } from '../infra/mongo';
import { createAccountsRepository } from '../accounts/accounts.repository';
import { driveCallerOf } from './access';
import { createDriveRepository, createLastAccessedWriter } from './drive.repository';
import type { DriveFileDoc } from './drive.types';
import { verifyDriveDownloadLink } from './links';

/** Who a link acts for: the key that asked for it, as it is now. */
export type LinkCaller = Pick<ApiKeyDoc, '_id' | 'accountId' | 'scopes' | 'folderPins'>;

/**
 * The checks of the public signed stream, run on EVERY fetch (SPEC 2.19, 5.5):
 * 1. the signature (403 link_invalid) and the expiry (410 link_expired);
 * 2. the signing key, read fresh from the database (one findOne by _id, never a cache): still
 *    active and still holding drive:read, else 410 link_revoked;
 * 3. the file, looked up for that key (tenant, team membership, folder pins), not trashed and not
 *    being purged, else 404 not_found.
 */
export function createDriveDownloads(deps: {
  store: Store;
  log: Logger;
  config: Pick<Config, 'ASSET_SIGNING_SECRET'>;
  /** The file as the key may see it (tenant, team, pins), or null. Default: the Drive repository's findFileForCaller. */
  findFile?(caller: LinkCaller, fileId: string): Promise<DriveFileDoc | null>;
}) {
  const repo = createDriveRepository(deps.store);
  const findFile =
    deps.findFile ??
    (async (key: LinkCaller, fileId: string) =>
      (await repo.findFileForCaller(driveCallerOf(key), fileId))?.file ?? null);
  const keys = createAccountsRepository(deps.store);
  const touch = createAccessToucher(deps.store, deps.log);
  return {
    touch,
    async resolve(input: {
      fileId: string;
      keyId: string | undefined;
      exp: string | undefined;
      sig: string | undefined;
      now?: Date;
    }): Promise<DriveFileDoc> {
      const check = verifyDriveDownloadLink(deps.config, input);
      if (check === 'invalid')
        throw new AppError(
          'link_invalid',
          'download link: the signature does not match; ask GET /drive/files/{id} for a new link',
        );
      if (check === 'expired')
        throw new AppError(
          'link_expired',
          'download link: expired; ask GET /drive/files/{id} or …/content for a new one',
        );
      const key = await keys.signingKey(input.keyId!);
      if (!key || key.revokedAt || !key.scopes.includes('drive:read')) {
        throw new AppError('link_revoked', 'download link: the API key that made it is revoked or lost drive:read');
      }
      const file = await findFile(key, input.fileId);
      if (!file || file.trashedAt || file.purgingAt) throw new AppError('not_found', 'file not found');
      return file;
    },
  };
}

/** Coalescing window of lastAccessedAt: at most one write per file per window per process. */
export const ACCESS_TOUCH_INTERVAL_MS = 60_000;
const TOUCH_MEMORY_MAX = 10_000;

/**
 * lastAccessedAt without a write per byte range: a file is written only when its stored value is
 * older than ACCESS_TOUCH_INTERVAL_MS (or null) AND this process did not write it within that
 * window; the write itself is conditional on the stored value still being old, so processes
 * racing each other write once between them in most cases. Fire and forget: the download never
 * waits for it (the returned promise is for tests).
 */
export function createAccessToucher(store: Store, log: Logger, opts: { intervalMs?: number } = {}) {
  const interval = opts.intervalMs ?? ACCESS_TOUCH_INTERVAL_MS;
  const writeLastAccessed = createLastAccessedWriter(store);
  const recent = new Map<string, number>();
  return (file: Pick<DriveFileDoc, '_id' | 'lastAccessedAt'>, now = new Date()): Promise<void> | undefined => {
    const t = now.getTime();
    if (file.lastAccessedAt && t - file.lastAccessedAt.getTime() < interval) return undefined;
    const last = recent.get(file._id);
    if (last !== undefined && t - last < interval) return undefined;
    recent.delete(file._id);
    recent.set(file._id, t);
    // Oldest first (insertion order): forget the oldest once the memory is full.
    if (recent.size > TOUCH_MEMORY_MAX)
      for (const id of [...recent.keys()].slice(0, recent.size - TOUCH_MEMORY_MAX)) recent.delete(id);
    const stale = new Date(t - interval);
    return writeLastAccessed(file._id, stale, now).then(
      () => undefined,
      (err: unknown) => log.warn('drive lastAccessedAt not written', { fileId: file._id, err: err as Error }),
    );
  };
}

/**
 * Content-Disposition for a download (RFC 6266): attachment (never rendered on this origin), an
 * ASCII fallback name for old clients and the exact name as RFC 5987 `filename*`.
 */
export function contentDisposition(name: string): string {
  const ascii =
    name
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .replace(/[^\x20-\x7e]/g, '_')
      .replace(/["\\%]/g, '_') || 'download';
  const exact = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${exact}`;
}
