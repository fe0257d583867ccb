import type { Store } from '../infra/mongo';
import type { DriveFileDoc, DriveTextDoc } from './drive.types';
import {
  FIELD_BITS,
  findCandidates,
  indexDriveFile,
  queryTerms,
  removeDriveTextIndex,
  scopeOf,
} from './search-index.repository';
import { createDriveTexts, deleteDriveText, driveFileExists, saveDriveText } from './text.repository';

/**
 * The stored text of Drive files: what GET /drive/files/{id}/text answers and what the research
 * engine reads. Text is extracted once by the drive pool (workers/drive/) and stored capped at
 * DRIVE_TEXT_STORED_CHARS in `drive_texts` (one document per file, `_id` = the file id).
 */

/**
 * `s` cut to at most `max` characters: at the last white space of the final 10% when there is one
 * (a word is never split), else at `max` (never inside a surrogate pair). `cut` says whether
 * anything was dropped.
 */
export function cutAtWord(s: string, max: number): { text: string; cut: boolean } {
  if (s.length <= max) return { text: s, cut: false };
  const window = s.slice(Math.floor(max * 0.9), max + 1);
  const sp = window.search(/\s\S*$/);
  let end = sp >= 0 ? Math.floor(max * 0.9) + sp : max;
  if (/[\udc00-\udfff]/.test(s[end] ?? '')) end--;
  return { text: s.slice(0, end).trimEnd(), cut: true };
}

export interface DriveTextRead {
  status: DriveFileDoc['text']['status'];
  content: string;
  /** True when the tail was dropped at any cap (extraction limits, DRIVE_TEXT_STORED_CHARS, `maxChars`). */
  truncated: boolean;
  engine: string | null;
  /** Characters stored (before the `maxChars` cut). */
  storedChars: number;
}

/**
 * The stored text of a file the caller already reached (tenant, team and pins checked by the
 * repository): '' until the text is `ready`. One findOne by `_id`.
 */
export async function readDriveText(
  store: Store,
  file: Pick<DriveFileDoc, '_id' | 'accountId' | 'teamId' | 'text'>,
  opts: { maxChars?: number } = {},
): Promise<DriveTextRead> {
  const status = file.text?.status ?? 'pending';
  const empty = { status, content: '', truncated: false, engine: file.text?.engine ?? null, storedChars: 0 };
  if (status !== 'ready') return empty;
  const doc = await createDriveTexts(store).forAccount(file.accountId).text(file._id);
  if (!doc) return empty;
  const { text, cut } = cutAtWord(doc.content, opts.maxChars ?? Number.POSITIVE_INFINITY);
  return {
    status,
    content: text,
    truncated: doc.truncated || cut,
    engine: doc.engine,
    storedChars: doc.content.length,
  };
}

/** A Drive file of the account matching a research query, with a way to read its text. */
export interface DriveResearchSource {
  file: DriveFileDoc;
  score: number;
  /** Query words found in the extracted text. */
  textTerms: number;
  /** The name, tags, description and stored text (capped at `maxChars`). */
  read(): Promise<string>;
}

/**
 * Drive files of an account's personal drive matching any word of `query`, best first (the search
 * index, ranked like GET /drive/search but with any word rather than all), for the research pool.
 * Trashed files are left out. At most `limit`. `pins` (the dispatching key's folder pins; empty =
 * the whole drive) keeps only files whose folder or one of its ancestors is pinned: root files are
 * outside every pin (pins apply everywhere).
 */
export async function findDriveTextsForResearch(
  store: Store,
  accountId: string,
  query: string,
  opts: { limit: number; maxChars: number; pins: readonly string[] },
): Promise<DriveResearchSource[]> {
  const mine = createDriveTexts(store).forAccount(accountId);
  const terms = queryTerms(query);
  const candidates = await findCandidates(store, {
    scopes: [scopeOf({ accountId, teamId: null })],
    terms,
    mode: 'any',
  });
  const pins = new Set(opts.pins);
  // Folder id → inside the pins; one findOne by _id per folder met.
  const insideCache = new Map<string, boolean>();
  const inside = async (folderId: string | null): Promise<boolean> => {
    if (!pins.size) return true;
    if (!folderId) return false;
    let v = insideCache.get(folderId);
    if (v === undefined) {
      const f = await mine.personalFolderPath(folderId);
      v = !!f && (pins.has(f._id) || (f.path ?? []).some((id) => pins.has(id)));
      insideCache.set(folderId, v);
    }
    return v;
  };
  const out: DriveResearchSource[] = [];
  for (let i = 0; i < candidates.length && out.length < opts.limit && i < opts.limit * 4; i += opts.limit) {
    const batch = candidates.slice(i, i + opts.limit);
    const found = await Promise.all(batch.map((c) => mine.personalFile(c.fileId)));
    const docs = await Promise.all(found.map(async (file) => (file && (await inside(file.folderId)) ? file : null)));
    docs.forEach((file, k) => {
      if (!file || file.trashedAt || file.purgingAt || out.length >= opts.limit) return;
      out.push({
        file,
        score: batch[k]!.score,
        textTerms: batch[k]!.perTerm.filter((p) => p && p.mask & FIELD_BITS.text).length,
        async read() {
          const t = await readDriveText(store, file, { maxChars: opts.maxChars });
          return [file.name, file.tags.join(', '), file.description, t.content].filter(Boolean).join('\n');
        },
      });
    });
  }
  return out;
}

/** What the drive pool's extraction of one file came to. */
export type DriveTextOutcome =
  | { status: 'ready'; text: string; truncated: boolean; engine: string }
  | { status: 'none' | 'failed'; engine: string | null; error: string | null };

/**
 * Stores and indexes the extracted text of `file`, then marks it (text.status ready | none |
 * failed). The status moves last, so a crash before it leaves `pending` for the redelivery or the
 * sweep. False when the file was trashed, finished by another delivery or purged meanwhile (a
 * purged file keeps no text or index entries).
 */
export async function recordDriveText(
  store: Store,
  file: DriveFileDoc,
  outcome: DriveTextOutcome,
  reload: () => Promise<DriveFileDoc | null>,
): Promise<boolean> {
  const at = new Date();
  if (outcome.status === 'ready') {
    const doc: DriveTextDoc = {
      _id: file._id,
      accountId: file.accountId,
      teamId: file.teamId,
      content: outcome.text,
      truncated: outcome.truncated,
      engine: outcome.engine,
      at,
    };
    await saveDriveText(store, doc);
  }
  // Name, tags and description as they are when the index is written (a rename may land meanwhile).
  await indexDriveFile(store, file, outcome.status === 'ready' ? outcome.text : null, { reload });
  const text: DriveFileDoc['text'] =
    outcome.status === 'ready'
      ? {
          status: 'ready',
          chars: outcome.text.length,
          truncated: outcome.truncated,
          engine: outcome.engine,
          error: null,
          at,
        }
      : { status: outcome.status, chars: 0, truncated: false, engine: outcome.engine, error: outcome.error, at };
  if (await createDriveTexts(store).forAccount(file.accountId).settleStatus(file._id, text)) return true;
  // Trashed (kept: a restore makes it pending-and-live again for the sweep), finished by another
  // delivery, or purged: then nothing may stay behind.
  if (!(await driveFileExists(store, file._id))) {
    await deleteDriveText(store, file._id);
    await removeDriveTextIndex(store, file);
  }
  return false;
}
