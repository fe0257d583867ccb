import type { AmqpClient } from '../infra/amqp';
import type { Config } from '../infra/config';
import type { Logger } from '../infra/log';
import type { Store } from '../infra/mongo';
import { claimDriveTextRequest, failPendingDriveText, findPendingDriveTexts } from './text.repository';

/**
 * The message the drive pool consumes: extract (again) the text of one file. WARNING: read by
 * drive workers of other versions; add fields only.
 */
export interface DriveTextRequest {
  fileId: string;
  accountId: string;
}

/**
 * Ask the drive pool to extract a file's text (after an upload was stored; the upload answers
 * without waiting). A persistent message with a publisher confirm. A failed publish only logs:
 * the file keeps `text.status: 'pending'` and the scheduler's `sweepDriveText` publishes it
 * again after DRIVE_TEXT_GRACE_MS, so an upload never fails because the broker blinked.
 * Extraction is idempotent, so a duplicate request (sweep and original both delivered) is harmless.
 */
export async function requestDriveText(
  rt: { amqp: AmqpClient; log: Logger; config: Config },
  req: DriveTextRequest,
): Promise<void> {
  try {
    await rt.amqp.publishToPool('drive', { fileId: req.fileId, accountId: req.accountId } satisfies DriveTextRequest);
  } catch (err) {
    rt.log.warn('drive text request not published; the sweep will retry', { fileId: req.fileId, err: err as Error });
  }
}

/** A file whose text is still `pending` this long after its last change is published again by the sweep. */
export const DRIVE_TEXT_GRACE_MS = 30_000;

/** Republishes of one file before the sweep gives up on it (text status `failed`): about 30 s, 1, 2, 4, 8, 16 min after upload. */
export const DRIVE_TEXT_MAX_REQUESTS = 6;

/** Files one sweep republishes at most. */
const SWEEP_BATCH = 500;

/**
 * The scheduler's sweep: publish again the extraction of files whose text is still `pending`
 * (the upload's publish failed, the message was lost, or the pool was down), not trashed, older
 * than `graceMs`. A file is republished at most once per `graceMs × 2^n` (n = its republishes so
 * far); after DRIVE_TEXT_MAX_REQUESTS it is marked `failed` (no drive worker finished it). Returns
 * how many were republished and given up.
 */
export async function sweepPendingDriveText(
  rt: { store: Store; amqp: AmqpClient; log: Logger; config: Config },
  opts: { now?: Date; graceMs?: number } = {},
): Promise<{ republished: number; failed: number }> {
  const now = opts.now ?? new Date();
  const grace = opts.graceMs ?? DRIVE_TEXT_GRACE_MS;
  const pending = await findPendingDriveTexts(rt.store, new Date(now.getTime() - grace), SWEEP_BATCH);
  let republished = 0;
  let failed = 0;
  for (const f of pending) {
    const n = f.textRequests ?? 0;
    const last = f.textRequestedAt ?? f.createdAt;
    if (now.getTime() - last.getTime() < grace * 2 ** Math.min(n, 10)) continue;
    if (n >= DRIVE_TEXT_MAX_REQUESTS) {
      failed += await failPendingDriveText(rt.store, f._id, n + 1, now);
      continue;
    }
    // Claim this republish (guarded by the count read, so two sweeps never both publish it).
    if (!(await claimDriveTextRequest(rt.store, f, n, now))) continue;
    await requestDriveText(rt, { fileId: f._id, accountId: f.accountId });
    republished++;
  }
  if (republished || failed) rt.log.info('drive text sweep', { republished, failed });
  return { republished, failed };
}
