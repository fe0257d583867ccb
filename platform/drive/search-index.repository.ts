import type { Filter } from 'mongodb';
import { DRIVE_KINDS } from '../../contracts/drive';
import { eachLimited } from '../infra/concurrency';
import { COLLECTIONS, isDuplicateKey, type Database, type Store, openStore } from '../infra/mongo';
import { driveCollections } from './drive.repository';
import type { DriveFileDoc, DriveKind } from './drive.types';

/**
 * The Drive search index: our own token index in plain documents, the same on FerretDB and MongoDB.
 *
 * Why not `$text`: FerretDB 1.24 does not implement `$text` or text indexes at all; MongoDB's
 * text index stems about 15 languages (Danish to Turkish, "none" for the rest) but splits words on
 * spaces and punctuation only, so Chinese and Japanese, which have no spaces, are one "word" per
 * sentence, and it needs one index per collection with a fixed language. One index that behaves
 * the same on both servers is simpler to test and to explain.
 *
 * Why documents keyed by `_id`: a findOne by `_id` is served by the `_id` index on both servers
 * (MongoDB; and our FerretDB build, v1.24.0-svc.2, which pushes `_id` equality down to PostgreSQL as
 * `=` on the unique `_id` index expression, scripts/ferretdb/id-equality.patch). FerretDB does not
 * push down `$in` or sorts (those read the whole table into FerretDB). So every read here is a
 * `findOne` by `_id`, and a posting list is ONE string (FerretDB reads a 10,000-entry string in
 * ~14 ms, the same entries as an object of fields in ~240 ms; measured).
 *
 * Documents (WARNING: persisted; add fields, never rename), see `indexCollections`:
 * - postings `<scope>:<token>` { p, v }: `p` is space-separated entries `<fileId>:<packed>:<offset>`
 *   (base 36): packed = ((createdAt seconds × 16) + kind index) × 16 + field mask; offset = the
 *   first occurrence of the token in the stored text ('' when the token is not in the text). `v`
 *   is a version for compare-and-swap updates. scope = the accountId (personal drive) or
 *   `team:<teamId>` (team drive).
 * - forward `fwd:<fileId>` { scope, tokens, entries, pages, stale, rev }: what the file put in the
 *   postings (so a re-index touches only what changed, and a purge finds everything).
 * - text pages `pg:<fileId>:<n>` { s, t }: the stored text in pages of DRIVE_INDEX_LIMITS.pageChars
 *   (with `pageOverlap` characters of context on each side), so a snippet reads a few KB, not 200K.
 */

/** Fields searched, as bits of a posting's mask. WARNING: persisted in postings. */
export const FIELD_BITS = { name: 1, tag: 2, description: 4, text: 8 } as const;
export type SearchField = keyof typeof FIELD_BITS;
/** Field order from the strongest match to the weakest. */
export const SEARCH_FIELDS: readonly SearchField[] = ['name', 'tag', 'description', 'text'];

/**
 * Score per matched query term and field. Each weight is larger than all weaker ones together, so a
 * term in a stronger field always outranks the same term found only in weaker ones.
 */
export const FIELD_WEIGHTS: Record<SearchField, number> = { name: 16, tag: 8, description: 3, text: 1 };

export const DRIVE_INDEX_LIMITS = {
  /** Distinct words of the text indexed per file, in reading order (the first ones). */
  textTokensMax: 2000,
  /** Longest word indexed (UTF-16 code units); longer ones are not indexed. */
  tokenCharsMax: 64,
  /** Words of a query used (the rest are ignored). */
  queryTermsMax: 16,
  /** Text page size for snippets, and the context kept on each side. */
  pageChars: 4000,
  pageOverlap: 240,
  /** A posting list longer than this (characters; ~350,000 files) takes no new files: MongoDB documents stop at 16 MB. */
  postingCharsMax: 12_000_000,
  /** Candidate files a search examines at most (fetched in score order, best first). */
  examineMax: 1000,
} as const;

// ---------------------------------------------------------------------------------------------
// Words

