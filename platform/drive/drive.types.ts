/**
 * Drive documents (SPEC 2.19, 3.5), shared by the API (files, folders, links, search), the drive
 * pool (text extraction) and the scheduler (trash purge).
 * WARNING: collection and field names are persisted; add fields, never rename them.
 *
 * Collections (platform/infra/mongo.ts COLLECTIONS): drive_files, drive_folders, drive_texts,
 * drive_search_tokens, drive_text_pages, drive_usage, drive_reservations, teams, team_members; bytes in the GridFS
 * bucket `drive_blobs` (never exposed: no GridFS id, bucket or chunk ever reaches a response).
 */

import type { DRIVE_KINDS } from '../../contracts/drive';

/** SPEC 2.19 kinds (the list is contracts/drive.ts DRIVE_KINDS). */
export type DriveKind = (typeof DRIVE_KINDS)[number];

export interface DriveFileDoc {
  _id: string; // dfl_…
  /** The personal drive's account; for a team file, the team's owning account (teams.ownerAccountId). */
  accountId: string;
  /** Null for personal files; the team id for team-drive files. */
  teamId: string | null;
  name: string;
  /**
   * The name's unique key within its folder: the lower-cased name while active, `#trash:<id>`
   * while trashed (no valid file name has that shape: it has no extension). A unique index on
   * (accountId, teamId, folderId, nameKey) keeps active names unique per folder without a partial
   * index (FerretDB 1.24 has none). Absent on no document.
   */
  nameKey: string;
  /** Lower-case extension without the dot; '' when none. */
  ext: string;
  kind: DriveKind;
  mimeType: string;
  sizeBytes: number;
  /** Null: the drive's root. */
  folderId: string | null;
  isStarred: boolean;
  tags: string[];
  description: string;
  /** The GridFS file holding the bytes (internal; never answered). */
  blobId: string;
  /** sha256 of the bytes, hex (internal). */
  sha256: string;
  trashedAt: Date | null;
  lastAccessedAt: Date | null;
  /** Text extraction state: pending until the drive pool stored it (or found none). */
  text: {
    status: 'pending' | 'ready' | 'none' | 'failed';
    chars: number;
    truncated: boolean;
    engine: string | null;
    error: string | null;
    at: Date | null;
  };
  /** When the scheduler's sweep last republished the text extraction (platform/drive/text-queue.ts); absent until then. */
  textRequestedAt?: Date | null;
  /** Republishes of the text extraction by the sweep so far; absent until the first. */
  textRequests?: number;
  /** Set when the purge of this trashed file began (it is resumable from any step). */
  purgingAt?: Date | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface DriveFolderDoc {
  _id: string; // dfo_…
  accountId: string;
  teamId: string | null;
  name: string;
  parentFolderId: string | null;
  /** The lower-cased name: unique among siblings (index on accountId, teamId, parentFolderId, nameKey). */
  nameKey: string;
  /** Ancestor folder ids, root first (for subtree checks and pinning without recursion). */
  path: string[];
  color: string | null;
  sticker: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Extracted text of one file, capped at DRIVE_TEXT_STORED_CHARS. `_id` = the file id. */
export interface DriveTextDoc {
  _id: string;
  accountId: string;
  teamId: string | null;
  content: string;
  truncated: boolean;
  engine: string;
  at: Date;
}

/** Storage meter per drive: `_id` = accountId (personal) or `team:<teamId>`. Updated with $inc. */
export interface DriveUsageDoc {
  _id: string;
  bytesUsed: number;
  fileCount: number;
  /**
   * The last 256 files whose share the trash purge took off this meter (platform/drive/purge.ts):
   * the guard that makes each decrement happen once, however often a purge is repeated.
   */
  purgedRefs?: string[];
  /**
   * The folder-tree lock of this drive (folder creates under a parent and folder moves take it,
   * so two moves cannot build a cycle and a path rewrite never races a create): held until
   * `folderLockUntil`, by `folderLockToken`.
   */
  folderLockUntil?: Date | null;
  folderLockToken?: string | null;
  /**
   * The reservations (drive_reservations `_id`s) whose bytes this meter counts: pushed in the same
   * update that reserves them, pulled in the same update that gives them back, and pulled once
   * the file record exists. So a reservation is given back only if it was taken, and only once.
   */
  reservedRefs?: string[];
  /**
   * Set while a folder move may have left descendants with stale `path`s (set with the folder-tree
   * lock of the move, cleared with its release once the subtree is rewritten). A drive found
   * marked under the lock, or by the scheduler's `drive.repair` a minute later, gets every folder
   * path recomputed from `parentFolderId`.
   */
  pathsDirtyAt?: Date | null;
}

/**
 * One upload in flight (platform/drive/reservations.repository.ts), stored before the meter moves and
 * deleted once the file record exists or everything was given back. The scheduler settles those
 * left past `until` (the uploading process died): record present, the reservation just goes;
 * absent, the blob is deleted and the meter given back (once: `DriveUsageDoc.reservedRefs`).
 * WARNING: persisted.
 */
export interface DriveReservationDoc {
  _id: string; // drs_…
  /** The meter (drive_usage `_id`) the bytes are reserved on. */
  drive: string;
  accountId: string;
  bytes: number;
  /** The DriveFileDoc `_id` the upload will insert. */
  fileId: string;
  /** The GridFS id the bytes are stored under (chosen before they are written). */
  blobId: string;
  createdAt: Date;
  /** Left to the upload until then (pushed back right before the record is inserted); settled by the scheduler after. */
  until: Date;
  /** When a settler (the scheduler, or the failed upload itself) took it over; null until then. */
  settlingAt: Date | null;
}

/** A team (minimal membership for team drives). */
export interface TeamDoc {
  _id: string; // team_…
  name: string;
  /** The account whose storage holds the team drive's files. */
  ownerAccountId: string;
  createdAt: Date;
}

export interface TeamMemberDoc {
  _id: string; // `${teamId}:${accountId}`
  teamId: string;
  accountId: string;
  role: 'owner' | 'editor' | 'viewer';
  createdAt: Date;
}
