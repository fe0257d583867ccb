import { z } from 'zod';
import { ID_RULE, line, listLimit, listQuery, text, Version, whenField, wholeListQuery } from './common';

/**
 * Drive contracts (SPEC 2.19, 3.5, 4.10, 8). Owned by the files-and-folders part; the search
 * part completes DriveSearchHit / DriveSearchResult / DriveSearchQuery at the end of this file.
 */

/** SPEC 2.19 kinds. WARNING: public contract (the same list as platform/drive/drive.types.ts). */
export const DRIVE_KINDS = [
  'image',
  'video',
  'audio',
  'pdf',
  'document',
  'spreadsheet',
  'presentation',
  'text',
  'code',
  'archive',
  'other',
] as const;

/** SPEC 8 Drive limits. WARNING: public contract. */
export const DRIVE_LIMITS = {
  nameMax: 255,
  descriptionMax: 2000,
  tagsMax: 20,
  tagMax: 64,
  /** Bytes of `content` as UTF-8 (2 MiB). */
  contentBytesMax: 2 * 1024 * 1024,
  /** Bytes of `contentBase64` once decoded (4 MiB). */
  contentBase64BytesMax: 4 * 1024 * 1024,
  /** Characters of `contentBase64` (4 MiB decoded, canonical padding). */
  contentBase64CharsMax: Math.ceil((4 * 1024 * 1024) / 3) * 4,
  /** A POST /drive/files request body larger than this is refused before parsing (413 payload_too_large). */
  createBodyBytesMax: 6 * 1024 * 1024,
  bulkMax: 100,
  /** Folders per drive (the tree is answered whole). */
  foldersPerDrive: 1000,
  /** Nesting depth of folders (a root folder is depth 1). */
  folderDepthMax: 20,
  /** Characters of the extracted text GET /drive/files/{id}/text answers (about 12K). */
  textReadChars: 12_000,
} as const;

/** Extensions whose file may be sent as `content` (UTF-8 text). */
export const DRIVE_TEXT_CONTENT_EXTS = ['md', 'txt', 'csv', 'html', 'json'] as const;

const driveIdRe = new RegExp(ID_RULE.pattern);
/** A file or folder id in a body (the same rule as a path id: 400 naming the field, never a lookup). */
const bodyId = (what: string) =>
  z
    .string({ error: 'must be a string' })
    .min(1, { error: 'must not be empty' })
    .max(ID_RULE.maxLength, { error: `must be at most ${ID_RULE.maxLength} characters` })
    .regex(driveIdRe, { error: 'must be 1 to 128 letters, digits, _ and -' })
    .describe(what);

/** `folderId` of a create, update or move: a folder id, `root` or null (the root). */
const FolderRef = z
  .union([bodyId('A folder id (dfo_…).'), z.null()], { error: 'must be a folder id, "root" or null' })
  .describe('A folder id of the same drive, or "root" / null for the drive root.');