const segmenter = new Intl.Segmenter('und', { granularity: 'word' });
/** Combining diacritical marks (Latin, Greek, Cyrillic accents). Marks that are letters of other scripts (Devanagari vowel signs, kana voicing marks) are kept. */
const DIACRITICS = /[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]/g;
const SINGLE_CHAR_WORD = /^[\p{Script=Han}\p{Script=Hangul}]$/u;
/** Characters Unicode word rules keep inside a word (UAX #29 MidLetter, MidNum, MidNumLet, ExtendNumLet), split once more. */
const JOINERS = /[.'’‘:_·‧]/;

/**
 * One word as the index stores it: NFKC (full-width and compatibility forms), lower case, accents
 * removed (NFD, combining marks dropped, NFC again), ß → ss, final sigma → σ.
 */
export function foldWord(w: string): string {
  return w
    .normalize('NFKC')
    .toLowerCase()
    .normalize('NFD')
    .replace(DIACRITICS, '')
    .normalize('NFC')
    .replace(/ß/g, 'ss')
    .replace(/ς/g, 'σ');
}

const indexable = (t: string) =>
  t.length > 0 && t.length <= DRIVE_INDEX_LIMITS.tokenCharsMax && (t.length >= 2 || SINGLE_CHAR_WORD.test(t));

export interface Word {
  token: string;
  /** Position of the word in the source string (UTF-16 code units). */
  index: number;
  length: number;
}

/**
 * The words of a text in reading order: Intl.Segmenter word boundaries (UAX #29, with the ICU
 * dictionaries for Chinese, Japanese, Thai, Khmer…), folded with `foldWord`. Words of one letter are
 * left out, except a Han or Hangul character (a word on its own).
 */
export function* words(text: string): Generator<Word> {
  for (const s of segmenter.segment(text)) {
    if (!s.isWordLike) continue;
    const token = foldWord(s.segment);
    if (indexable(token)) yield { token, index: s.index, length: s.segment.length };
    // Unicode keeps "report.pdf", "example.com", "l'état", "snake_case" and "12:30" as one word;
    // their parts are words too (a file name is found by its stem, a French word without its article).
    if (!JOINERS.test(s.segment)) continue;
    let at = 0;
    for (const part of s.segment.split(JOINERS)) {
      const t = foldWord(part);
      if (t !== token && indexable(t)) yield { token: t, index: s.index + at, length: part.length };
      at += part.length + 1;
    }
  }
}

/** Distinct folded words of a text, in order. */
export function tokensOf(text: string, max = Number.POSITIVE_INFINITY): string[] {
  const out = new Set<string>();
  for (const w of words(text)) {
    out.add(w.token);
    if (out.size >= max) break;
  }
  return [...out];
}

/** The terms of a query: distinct folded words, at most DRIVE_INDEX_LIMITS.queryTermsMax. */
export const queryTerms = (q: string) => tokensOf(q, DRIVE_INDEX_LIMITS.queryTermsMax);

// ---------------------------------------------------------------------------------------------
// Documents

export interface PostingsDoc {
  _id: string;
  p: string;
  v: number;
}
export interface ForwardDoc {
  _id: string;
  scope: string;
  fileId: string;
  tokens: string[];
  /** The posting entry written for each token (same order as tokens). */
  entries: string[];
  /** Text pages written. */
  pages: number;
  /** Tokens of an earlier index still to be removed (a crash in the middle of a re-index). */
  stale: string[];
  /** Compare-and-swap revision: +1 per index of the file. */
  rev: number;
  at: Date;
}
export interface PageDoc {
  _id: string;
  /** Offset of `t` in the stored text. */
  s: number;
  t: string;
}

/**
 * Collection names of the index (WARNING: persisted): posting lists (`<scope>:<token>`) and forward
 * documents (`fwd:<fileId>`; a scope is an account id or `team:<teamId>`, never `fwd`) in
 * drive_search_tokens, text pages (`pg:<fileId>:<n>`) in drive_text_pages.
 */
export const indexCollections = {
  postings: COLLECTIONS.driveTokens,
  forward: COLLECTIONS.driveTokens,
  pages: COLLECTIONS.driveTextPages,
} as const;

/** The collection of posting lists and forward documents. */
export const tokenCollection = (store: Store) =>
  openStore(store).db.collection<{ _id: string } & Record<string, unknown>>(COLLECTIONS.driveTokens);

/** Every document of the index: postings, forward documents and text pages (tests and clean-up checks; reads everything). */
export async function allIndexDocuments(store: Store): Promise<({ _id: string } & Record<string, unknown>)[]> {
  const db = openStore(store);
  const [tokens, textPages] = await Promise.all([
    tokenCollection(store).find({}).toArray(),
    db.db.collection<{ _id: string } & Record<string, unknown>>(indexCollections.pages).find({}).toArray(),
  ]);
  return [...tokens, ...textPages];
}

const postings = (db: Database) => db.db.collection<PostingsDoc>(indexCollections.postings);
const forwards = (db: Database) => db.db.collection<ForwardDoc>(indexCollections.forward);
const pages = (db: Database) => db.db.collection<PageDoc>(indexCollections.pages);

/** The index scope of a drive: the accountId (personal) or `team:<teamId>`. */
export const scopeOf = (f: { accountId: string; teamId: string | null }) =>
  f.teamId ? `team:${f.teamId}` : f.accountId;
export const postingsId = (scope: string, token: string) => `${scope}:${token}`;
export const forwardId = (fileId: string) => `fwd:${fileId}`;
export const pageId = (fileId: string, n: number) => `pg:${fileId}:${n}`;

// ---------------------------------------------------------------------------------------------
// Posting entries

export interface Posting {
  fileId: string;
  mask: number;
  kind: DriveKind;
  createdSec: number;
  /** First offset in the stored text, or -1. */
  offset: number;
}

const kindIndex = (k: DriveKind) => Math.max(0, DRIVE_KINDS.indexOf(k));

export function encodeEntry(p: Posting): string {
  const packed = (p.createdSec * 16 + kindIndex(p.kind)) * 16 + p.mask;
  return `${p.fileId}:${packed.toString(36)}:${p.offset >= 0 ? p.offset.toString(36) : ''}`;
}

export function decodeEntry(e: string): Posting | null {
  const [fileId, packed36, offset36] = e.split(':');
  if (!fileId || !packed36) return null;
  const packed = parseInt(packed36, 36);
  if (!Number.isFinite(packed)) return null;
  const mask = packed % 16;
  const rest = Math.floor(packed / 16);
  return {
    fileId,
    mask,
    kind: DRIVE_KINDS[rest % 16] ?? 'other',
    createdSec: Math.floor(rest / 16),
    offset: offset36 ? parseInt(offset36, 36) : -1,
  };
}

/** `list` with the entry of `fileId` replaced by `entry` (appended when absent; removed when null). */
export function withEntry(list: string, fileId: string, entry: string | null): string {
  const key = `${fileId}:`;
  let at = list.startsWith(key) ? 0 : list.indexOf(` ${key}`);
  if (at > 0) at += 1;
  if (at < 0) return entry === null ? list : list ? `${list} ${entry}` : entry;
  let end = list.indexOf(' ', at);
  if (end < 0) end = list.length;
  const before = list.slice(0, at).trimEnd();
  const after = list.slice(end).trimStart();
  return [before, entry ?? '', after].filter(Boolean).join(' ');
}

/** Set (or remove, with null) one file's entry in one posting list: compare-and-swap on `v`, retried. */
async function applyPosting(db: Database, id: string, fileId: string, entry: string | null): Promise<void> {
  const col = postings(db);
  for (let attempt = 0; attempt < 50; attempt++) {
    const doc = await col.findOne({ _id: id });
    if (!doc) {
      if (entry === null) return;
      try {
        await col.insertOne({ _id: id, p: entry, v: 1 });
        return;
      } catch (err) {
        if (isDuplicateKey(err)) continue;
        throw err;
      }
    }
    const next = withEntry(doc.p, fileId, entry);
    if (next === doc.p) return;
    if (entry !== null && next.length > DRIVE_INDEX_LIMITS.postingCharsMax) return; // see postingCharsMax
    const r = await col.updateOne({ _id: id, v: doc.v }, { $set: { p: next, v: doc.v + 1 } });
    if (r.matchedCount === 1) return;
  }
  throw new Error(`posting list ${id} kept changing under 50 attempts`);
}

// ---------------------------------------------------------------------------------------------
// Indexing

type IndexedFile = Pick<
  DriveFileDoc,
  '_id' | 'accountId' | 'teamId' | 'name' | 'tags' | 'description' | 'kind' | 'createdAt'
>;

/** Field masks of the file's name, tags and description words. */
export function metaMasks(f: Pick<DriveFileDoc, 'name' | 'tags' | 'description'>): Map<string, number> {
  const m = new Map<string, number>();
  const add = (text: string, bit: number) => {
    for (const w of words(text)) m.set(w.token, (m.get(w.token) ?? 0) | bit);
  };
  add(f.name, FIELD_BITS.name);
  for (const t of f.tags) add(t, FIELD_BITS.tag);
  add(f.description, FIELD_BITS.description);
  return m;
}

/** The first DRIVE_INDEX_LIMITS.textTokensMax distinct words of a text, with their first offsets. */
export function textTokens(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const w of words(text)) {
    if (m.has(w.token)) continue;
    m.set(w.token, w.index);
    if (m.size >= DRIVE_INDEX_LIMITS.textTokensMax) break;
  }
  return m;
}

