/**
 * Drive documents (SPEC 2.19, 3.5), shared by the API (files, folders, links, search), the drive
 * pool (text extraction) and the scheduler (trash purge).
 * WARNING: collection and field names are persisted; add fields, never rename them.
 *
 * Collections (platform/mongo.ts COLLECTIONS): drive_files, drive_folders, drive_texts,
 * drive_search_tokens, drive_usage, teams, team_members; bytes in the GridFS bucket `drive_blobs`
 * (never exposed: no GridFS id, bucket or chunk ever reaches a response).
 */

/** SPEC 2.19 kinds. WARNING: public contract. */
export const DRIVE_KINDS = ['image', 'video', 'audio', 'pdf', 'document', 'spreadsheet', 'presentation', 'text', 'code', 'archive', 'other'] as const;
export type DriveKind = (typeof DRIVE_KINDS)[number];

/** Where a file or folder lives: an account's personal drive, or a team drive (read-only over the API). */
export type DriveOwner = { accountId: string; teamId: null } | { accountId: string; teamId: string };

export interface DriveFileDoc {
  _id: string; // dfl_…
  /** The personal drive's account; for a team file, the team's owning account (teams.ownerAccountId). */
  accountId: string;
  /** Null for personal files; the team id for team-drive files. */
  teamId: string | null;
  name: string;
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
  text: { status: 'pending' | 'ready' | 'none' | 'failed'; chars: number; truncated: boolean; engine: string | null; error: string | null; at: Date | null };
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
