import type { Database } from '../infra/mongo';

/**
 * The audit log's storage beside its two writers (audit.recorder.ts writes an API process's
 * entries, audit.writer.ts drains the audit queue): what the scheduler deletes.
 */

/** Deletes the entries made before `cutoff` (the scheduler's `audit.expire`). */
export async function expireAuditEntries(db: Database, cutoff: Date): Promise<number> {
  return (await db.audit.deleteMany({ at: { $lt: cutoff } })).deletedCount;
}