/** Text of page `n` (with its overlap) and where it starts. */
export function pageOf(text: string, n: number): { s: number; t: string } {
  const { pageChars, pageOverlap } = DRIVE_INDEX_LIMITS;
  const s = Math.max(0, n * pageChars - pageOverlap);
  return { s, t: text.slice(s, (n + 1) * pageChars + pageOverlap) };
}

/**
 * Apply the entries a file wants (token → entry, computed from its forward document as it is),
 * against what that forward document recorded. The forward document is claimed first with a
 * compare-and-swap on `rev`, so two writers of one file (the drive pool and a rename) take turns:
 * the loser re-reads and recomputes from the winner's record. It records the union (new tokens, and
 * the old ones to remove as `stale`) before any posting changes, so a crash leaves what the next
 * run must clean up.
 */
async function writeIndex(
  db: Database,
  file: IndexedFile,
  want: (old: ForwardDoc | null) => Promise<Map<string, string>>,
  text: string | null,
): Promise<void> {
  const scope = scopeOf(file);
  const fwdCol = forwards(db);
  for (let attempt = 0; ; attempt++) {
    const old = await fwdCol.findOne({ _id: forwardId(file._id) });
    const wanted = await want(old);
    const before = new Map<string, string>();
    if (old) {
      for (const [i, t] of old.tokens.entries()) before.set(t, old.entries[i] ?? '');
      for (const t of old.stale ?? []) if (!before.has(t)) before.set(t, '');
    }
    const oldScope = old?.scope ?? scope;
    const removed = [...before.keys()].filter((t) => !wanted.has(t) || oldScope !== scope);
    const changed = [...wanted].filter(([t, e]) => oldScope !== scope || before.get(t) !== e);
    const rev = (old?.rev ?? 0) + 1;
    const oldPages = old?.pages ?? 0;
    const newPages = text === null ? oldPages : Math.ceil(text.length / DRIVE_INDEX_LIMITS.pageChars);
    // The claim records every page that may exist until the final update (the old ones and the
    // new ones about to be written), so a crash in between leaves none the removal misses.
    const record = {
      scope,
      fileId: file._id,
      tokens: [...wanted.keys()],
      entries: [...wanted.values()],
      pages: Math.max(oldPages, newPages),
      stale: removed,
      rev,
      at: new Date(),
    };
    let claimed: boolean;
    try {
      if (old) {
        claimed =
          (
            await fwdCol.updateOne({ _id: forwardId(file._id), rev: old.rev ?? null } as Filter<ForwardDoc>, {
              $set: record,
            })
          ).matchedCount === 1;
      } else {
        await fwdCol.insertOne({ _id: forwardId(file._id), ...record });
        claimed = true;
      }
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      claimed = false;
    }
    if (!claimed) {
      if (attempt >= 20) throw new Error(`the search index of ${file._id} kept changing under 20 attempts`);
      continue;
    }
    await eachLimited(removed, 4, (t) => applyPosting(db, postingsId(oldScope, t), file._id, null));
    await eachLimited(changed, 4, ([t, e]) => applyPosting(db, postingsId(scope, t), file._id, e));
    if (text !== null) {
      const ps = Array.from({ length: newPages }, (_, i) => ({ _id: pageId(file._id, i), ...pageOf(text, i) }));
      await eachLimited(ps, 4, (p) =>
        pages(db)
          .replaceOne({ _id: p._id }, p, { upsert: true })
          .then(() => undefined),
      );
      for (let i = newPages; i < oldPages; i++) await pages(db).deleteOne({ _id: pageId(file._id, i) });
    }
    await fwdCol.updateOne({ _id: forwardId(file._id), rev }, { $set: { stale: [], pages: newPages } });
    return;
  }
}

