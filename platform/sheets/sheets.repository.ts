import type { Collection, Filter } from 'mongodb';
import { PROJECT_TYPE_OF_KIND } from '../../contracts/projects';
import type { COMMIT_SOURCES, COMMIT_STATUSES } from '../../contracts/sheets';
import { keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, isDuplicateKey, type Store, openStore } from '../infra/mongo';
import type { ProjectDoc } from '../projects/projects.repository';
import type { NewBlock, Tree } from './grid';

/**
 * Storage of sheets (SPEC 4.4). WARNING: field names are persisted.
 *
 * - `sheets`: one head per sheet, `_id` = the project id: the tree (columns and block list) of
 *   the merged commit the grid is at, and `version` = that commit's `seq`.
 * - `sheet_commits`: the commits (`kind: 'commit'`), with `sheetId` and `accountId`.
 * - `sheet_blocks`: the immutable row blocks the trees point at, with `sheetId` and `accountId`
 *   (their own collection: FerretDB decodes every document a filter visits, and blocks are the
 *   big ones). Blocks are read by `_id` one findOne each, in parallel: FerretDB 1.24 pushes
 *   `_id` equality down to PostgreSQL but not `$in`, which would scan the collection.
 * Deleting a sheet: deleteSheetData in platform/projects/projects.repository.ts (DELETE /projects/{id}).
 *
 * Concurrency: merged commits take a unique `slot` `<sheetId>#<seq>`; inserting it is the
 * compare-and-swap (unique inserts are race-free on FerretDB and MongoDB). The head follows with
 * a conditional update on `version`; a writer that finds a commit in the next slot while the head
 * lags (its writer died between the two writes) moves the head onto it (roll forward), so a
 * merged commit is never lost and never applied twice.
 */
export interface SheetHeadDoc {
  _id: string;
  accountId: string;
  version: number;
  headCommitId: string;
  tree: Tree;
  createdAt: Date;
  updatedAt: Date;
}

export interface BlockDoc {
  _id: string;
  sheetId: string;
  accountId: string;
  rows: number;
  /** JSON `[[rowId, cell…], …]` (see grid.ts for why a string). */
  data: string;
}

export interface CommitDoc {
  _id: string;
  kind: 'commit';
  /** `<sheetId>#<seq>` once merged; `<sheetId>#p#<id>` otherwise. Unique. */
  slot: string;
  sheetId: string;
  accountId: string;
  status: (typeof COMMIT_STATUSES)[number];
  seq: number | null;
  parentId: string | null;
  baseSeq: number;
  baseCommitId: string | null;
  summary: string;
  source: (typeof COMMIT_SOURCES)[number];
  authorKeyId: string | null;
  resolvedByKeyId: string | null;
  rebased: boolean;
  rollbackOf: string | null;
  changedCells: number;
  createdAt: Date;
  resolvedAt: Date | null;
  /** The grid after the commit (merged commits only). */
  tree: Tree | null;
  /** JSON strings (cheap on FerretDB): the ops as sent, the id-based ops, the diff, the touched set. */
  ops: string;
  resolved: string;
  diff: string;
  touched: string;
}

/** A sheet's project as GET /sheets lists it (the project fields a sheet shows). */
export type SheetProjectRow = Pick<
  ProjectDoc,
  '_id' | 'accountId' | 'name' | 'description' | 'tags' | 'createdAt' | 'updatedAt'
>;

export const mergedSlot = (sheetId: string, seq: number) => `${sheetId}#${seq}`;
export const proposalSlot = (sheetId: string, commitId: string) => `${sheetId}#p#${commitId}`;

/** The commit fields a list shows (no ops, diff, resolved ops, tree). */
const SUMMARY_PROJECTION = { tree: 0, ops: 0, resolved: 0, diff: 0, touched: 0 } as const;

/**
 * As stored: trees are JSON strings too (a tree of 40 blocks is some 200 BSON values, which
 * FerretDB would decode on every read of the head and of every listed commit).
 */
type Stored<T extends { tree: unknown }> = Omit<T, 'tree'> & { tree: string | null };
const toStored = <T extends { tree?: Tree | null }>(d: T) =>
  ('tree' in d ? { ...d, tree: d.tree ? JSON.stringify(d.tree) : null } : d) as unknown as Record<string, unknown>;
