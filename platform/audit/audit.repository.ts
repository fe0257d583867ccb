import { type AuditDoc, type Store, openStore } from '../infra/mongo';

/**
 * The audit log's storage: the inserts of its two writers (audit.recorder.ts writes an API
 * process's entries, audit.writer.ts drains the audit queue) and what the scheduler deletes.
 */

/** Insert entries, unordered: a duplicate `_id` (a copy already stored) fails only itself. */
export async function insertAuditEntries(
  store: Store,
  entries: AuditDoc[],
  opts: { timeoutMS?: number } = {},
): Promise<void> {
  await openStore(store).audit.insertMany(entries, { ordered: false, ...opts });
}

/** Deletes the entries made before `cutoff` (the scheduler's `audit.expire`). */
export async function expireAuditEntries(store: Store, cutoff: Date): Promise<number> {
  const db = openStore(store);
  return (await db.audit.deleteMany({ at: { $lt: cutoff } })).deletedCount;
}