function entriesFor(file: IndexedFile, meta: Map<string, number>, text: Map<string, number>): Map<string, string> {
  const createdSec = Math.floor(file.createdAt.getTime() / 1000);
  const out = new Map<string, string>();
  for (const t of new Set([...meta.keys(), ...text.keys()])) {
    const offset = text.get(t);
    const mask = (meta.get(t) ?? 0) | (offset !== undefined ? FIELD_BITS.text : 0);
    out.set(t, encodeEntry({ fileId: file._id, mask, kind: file.kind, createdSec, offset: offset ?? -1 }));
  }
  return out;
}

/** The text words a forward document recorded, with their offsets. */
function recordedText(old: ForwardDoc | null): Map<string, number> {
  const text = new Map<string, number>();
  old?.tokens.forEach((t, i) => {
    const p = decodeEntry(old.entries[i] ?? '');
    if (p && p.mask & FIELD_BITS.text && p.offset >= 0) text.set(t, p.offset);
  });
  return text;
}

/**
 * Index a file whole: its name, tags, description and (when it has one) its stored text. Safe to
 * repeat and to resume after a crash (entries already right are not written again).
 */
export async function indexDriveFile(
  store: Store,
  file: IndexedFile,
  text: string | null,
  opts: { reload?: () => Promise<IndexedFile | null> } = {},
): Promise<void> {
  const db = openStore(store);
  const words = text ? textTokens(text) : new Map<string, number>();
  // `reload`: the name, tags and description as they are at each attempt (a rename may land meanwhile).
  await writeIndex(
    db,
    file,
    async () => {
      const now = (await opts.reload?.()) ?? file;
      return entriesFor(now, metaMasks(now), words);
    },
    text ?? '',
  );
}