/** A file or folder name: one line, 1 to 255 characters, no `/`, trimmed. */
const baseName = line(DRIVE_LIMITS.nameMax)
  .trim()
  .min(1, { error: 'must not be empty' })
  .refine((s) => !s.includes('/') && !s.includes('\\'), { error: 'must not contain / or \\' })
  // The refinement above and the trim, as JSON Schema: no control character, / or \, not blank.
  .meta({ allOf: [{ pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f/\\\\]*$' }, { pattern: '\\S' }] });

/** File names need an extension: a non-empty stem, a dot, then 1 to 16 letters or digits. */
export function extOf(name: string): string {
  const i = name.lastIndexOf('.');
  return i > 0 && /^[A-Za-z0-9]{1,16}$/.test(name.slice(i + 1)) ? name.slice(i + 1).toLowerCase() : '';
}
const fileName = baseName
  .refine((s) => extOf(s) !== '', {
    error: 'must end with an extension (e.g. report.pdf): a dot and 1 to 16 letters or digits',
  })
  // As JSON Schema (before the trim): a non-empty stem, a dot, 1 to 16 letters or digits.
  .meta({
    allOf: [
      { pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f/\\\\]*$' },
      { pattern: '^\\s*\\S[\\s\\S]*\\.[A-Za-z0-9]{1,16}\\s*$' },
    ],
  })
  .describe(
    `File name with an extension, at most ${DRIVE_LIMITS.nameMax} characters, no / or \\. A name already used by an active file in the same folder gets a suffix: "report.pdf" becomes "report (1).pdf", then "report (2).pdf".`,
  );

const tags = z
  .array(line(DRIVE_LIMITS.tagMax).trim().min(1, { error: 'must not be empty' }), {
    error: 'must be an array of strings',
  })
  .max(DRIVE_LIMITS.tagsMax, { error: `must have at most ${DRIVE_LIMITS.tagsMax} tags` })
  .describe(
    `At most ${DRIVE_LIMITS.tagsMax} tags of at most ${DRIVE_LIMITS.tagMax} characters; duplicates are dropped.`,
  );
const description = text(DRIVE_LIMITS.descriptionMax).describe(`At most ${DRIVE_LIMITS.descriptionMax} characters.`);

const B64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const B64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Canonical base64: length a multiple of 4, standard alphabet, `=` padding only at the end, zero pad bits. */
export function base64Problem(s: string): string | null {
  if (s.startsWith('data:')) return 'must be plain base64 without a data: prefix';
  if (s.length % 4 !== 0 || !B64_RE.test(s))
    return 'must be canonical base64 (A-Z a-z 0-9 + /, padded with = to a multiple of 4)';
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  if (pad) {
    const last = B64_ALPHABET.indexOf(s[s.length - pad - 1]!);
    if ((pad === 2 && (last & 0xf) !== 0) || (pad === 1 && (last & 0x3) !== 0))
      return 'must be canonical base64 (non-zero padding bits)';
  }
  return null;
}
/** Decoded size of canonical base64. */
export const base64DecodedBytes = (s: string) => (s.length / 4) * 3 - (s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0);

/** SPEC 2.19 DriveFileCreate. */
export const DriveFileCreate = z
  .strictObject({
    name: fileName,
    content: z
      .string({ error: 'must be a string' })
      .regex(/^[^\u0000]*$/, { error: 'must not contain NUL characters' })
      .optional()
      .describe(
        `UTF-8 text of a ${DRIVE_TEXT_CONTENT_EXTS.join(', ')} file, at most ${DRIVE_LIMITS.contentBytesMax} bytes as UTF-8. Exactly one of content and contentBase64.`,
      ),
    contentBase64: z
      .string({ error: 'must be a string' })
      .optional()
      .describe(
        `The bytes of any file, canonical base64 without a data: prefix, at most ${DRIVE_LIMITS.contentBase64BytesMax} bytes decoded. Exactly one of content and contentBase64.`,
      ),
    folderId: FolderRef.optional(),
    description: description.optional(),
    tags: tags.optional(),
  })
  .superRefine((b, ctx) => {
    const has = (v: unknown) => v !== undefined;
    if (has(b.content) === has(b.contentBase64)) {
      ctx.addIssue({
        code: 'custom',
        path: [has(b.content) ? 'contentBase64' : 'content'],
        message: 'send exactly one of content and contentBase64',
      });
      return;
    }
    if (b.content !== undefined) {
      const ext = extOf(b.name);
      if (!(DRIVE_TEXT_CONTENT_EXTS as readonly string[]).includes(ext)) {
        ctx.addIssue({
          code: 'custom',
          path: ['content'],
          message: `is only for text files (${DRIVE_TEXT_CONTENT_EXTS.join(', ')}); send the bytes of a .${ext} file as contentBase64`,
        });
      } else if (
        b.content.length > DRIVE_LIMITS.contentBytesMax ||
        Buffer.byteLength(b.content, 'utf8') > DRIVE_LIMITS.contentBytesMax
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['content'],
          message: `must be at most ${DRIVE_LIMITS.contentBytesMax} bytes as UTF-8 (2 MB)`,
        });
      }
    }
    if (b.contentBase64 !== undefined) {
      if (b.contentBase64.length > DRIVE_LIMITS.contentBase64CharsMax) {
        ctx.addIssue({
          code: 'custom',
          path: ['contentBase64'],
          message: `must decode to at most ${DRIVE_LIMITS.contentBase64BytesMax} bytes (4 MB)`,
        });
        return;
      }
      const problem = base64Problem(b.contentBase64);
      if (problem) ctx.addIssue({ code: 'custom', path: ['contentBase64'], message: problem });
      else if (base64DecodedBytes(b.contentBase64) > DRIVE_LIMITS.contentBase64BytesMax)
        ctx.addIssue({
          code: 'custom',
          path: ['contentBase64'],
          message: `must decode to at most ${DRIVE_LIMITS.contentBase64BytesMax} bytes (4 MB)`,
        });
    }
  })
  .meta({ id: 'DriveFileCreate', oneOf: [{ required: ['content'] }, { required: ['contentBase64'] }] }); // exactly one, as the refinement says
export type DriveFileCreate = z.output<typeof DriveFileCreate>;

/** SPEC 2.19 DriveFileUpdate: only passed fields change. */
export const DriveFileUpdate = z
  .strictObject({
    name: fileName.optional(),
    folderId: FolderRef.optional(),
    isStarred: z.boolean({ error: 'must be a boolean' }).optional(),
    tags: tags.optional(),
    description: description.optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: name, folderId, isStarred, tags or description',
  })
  .meta({ id: 'DriveFileUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type DriveFileUpdate = z.output<typeof DriveFileUpdate>;

/** SPEC 2.19 DriveFile. Storage internals (GridFS ids, hashes) are never part of it. */
export const DriveFile = z
  .object({
    id: z.string().describe('dfl_ followed by a random part.'),
    name: z.string(),
    kind: z
      .enum(DRIVE_KINDS)
      .describe('From the bytes (magic numbers) and the extension: a PNG named .txt is an image.'),
    mimeType: z.string().describe('From the bytes first, then the extension.'),
    sizeBytes: z.number().int(),
    ext: z.string().describe('Lower-case extension without the dot; empty when none.'),
    folderId: z.string().nullable().describe('null is the drive root.'),
    teamId: z.string().nullable().describe('The team of a team-drive file; null in the personal drive.'),
    isStarred: z.boolean(),
    tags: z.array(z.string()),
    description: z.string(),
    trashedAt: z
      .string()
      .nullable()
      .describe('Set while in the trash; restorable for DRIVE_TRASH_DAYS (30) days, then purged.'),
    lastAccessedAt: z.string().nullable().describe('Last download (coalesced: updated at most about once a minute).'),
    textStatus: z
      .enum(['pending', 'ready', 'none', 'failed'])
      .describe(
        'Text extraction: pending right after upload, then ready (GET …/text and search see it), none (no text in this format) or failed.',
      ),
    version: Version,
    createdAt: z.string(),
    updatedAt: z.string(),
    previewPath: z.string().describe('Relative in-app preview page: /drive/preview/{id}.'),
    previewUrl: z.string().nullable().describe('Absolute in-app preview page.'),
  })
  .meta({ id: 'DriveFile' });
export type DriveFile = z.infer<typeof DriveFile>;

/** SPEC 2.19 DriveFileHandle. */
export const DriveFileHandle = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: z.enum(DRIVE_KINDS),
    mimeType: z.string(),
    sizeBytes: z.number().int(),
    ext: z.string(),
    folderId: z.string().nullable(),
    teamId: z.string().nullable(),
    isStarred: z.boolean(),
    tags: z.array(z.string()),
    description: z.string(),
    trashedAt: z.string().nullable(),
    downloadUrl: z
      .string()
      .nullable()
      .describe(
        'Absolute, signed, valid about 15 minutes; a plain GET with no headers streams the bytes (HTTP Range works). Null for trashed files. Every fetch re-checks the key and the file.',
      ),
    downloadExpiresAt: z.string().nullable(),
    previewUrl: z.string().nullable(),
    version: Version,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'DriveFileHandle' });
export type DriveFileHandle = z.infer<typeof DriveFileHandle>;

/** SPEC 2.19 DriveFileText (GET /drive/files/{id}/text), plus the extraction state. */
export const DriveFileText = z
  .object({
    file: DriveFile,
    content: z
      .string()
      .describe(
        `UTF-8 text (text and code files) or the parsed text (PDF text layer, DOCX, XLSX sheets as tab-separated rows, PPTX slides); at most ${DRIVE_LIMITS.textReadChars} characters, cut on a word boundary. '' while textStatus is pending, and when it is none or failed.`,
      ),
    truncated: z
      .boolean()
      .describe(
        'true when the tail was dropped at any cap: the extraction limits (pages, cells), the stored cap (DRIVE_TEXT_STORED_CHARS, 200,000) or this 12,000-character read.',
      ),
    textStatus: z
      .enum(['pending', 'ready', 'none', 'failed'])
      .describe(
        "pending: the drive pool has not extracted it yet (answered 200 with content '' and Retry-After: 2; poll again); ready; none: this format holds no text we read (images, audio, archives, invalid UTF-8); failed: the extraction failed (see textError).",
      ),
    textError: z.string().nullable().describe('Why the extraction failed or found no text, when it says; else null.'),
    engine: z
      .string()
      .nullable()
      .describe(
        'The extractor that read it: pdfjs-text-v1, mammoth-docx-v1, ooxml-xlsx-v1, pptx-xml-v1 or utf8-text-v1 (exceljs-xlsx-v1 on XLSX texts extracted before ooxml-xlsx-v1); null while pending or when no extractor applies.',
      ),
  })
  .meta({ id: 'DriveFileText' });
export type DriveFileText = z.infer<typeof DriveFileText>;

/** SPEC 2.19 DriveFolder, plus its place in the tree and its look. */
export const DriveFolder = z
  .object({
    id: z.string().describe('dfo_ followed by a random part.'),
    name: z.string(),
    parentFolderId: z.string().nullable().describe('null: at the drive root.'),
    path: z.array(z.string()).describe('Ancestor folder ids, root first (empty at the root).'),
    fileCount: z.number().int().describe('Active (not trashed) files directly in this folder.'),
    color: z.string().nullable().describe('#rrggbb (lower case) or null.'),
    sticker: z.string().nullable().describe('One emoji, or null.'),
    teamId: z.string().nullable(),
    version: Version,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'DriveFolder' });
export type DriveFolder = z.infer<typeof DriveFolder>;

export const DRIVE_ROLES = ['owner', 'editor', 'viewer'] as const;

export const DriveScope = z
  .object({
    type: z.enum(['personal', 'team']),
    id: z.string().describe('The account id (personal) or the team id.'),
    name: z.string(),
    role: z
      .enum(DRIVE_ROLES)
      .describe(
        'owner for the personal drive; the member role in a team (the API is read-only on team drives whatever the role).',
      ),
  })
  .meta({ id: 'DriveScope' });

export const DriveTeam = z
  .object({ id: z.string(), name: z.string(), role: z.enum(DRIVE_ROLES) })
  .meta({ id: 'DriveTeam' });

export const DriveStorage = z
  .object({
    bytesUsed: z
      .number()
      .int()
      .describe('Bytes of every stored file of the drive, trashed ones included until purged.'),
    quotaBytes: z.number().int().describe('The plan quota (DRIVE_QUOTA_BYTES; the team owner plan for a team drive).'),
    fileCount: z.number().int().describe('Stored files, trashed ones included until purged.'),
  })
  .meta({ id: 'DriveStorage' });

/** SPEC 2.19 DriveFileList. */
export const DriveFileList = z
  .object({
    data: z.array(DriveFile),
    total: z.number().int().describe('Files matching the filters (all pages).'),
    hasMore: z.boolean().describe('true when cursor is set.'),
    cursor: z.string().nullable().describe('Opaque; pass it back as ?cursor= for the next page. null at the end.'),
    folders: z
      .array(DriveFolder)
      .describe(
        'The folder tree of the drive (flat, parents before children, each with parentFolderId and fileCount), inside the key pins.',
      ),
    storage: DriveStorage.nullable().describe(
      'The storage meter of the drive shown (personal or team); null when the key is pinned to folders.',
    ),
    scope: DriveScope,
    teams: z.array(DriveTeam).describe('Teams of the account; each drive is browsable read-only with ?teamId=.'),
  })
  .meta({ id: 'DriveFileList' });
export type DriveFileList = z.infer<typeof DriveFileList>;

const teamIdQuery = z
  .string()
  .max(ID_RULE.maxLength, { error: `must be at most ${ID_RULE.maxLength} characters` })
  .regex(driveIdRe, { error: 'must be 1 to 128 letters, digits, _ and -' })
  .optional()
  .describe('Browse a team drive (read-only) instead of the personal drive; a team you are not a member of is 404.');
const boolQuery = (what: string) =>
  z.enum(['true', 'false'], { error: 'must be true or false' }).optional().describe(what);

/** Query of GET /drive/files. */
export const DriveFileListQuery = listQuery({
  folderId: z
    .string()
    .max(ID_RULE.maxLength, { error: `must be at most ${ID_RULE.maxLength} characters` })
    .regex(driveIdRe, { error: 'must be a folder id or root' })
    .optional()
    .describe('A folder id (files directly in it), root (files at the root), or omitted (every file of the drive).'),
  kind: z.enum(DRIVE_KINDS, { error: `must be one of ${DRIVE_KINDS.join(', ')}` }).optional(),
  starred: boolQuery('true: only starred files; false: only unstarred.'),
  trash: boolQuery('true: only trashed files; default false: only active files.'),
  teamId: teamIdQuery,
});
export type DriveFileListQuery = z.output<typeof DriveFileListQuery>;

/** Query of GET /drive/folders. */
export const DriveFolderListQuery = wholeListQuery({ teamId: teamIdQuery });
export type DriveFolderListQuery = z.output<typeof DriveFolderListQuery>;

/** GET /drive/folders: the whole folder tree of one drive, flat (parents before children). */
export const DriveFolderTree = z
  .object({
    data: z
      .array(DriveFolder)
      .describe(
        'Every folder of the drive inside the key pins (or a page of `limit` of them), parents before children, siblings by name.',
      ),
    total: z.number().int(),
    cursor: z.string().optional().describe('Present only when `limit` left folders for another page. Opaque.'),
    rootFileCount: z
      .number()
      .int()
      .describe('Active files at the drive root (0 for a pinned key: root files are outside every pin).'),
    scope: DriveScope,
  })
  .meta({ id: 'DriveFolderTree' });
export type DriveFolderTree = z.infer<typeof DriveFolderTree>;

export const DRIVE_BULK_ACTIONS = ['move', 'star', 'unstar', 'trash', 'restore'] as const;
/** Per-file failure reasons of POST /drive/files/bulk. WARNING: public contract. */
export const DRIVE_BULK_REASONS = [
  'not_found',
  'already_trashed',
  'not_trashed',
  'restore_window_expired',
  'folder_not_found',
  'name_conflict',
  'team_drive_read_only',
  'trashed',
  'internal_error',
] as const;

/** SPEC 2.19 DriveBulkRequest. */
export const DriveBulkRequest = z
  .strictObject({
    fileIds: z
      .array(bodyId('A file id (dfl_…).'), { error: 'must be an array of file ids' })
      .min(1, { error: 'must name at least 1 file' })
      .max(DRIVE_LIMITS.bulkMax, { error: `must name at most ${DRIVE_LIMITS.bulkMax} files` })
      .describe(`1 to ${DRIVE_LIMITS.bulkMax} file ids; duplicates count once.`),
    action: z
      .enum(DRIVE_BULK_ACTIONS, { error: `must be one of ${DRIVE_BULK_ACTIONS.join(', ')}` })
      .describe('trash is the most destructive action; there is no permanent delete.'),
    folderId: FolderRef.optional().describe(
      'For move (required there, refused otherwise): a folder id of the same drive, or "root" / null.',
    ),
  })
  .superRefine((b, ctx) => {
    if (b.action === 'move' && b.folderId === undefined)
      ctx.addIssue({ code: 'custom', path: ['folderId'], message: 'is required for move (a folder id or root)' });
    if (b.action !== 'move' && b.folderId !== undefined)
      ctx.addIssue({ code: 'custom', path: ['folderId'], message: 'is only for move' });
  })
  .meta({
    id: 'DriveBulkRequest',
    ...whenField(
      'action',
      'move',
      { required: ['folderId'], properties: { folderId: {} } },
      { not: { required: ['folderId'], properties: { folderId: {} } } },
    ),
  }); // the refinement above
export type DriveBulkRequest = z.output<typeof DriveBulkRequest>;

/** SPEC 2.19 DriveBulkResult. */
export const DriveBulkResult = z
  .object({
    action: z.enum(DRIVE_BULK_ACTIONS),
    succeeded: z
      .array(z.string())
      .describe('Ids changed, or already in the asked state (star of a starred file, move to its own folder).'),
    failed: z
      .array(
        z.object({
          fileId: z.string(),
          reason: z
            .enum(DRIVE_BULK_REASONS)
            .describe(
              'not_found (unknown, another account, or outside the key pins), already_trashed, not_trashed, restore_window_expired, folder_not_found (the destination), name_conflict, team_drive_read_only, trashed (move/star of a trashed file), internal_error (this file failed unexpectedly; the others went on: retry it).',
            ),
        }),
      )
      .describe('One entry per file that did not change.'),
  })
  .meta({ id: 'DriveBulkResult' });
export type DriveBulkResult = z.infer<typeof DriveBulkResult>;

const COLOR_RE = /^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/;
const color = z
  .string({ error: 'must be a string' })
  .regex(COLOR_RE, { error: 'must be a hex colour #rrggbb or #rgb' })
  .describe('Hex colour #rrggbb or #rgb (stored as lower-case #rrggbb).');

/** True when `s` is exactly one emoji (one grapheme cluster with an Extended_Pictographic or regional-indicator code point). */
export function isSingleEmoji(s: string): boolean {
  if (s.length === 0 || s.length > 64) return false;
  const graphemes = [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(s)];
  if (graphemes.length !== 1) return false;
  return (
    /\p{Extended_Pictographic}/u.test(s) || /^\p{Regional_Indicator}{2}$/u.test(s) || /^[0-9#*]\uFE0F?\u20E3$/u.test(s)
  );
}
const sticker = z
  .string({ error: 'must be a string' })
  .refine(isSingleEmoji, { error: 'must be exactly one emoji' })
  .describe('Exactly one emoji (one grapheme: skin tones, ZWJ sequences and flags count as one).');

const folderName = baseName.describe(
  `Folder name, 1 to ${DRIVE_LIMITS.nameMax} characters, no / or \\; unique among its siblings (case-insensitive), else 409 conflict.`,
);

/** POST /drive/folders body (SPEC 2.19). */
export const DriveFolderCreate = z
  .strictObject({
    name: folderName,
    parentFolderId: FolderRef.optional().describe('The parent folder id; omit (or root / null) for the drive root.'),
    color: color.optional(),
    sticker: sticker.optional(),
  })
  .meta({ id: 'DriveFolderCreate' });
export type DriveFolderCreate = z.output<typeof DriveFolderCreate>;

/** PATCH /drive/folders/{id} body (ours: SPEC has no folder update). */
export const DriveFolderUpdate = z
  .strictObject({
    name: folderName.optional(),
    parentFolderId: FolderRef.optional().describe(
      'Move under this folder, or root / null for the drive root. Not into itself or its own subtree (409 folder_cycle).',
    ),
    color: color.nullable().optional().describe('Hex colour #rrggbb or #rgb; null clears it.'),
    sticker: sticker.nullable().optional().describe('Exactly one emoji; null clears it.'),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: name, parentFolderId, color or sticker',
  })
  .meta({ id: 'DriveFolderUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type DriveFolderUpdate = z.output<typeof DriveFolderUpdate>;

// ---------------------------------------------------------------------------------------------
// Search (owned by the search part: api/drive/search.routes.ts, platform/drive/search-index.repository.ts).

/** GET /drive/search limits. WARNING: public contract. */
export const DRIVE_SEARCH_LIMITS = {
  qMax: 200,
  limitMax: 50,
  limitDefault: 20,
  /** Words of `q` used; the rest are ignored. */
  termsMax: 16,
  /** Characters of a snippet, about. */
  snippetChars: 160,
} as const;

export const DRIVE_SEARCH_FIELDS = ['name', 'tag', 'description', 'text'] as const;

/** Query of GET /drive/search. */
export const DriveSearchQuery = z.object({
  q: line(DRIVE_SEARCH_LIMITS.qMax)
    .refine((s) => s.trim().length > 0, { error: 'must not be empty' })
    .meta({ minLength: 1 })
    .describe(
      `1 to ${DRIVE_SEARCH_LIMITS.qMax} characters. Every word must match (AND), as a whole word (no prefixes, no stemming), in the name, a tag, the description or the text; case, accents and width are ignored. Words follow Unicode word rules with dictionaries for Chinese and Japanese; "report.pdf", "l'état" and "snake_case" also match by their parts; one-letter words are ignored (a single Han or Hangul character counts). At most ${DRIVE_SEARCH_LIMITS.termsMax} words are used.`,
    ),
  kind: z
    .enum(DRIVE_KINDS, { error: `must be one of ${DRIVE_KINDS.join(', ')}` })
    .optional()
    .describe('Only files of this kind.'),
  teamId: teamIdQuery.describe(
    'Search only this team drive (a team you are not a member of is 404). Without it: your personal drive and every team drive you belong to.',
  ),
  limit: listLimit(DRIVE_SEARCH_LIMITS.limitMax)
    .default(DRIVE_SEARCH_LIMITS.limitDefault)
    .describe(`Hits answered, 1 to ${DRIVE_SEARCH_LIMITS.limitMax}; default ${DRIVE_SEARCH_LIMITS.limitDefault}.`),
});
export type DriveSearchQuery = z.output<typeof DriveSearchQuery>;

/** One search hit. */
export const DriveSearchHit = z
  .object({
    file: DriveFile,
    score: z
      .number()
      .int()
      .describe(
        'Sum over the query words of the weights of the fields each appears in: name 16, tag 8, description 3, text 1. A word in a stronger field always outranks the same word found only in weaker ones.',
      ),
    matchField: z
      .enum(DRIVE_SEARCH_FIELDS)
      .describe(
        'The strongest field a query word matched in (name > tag > description > text); the snippet comes from it.',
      ),
    snippet: z
      .string()
      .describe(
        `About ${DRIVE_SEARCH_LIMITS.snippetChars} characters of that field around the first match, plain text, white space collapsed, … where text was left out.`,
      ),
    highlights: z
      .array(z.object({ start: z.number().int(), end: z.number().int() }))
      .describe(
        'Where query words are in the snippet: UTF-16 code unit offsets (JavaScript string indices), end exclusive.',
      ),
  })
  .meta({ id: 'DriveSearchHit' });
export type DriveSearchHit = z.infer<typeof DriveSearchHit>;

/** SPEC 2.19 DriveSearchResult. */
export const DriveSearchResult = z
  .object({
    query: z.string().describe('The query as sent.'),
    terms: z
      .array(z.string())
      .describe(
        'The words searched for, as the index folds them (lower case, no accents); empty when q holds no word.',
      ),
    data: z
      .array(DriveSearchHit)
      .describe('Best first: score, then newest. Trashed files and files outside the key pins are never listed.'),
    hasMore: z.boolean().describe('true when more files matched than limit.'),
  })
  .meta({ id: 'DriveSearchResult' });
export type DriveSearchResult = z.infer<typeof DriveSearchResult>;