const fromStored = <T>(d: (Record<string, unknown> & { tree?: string | null }) | null): T | null =>
  d ? ({ ...d, tree: typeof d.tree === 'string' ? (JSON.parse(d.tree) as Tree) : null } as T) : null;

// Length: almost all of it is forAccount (its own Length line), the account-bound queries; the factory adds
// the index set-up.
export function createSheetsRepository(store: Store) {
  const db = openStore(store);
  const heads = db.db.collection<Stored<SheetHeadDoc>>(COLLECTIONS.sheets) as unknown as Collection<
    Stored<SheetHeadDoc>
  >;
  const commits = db.db.collection<Stored<CommitDoc>>(COLLECTIONS.sheetCommits) as unknown as Collection<
    Stored<CommitDoc>
  >;
  const head = (d: unknown) => fromStored<SheetHeadDoc>(d as Stored<SheetHeadDoc>);
  const commit = (d: unknown) => fromStored<CommitDoc>(d as Stored<CommitDoc>);
  const blocks = db.db.collection<BlockDoc>(COLLECTIONS.sheetBlocks) as unknown as Collection<BlockDoc>;
  const projects = db.db.collection<SheetProjectRow>(COLLECTIONS.projects) as unknown as Collection<SheetProjectRow>;
  let indexed: Promise<unknown> | undefined;
  // The unique slot index is what makes merges safe: a failure to build it is not swallowed.
  const ensureIndexes = () =>
    (indexed ??= Promise.all([
      commits.createIndex({ slot: 1 }, { unique: true }),
      commits.createIndex({ sheetId: 1, accountId: 1, kind: 1, createdAt: -1 }),
      commits.createIndex({ sheetId: 1, seq: 1 }),
      blocks.createIndex({ sheetId: 1, accountId: 1 }),
    ]).catch((err) => {
      indexed = undefined;
      throw err;
    }));

  return {
    ensureIndexes,

    // Length: 17 queries bound to one account id (the tenant filter lives in their closure); the longest,
    // pageCommits, is 17 lines.
    forAccount(accountId: string) {
      const mine = <T>(f: Filter<T>) => ({ ...f, accountId }) as Filter<T>;
      return {
        head: async (id: string) => head(await heads.findOne(mine<Stored<SheetHeadDoc>>({ _id: id }))),

        /** Insert a head; false when the sheet has one already (a retried creation wrote it). */
        async insertHead(doc: Omit<SheetHeadDoc, 'accountId'>): Promise<boolean> {
          try {
            await heads.insertOne(toStored({ ...doc, accountId }) as Stored<SheetHeadDoc>);
            return true;
          } catch (err) {
            if (isDuplicateKey(err)) return false;
            throw err;
          }
        },

        /** The head's version alone (cheap: no tree); null when there is no such sheet. */
        async headVersion(id: string): Promise<number | null> {
          const d = await heads.findOne(mine<Stored<SheetHeadDoc>>({ _id: id }), { projection: { version: 1 } });
          return d ? d.version : null;
        },

        /** Move the head from `fromVersion` to a commit; false when it had moved already. */
        async moveHead(
          id: string,
          fromVersion: number,
          to: { version: number; headCommitId: string; tree: Tree; updatedAt: Date },
        ): Promise<boolean> {
          const r = await heads.updateOne(mine<Stored<SheetHeadDoc>>({ _id: id, version: fromVersion }), {
            $set: toStored(to),
          });
          return r.matchedCount === 1;
        },

        /**
         * GET /sheets: a keyset page of the account's sheet projects, newest first. Paged over the
         * projects, not the heads: a sheet's head is written before its project and removed after
         * it, so every listed project has a grid, while a head a crash left without its project
         * is neither listed nor counted (`total` and `data` agree).
         */
        pageSheets(q: { limit: number; cursor?: string }): Promise<Page<SheetProjectRow>> {
          return keysetPage(
            projects,
            { accountId, deletedAt: null, projectType: PROJECT_TYPE_OF_KIND.sheet } as Filter<SheetProjectRow>,
            {
              tag: 'sheets:createdAt:desc',
              field: 'createdAt',
              direction: -1,
              limit: q.limit,
              cursor: q.cursor,
              projection: { content: 0, presentation: 0, shares: 0 },
            },
          );
        },

        /** Block JSON by id (only this account's and sheet's): one findOne by _id each, in parallel. */
        async blocks(sheetId: string, ids: string[]): Promise<Map<string, string>> {
          const docs = await Promise.all(
            [...new Set(ids)].map((id) => blocks.findOne(mine<BlockDoc>({ _id: id, sheetId }))),
          );
          return new Map(docs.flatMap((d) => (d ? [[d._id, d.data] as [string, string]] : [])));
        },

        async insertBlocks(sheetId: string, list: NewBlock[]): Promise<void> {
          if (!list.length) return;
          await ensureIndexes();
          await blocks.insertMany(
            list.map((b) => ({ _id: b.id, sheetId, accountId, rows: b.rows, data: b.data })),
            { ordered: false },
          );
        },

        async deleteBlocks(sheetId: string, ids: string[]): Promise<void> {
          await Promise.all(ids.map((id) => blocks.deleteOne(mine<BlockDoc>({ _id: id, sheetId }))));
        },

        /** Insert a commit; false when its slot is taken (another commit won that seq). */
        async insertCommit(doc: Omit<CommitDoc, 'accountId'>): Promise<boolean> {
          await ensureIndexes();
          try {
            await commits.insertOne(toStored({ ...doc, accountId }) as Stored<CommitDoc>);
            return true;
          } catch (err) {
            if (isDuplicateKey(err)) return false;
            throw err;
          }
        },

        commit: async (sheetId: string, id: string) =>
          commit(await commits.findOne(mine<Stored<CommitDoc>>({ _id: id, sheetId, kind: 'commit' }))),

        commitAt: async (sheetId: string, seq: number) =>
          commit(
            await commits.findOne(mine<Stored<CommitDoc>>({ slot: mergedSlot(sheetId, seq), sheetId, kind: 'commit' })),
          ),

        /** Merged commits after `seq` (their touched sets), oldest first. */
        mergedAfter: (sheetId: string, seq: number) =>
          commits
            .find(mine<Stored<CommitDoc>>({ sheetId, kind: 'commit', status: 'merged', seq: { $gt: seq } }), {
              projection: { _id: 1, seq: 1, touched: 1 },
            })
            .sort({ seq: 1 })
            .toArray() as Promise<Pick<CommitDoc, '_id' | 'seq' | 'touched'>[]>,

        /** Merged commits, oldest first (tests and audits). */
        mergedChain: (sheetId: string) =>
          commits
            .find(mine<Stored<CommitDoc>>({ sheetId, kind: 'commit', status: 'merged' }), {
              projection: SUMMARY_PROJECTION,
            })
            .sort({ seq: 1 })
            .toArray(),

        /**
         * Turn a proposal into a merged commit: only while it is still proposed, and only if its
         * new slot is free. 'taken': another commit has that seq; 'gone': no longer proposed.
         */
        async mergeProposal(sheetId: string, id: string, set: Partial<CommitDoc>): Promise<'ok' | 'taken' | 'gone'> {
          await ensureIndexes();
          try {
            const r = await commits.updateOne(
              mine<Stored<CommitDoc>>({ _id: id, sheetId, kind: 'commit', status: 'proposed' }),
              { $set: toStored(set) },
            );
            return r.matchedCount === 1 ? 'ok' : 'gone';
          } catch (err) {
            if (isDuplicateKey(err)) return 'taken';
            throw err;
          }
        },

        async rejectProposal(sheetId: string, id: string, set: Partial<CommitDoc>): Promise<CommitDoc | null> {
          return commit(
            await commits.findOneAndUpdate(
              mine<Stored<CommitDoc>>({ _id: id, sheetId, kind: 'commit', status: 'proposed' }),
              { $set: toStored(set) },
              { returnDocument: 'after' },
            ),
          );
        },

        async pageCommits(
          sheetId: string,
          q: { limit: number; cursor?: string; status?: CommitDoc['status'] },
        ): Promise<Page<CommitDoc>> {
          const page = await keysetPage(
            commits,
            mine<Stored<CommitDoc>>({ sheetId, kind: 'commit', ...(q.status ? { status: q.status } : {}) }),
            {
              tag: `sheet-commits:${q.status ?? 'all'}:createdAt:desc`,
              field: 'createdAt',
              direction: -1,
              limit: q.limit,
              cursor: q.cursor,
            },
          );
          return { ...page, data: page.data.map((d) => commit(d)!) };
        },
      };
    },
  };
}