/**
 * Re-index a file's name, tags and description (after a rename, a tag or description change),
 * keeping its text words as indexed. Call it after the change is stored. Search re-checks these
 * fields against the file itself, so a missed call never shows a wrong match, only misses the new
 * words until the next index.
 */
export async function reindexDriveFileMeta(rt: { store: Store }, file: IndexedFile): Promise<void> {
  const meta = metaMasks(file);
  await writeIndex(openStore(rt.store), file, async (old) => entriesFor(file, meta, recordedText(old)), null);
}

/** Remove everything the index holds for a file (postings, pages, forward document). Idempotent; for the purge. */
export async function removeDriveTextIndex(
  store: Store,
  file: { _id: string; accountId: string; teamId: string | null },
): Promise<void> {
  const db = openStore(store);
  const old = await forwards(db).findOne({ _id: forwardId(file._id) });
  if (!old) return;
  const scope = old.scope ?? scopeOf(file);
  await eachLimited([...new Set([...old.tokens, ...(old.stale ?? [])])], 4, (t) =>
    applyPosting(db, postingsId(scope, t), file._id, null),
  );
  for (let i = 0; i < (old.pages ?? 0); i++) await pages(db).deleteOne({ _id: pageId(file._id, i) });
  await forwards(db).deleteOne({ _id: forwardId(file._id) });
}

// ---------------------------------------------------------------------------------------------
// Querying

export interface Candidate {
  fileId: string;
  scope: string;
  /** Score from the postings (meta fields are re-checked against the file). */
  score: number;
  createdSec: number;
  kind: DriveKind;
  /** Per query term: the posting (mask and text offset), or undefined when the term is not in this file. */
  perTerm: (Posting | undefined)[];
}

const scoreOf = (mask: number) => SEARCH_FIELDS.reduce((s, f) => s + (mask & FIELD_BITS[f] ? FIELD_WEIGHTS[f] : 0), 0);

/**
 * Candidates for `terms` in `scopes`: one findOne by `_id` per (scope, term). `mode: 'all'` keeps
 * files holding every term; `'any'`, files holding at least one. Best first (score, newest).
 */
