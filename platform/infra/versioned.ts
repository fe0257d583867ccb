import type { Collection, Document, Filter, UpdateFilter } from 'mongodb';
import { AppError } from './errors';

/**
 * Optimistic concurrency for every mutable resource. Each document carries an
 * integer `version`, 1 at creation and +1 on every change; responses carry it as the field
 * `version` and the `ETag: "<version>"` header (api/http/route.ts). An update sent with
 * `If-Match: "<version>"` applies only while the stored version is still that one: a caller that
 * lost the race gets 409 `version_conflict` instead of overwriting someone else's change (answered
 * as 412 `precondition_failed` over HTTP, since the request named the version: api/http/route.ts).
 * Without If-Match the update applies to whatever is stored; it only `$set`s the fields passed,
 * in one atomic command, so two concurrent PATCHes of different fields never lose either.
 */
export interface Versioned {
  _id: string;
  accountId: string;
  version: number;
}

/**
 * Apply `update` to the caller's document `id` (plus `version: +1` and `updatedAt: now`) in one
 * atomic findOneAndUpdate and return the document after it. 404 `not_found` when the account has
 * no such document (or `extra` excludes it), 409 `version_conflict` when `expectedVersion` is
 * given and the stored version differs.
 */
export async function updateVersioned<T extends Versioned & Document>(
  col: Pick<Collection<T>, 'findOneAndUpdate' | 'findOne'>,
  accountId: string,
  id: string,
  update: UpdateFilter<T>,
  opts: { expectedVersion?: number; extra?: Filter<T>; what?: string; now?: Date } = {},
): Promise<T> {
  const base = { _id: id, accountId, ...(opts.extra ?? {}) } as Filter<T>;
  const filter = (opts.expectedVersion === undefined ? base : { ...base, version: opts.expectedVersion }) as Filter<T>;
  const full = {
    ...update,
    $set: { ...((update.$set as object) ?? {}), updatedAt: opts.now ?? new Date() },
    $inc: { ...((update.$inc as object) ?? {}), version: 1 },
  } as unknown as UpdateFilter<T>;
  const after = await col.findOneAndUpdate(filter, full, { returnDocument: 'after' });
  if (after) return after as T;
  throw await missOrConflict(col, base, opts.expectedVersion, opts.what ?? 'resource');
}

/** 409 version_conflict: `what` is at version `current`, not the `expected` one If-Match named. The one wording every resource uses. */
export function versionConflict(what: string, current: number, expected: number): AppError {
  return new AppError(
    'version_conflict',
    `${what} is at version ${current}, not ${expected} (If-Match): someone changed it since you read it; fetch it again and re-apply your change`,
  );
}

/** Why a versioned write matched nothing: the document is not the caller's (404) or it moved on (409). */
export async function missOrConflict<T extends Versioned & Document>(
  col: Pick<Collection<T>, 'findOne'>,
  base: Filter<T>,
  expectedVersion: number | undefined,
  what: string,
): Promise<AppError> {
  const current = expectedVersion === undefined ? null : await col.findOne(base, { projection: { version: 1 } });
  if (!current) return new AppError('not_found', `${what} not found`);
  return versionConflict(what, current.version, expectedVersion!);
}