export async function findCandidates(
  store: Store,
  opts: { scopes: readonly string[]; terms: readonly string[]; mode: 'all' | 'any'; kind?: DriveKind | null },
): Promise<Candidate[]> {
  const db = openStore(store);
  const { scopes, terms } = opts;
  if (!terms.length || !scopes.length) return [];
  const lists = await Promise.all(
    scopes.flatMap((scope) =>
      terms.map((t) => {
        const id = postingsId(scope, t);
        return postings(db).findOne({ _id: id }, { projection: { p: 1 } });
      }),
    ),
  );
  const out: Candidate[] = [];
  scopes.forEach((scope, si) => {
    const byFile = new Map<string, Candidate>();
    terms.forEach((_, ti) => {
      const p = lists[si * terms.length + ti]?.p;
      if (!p) return;
      for (const raw of p.split(' ')) {
        const e = decodeEntry(raw);
        if (!e || (opts.kind && e.kind !== opts.kind)) continue;
        let c = byFile.get(e.fileId);
        if (!c) {
          if (opts.mode === 'all' && ti > 0) continue; // missed an earlier term
          c = { fileId: e.fileId, scope, score: 0, createdSec: e.createdSec, kind: e.kind, perTerm: [] };
          byFile.set(e.fileId, c);
        }
        c.perTerm[ti] = e;
        c.score += scoreOf(e.mask);
      }
    });
    for (const c of byFile.values()) {
      if (opts.mode === 'all' && terms.some((_, ti) => !c.perTerm[ti])) continue;
      out.push(c);
    }
  });
  out.sort((a, b) => b.score - a.score || b.createdSec - a.createdSec || (a.fileId < b.fileId ? -1 : 1));
  return out;
}

/** The text page holding `offset` (one findOne by `_id`), or null. */
export async function readPage(store: Store, fileId: string, offset: number): Promise<PageDoc | null> {
  const db = openStore(store);
  const id = pageId(fileId, Math.floor(offset / DRIVE_INDEX_LIMITS.pageChars));
  return pages(db).findOne({ _id: id });
}

// ---------------------------------------------------------------------------------------------
// Snippets

export interface Snippet {
  snippet: string;
  /** Where query words are in `snippet` (UTF-16 code units, end exclusive). */
  matches: { start: number; end: number }[];
}

/** Where the first word of `text` that is one of `terms` is, or null. */
export function firstMatch(text: string, terms: ReadonlySet<string>): Word | null {
  for (const w of words(text)) if (terms.has(w.token)) return w;
  return null;
}

/**
 * About `width` characters of `text` around [at, at + len): cut at spaces where there is one near
 * (else at a character boundary), whitespace runs collapsed, `…` where text was left out, and the
 * positions of every query word inside it.
 */
export function snippetAround(text: string, at: number, len: number, terms: ReadonlySet<string>, width = 160): Snippet {
  let start = Math.max(0, at - Math.floor((width - len) / 3));
  let end = Math.min(text.length, start + width);
  start = Math.max(0, end - width);
  if (start > 0) {
    const sp = text.slice(start, Math.min(at, start + 24)).search(/\s/);
    if (sp >= 0) start += sp + 1;
  }
  if (end < text.length) {
    const back = text.slice(Math.max(at + len, end - 24), end);
    const sp = back.search(/\s\S*$/);
    if (sp >= 0) end = Math.max(at + len, end - 24) + sp;
  }
  // Never split a surrogate pair.
  if (start > 0 && /[\udc00-\udfff]/.test(text[start] ?? '')) start--;
  if (end < text.length && /[\udc00-\udfff]/.test(text[end] ?? '')) end++;
  const body = text.slice(start, end).replace(/\s+/g, ' ').trim();
  const snippet = `${start > 0 ? '…' : ''}${body}${end < text.length ? '…' : ''}`;
  const matches: Snippet['matches'] = [];
  for (const w of words(snippet)) {
    if (!terms.has(w.token)) continue;
    const last = matches[matches.length - 1];
    if (last && w.index < last.end) continue; // a part of a word already marked whole
    matches.push({ start: w.index, end: w.index + w.length });
  }
  return { snippet, matches };
}

// ---------------------------------------------------------------------------------------------
// Search

/** One drive to search and, for a pinned key, the folders it may see there (null: all). */
export interface SearchScope {
  accountId: string;
  teamId: string | null;
  visibleFolderIds: ReadonlySet<string> | null;
}

export interface SearchHit {
  file: DriveFileDoc;
  score: number;
  matchField: SearchField;
  snippet: string;
  highlights: Snippet['matches'];
}

const strongest = (mask: number): SearchField | null => SEARCH_FIELDS.find((f) => mask & FIELD_BITS[f]) ?? null;

/** The first tag holding a query word, or null. */
const matchingTag = (tags: readonly string[], terms: ReadonlySet<string>) =>
  tags.find((t) => firstMatch(t, terms) !== null) ?? null;

async function snippetOf(
  store: Store,
  file: DriveFileDoc,
  field: SearchField,
  terms: ReadonlySet<string>,
  textOffset: number,
): Promise<Snippet> {
  const around = (s: string): Snippet => {
    const w = firstMatch(s, terms);
    return w ? snippetAround(s, w.index, w.length, terms) : snippetAround(s, 0, 0, terms);
  };
  if (field === 'name') return around(file.name);
  if (field === 'tag') return around(matchingTag(file.tags, terms) ?? '');
  if (field === 'description') return around(file.description);
  const page = textOffset >= 0 ? await readPage(store, file._id, textOffset) : null;
  if (!page) return { snippet: '', matches: [] };
  const local = Math.max(0, Math.min(page.t.length, textOffset - page.s));
  const w = firstMatch(page.t.slice(local, local + DRIVE_INDEX_LIMITS.tokenCharsMax * 2), terms);
  return snippetAround(page.t, local + (w?.index ?? 0), w?.length ?? 0, terms);
}

/**
 * Ranked search over drives: candidates from the postings (every word required with `mode:
 * 'all'`), then the candidate files fetched best first in batches (parallel findOne by `_id`:
 * `$in` is not pushed down on FerretDB) until `limit` + 1 live ones were found or
 * DRIVE_INDEX_LIMITS.examineMax were examined. A file counts only when it is still in its drive,
 * not trashed nor being purged, inside the key's pins, and (name, tags and description re-checked
 * against the file itself, so a stale posting never shows) still matches. Snippets come from the
 * file (name, tag, description) or one text page.
 */
export async function searchDrive(
  store: Store,
  opts: { scopes: readonly SearchScope[]; query: string; kind?: DriveKind | null; limit: number; mode?: 'all' | 'any' },
): Promise<{ terms: string[]; hits: SearchHit[]; hasMore: boolean }> {
  const terms = queryTerms(opts.query);
  const mode = opts.mode ?? 'all';
  const byScope = new Map(opts.scopes.map((s) => [scopeOf(s), s]));
  const candidates = await findCandidates(store, { scopes: [...byScope.keys()], terms, mode, kind: opts.kind ?? null });
  const termSet = new Set(terms);
  const { files } = driveCollections(store);
  const live: { file: DriveFileDoc; score: number; masks: number[]; textOffset: number }[] = [];
  const want = opts.limit + 1;
  let examined = 0;
  while (live.length < want && examined < candidates.length && examined < DRIVE_INDEX_LIMITS.examineMax) {
    const batch = candidates.slice(examined, examined + Math.max(want - live.length + 2, 8));
    examined += batch.length;
    const docs = await Promise.all(
      batch.map((c) => {
        const s = byScope.get(c.scope)!;
        return files.findOne({ _id: c.fileId, accountId: s.accountId, teamId: s.teamId });
      }),
    );
    docs.forEach((file, k) => {
      const c = batch[k]!;
      const s = byScope.get(c.scope)!;
      if (!file || file.trashedAt || file.purgingAt) return;
      if (s.visibleFolderIds && (file.folderId === null || !s.visibleFolderIds.has(file.folderId))) return;
      if (opts.kind && file.kind !== opts.kind) return;
      const meta = metaMasks(file);
      const masks = terms.map((t, ti) => (meta.get(t) ?? 0) | ((c.perTerm[ti]?.mask ?? 0) & FIELD_BITS.text));
      if (mode === 'all' ? masks.some((m) => m === 0) : masks.every((m) => m === 0)) return;
      const offsets = c.perTerm
        .filter((p): p is Posting => !!p && (p.mask & FIELD_BITS.text) !== 0 && p.offset >= 0)
        .map((p) => p.offset);
      live.push({
        file,
        score: masks.reduce((sum, m) => sum + scoreOf(m), 0),
        masks,
        textOffset: offsets.length ? Math.min(...offsets) : -1,
      });
    });
  }
  live.sort(
    (a, b) =>
      b.score - a.score ||
      b.file.createdAt.getTime() - a.file.createdAt.getTime() ||
      (a.file._id < b.file._id ? -1 : 1),
  );
  const page = live.slice(0, opts.limit);
  const hits = await Promise.all(
    page.map(async (h) => {
      const all = h.masks.reduce((m, x) => m | x, 0);
      const field = strongest(all) ?? 'text';
      const s = await snippetOf(store, h.file, field, termSet, h.textOffset);
      return { file: h.file, score: h.score, matchField: field, snippet: s.snippet, highlights: s.matches };
    }),
  );
  const hasMore =
    live.length > opts.limit || (examined < candidates.length && examined >= DRIVE_INDEX_LIMITS.examineMax);
  return { terms, hits, hasMore };
}
