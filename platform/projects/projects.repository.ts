import type { Collection, Filter, UpdateFilter } from 'mongodb';
import type { DeckTheme, DeckSlide, OutlineItem, SlideMode } from '../../contracts/presentations';
import {
  PROJECT_KINDS,
  PROJECT_TYPE_OF_KIND,
  type ProjectKind,
  type ProjectType,
  type ShareRole,
} from '../../contracts/projects';
import { newId } from '../infra/ids';
import { decodeCursor, keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { missOrConflict, updateVersioned } from '../infra/versioned';

/**
 * Projects (SPEC 4.3): one collection for every kind. `content` holds what the project is made
 * of (flowchart nodes and edges, whiteboard elements, notes Markdown); a presentation keeps its
 * deck settings and, once built, its slides under `presentation`; a sheet's grid and commits live
 * in their own collections (platform/sheets/), keyed by the project id.
 * WARNING: field names are persisted. Documents written before `kind` and `version` existed
 * (presentations) have neither: read them with `kindOf` and `versionOf`.
 */
export interface ProjectDoc {
  _id: string; // prj_…
  accountId: string;
  name: string;
  description: string;
  kind?: ProjectKind;
  /** SPEC 2.7 projectType (`chart` for flowcharts and whiteboards); older presentations store `presentation`. */
  projectType: ProjectType;
  /** Optimistic concurrency (platform/infra/versioned.ts): 1 at creation, +1 per change. */
  version?: number;
  /** The kind's content (FlowchartContent, whiteboard elements, notes Markdown); null for presentations and sheets. */
  content?: Record<string, unknown> | null;
  /** People the project was shared with (POST /projects/{id}/share). */
  shares?: ProjectShareDoc[];
  /** How the canvas is edited; for presentations the slide mode (creator or content). */
  canvasMode: string;
  tags: string[];
  isStarred: boolean;
  createdAt: Date;
  updatedAt: Date;
  deletedAt: Date | null;
  presentation?: PresentationSettings;
}

export interface PresentationSettings {
  brief: string | null;
  outline: OutlineItem[] | null;
  slideCount: number;
  slideMode: SlideMode;
  themeId: string | null;
  visualStyle: string;
  brandUrl: string | null;
  companyName: string | null;
  /** SPEC 3.3, set at creation. */
  generationStatus: 'generating' | 'pending_editor_open';
  /** The deck_ job building the slides; null when pending_editor_open. */
  jobId: string | null;
  /** Filled in by the deck pool. */
  build: {
    status: 'built' | 'partial';
    theme: DeckTheme;
    slides: DeckSlide[];
    manifestUrl: string;
    builtAt: Date;
  } | null;
}

/** The kind of a stored project (documents older than `kind` are presentations). */
export const kindOf = (p: Pick<ProjectDoc, 'kind' | 'projectType'>): ProjectKind =>
  p.kind ?? (p.projectType as ProjectKind);
export const versionOf = (p: Pick<ProjectDoc, 'version'>): number => p.version ?? 1;

/** One person a project is shared with. WARNING: persisted. */
export interface ProjectShareDoc {
  /** Lower case. */
  email: string;
  role: ShareRole | string;
  sharedAt: Date;
}

/** What a list of projects may be narrowed to (GET /projects). */
export interface ProjectListFilter {
  projectType?: ProjectType;
  kind?: ProjectKind;
  tag?: string;
  /** Already escaped for a regular expression. */
  nameRegex?: string;
  isStarred?: boolean;
}

/** Kinds whose project type no other kind has: filtering by kind is filtering by projectType, which documents older than `kind` carry too. */
const UNIQUE_TYPE = new Set<ProjectKind>(
  PROJECT_KINDS.filter(
    (k) => PROJECT_KINDS.filter((o) => PROJECT_TYPE_OF_KIND[o] === PROJECT_TYPE_OF_KIND[k]).length === 1,
  ),
);

/** The fields list items leave out (content can be large). */
const LIST_PROJECTION = { content: 0, presentation: 0, shares: 0 } as const;

export function createProjects(store: Store) {
  const db = openStore(store);
  const col = db.db.collection<ProjectDoc>(COLLECTIONS.projects) as unknown as Collection<ProjectDoc>;
  let indexed: Promise<unknown> | undefined;
  // One index per list sort; FerretDB ignores them, MongoDB serves each list page from one.
  const ensureIndex = () =>
    (indexed ??= Promise.all([
      col.createIndex({ accountId: 1, updatedAt: -1, _id: -1 }),
      col.createIndex({ accountId: 1, createdAt: -1, _id: -1 }),
      col.createIndex({ accountId: 1, name: 1, _id: 1 }),
    ]).catch(() => undefined));
  const mine = (accountId: string, id: string) => ({ _id: id, accountId, deletedAt: null }) as Filter<ProjectDoc>;

  return {
    newId: () => newId('prj'),

    async insert(doc: ProjectDoc): Promise<ProjectDoc> {
      await ensureIndex();
      await col.insertOne(doc);
      return doc;
    },

    findForAccount: (accountId: string, id: string) => col.findOne(mine(accountId, id)),

    /** The account's `limit` most recently updated projects, whole (the research worker searches their text). */
    recent: (accountId: string, limit: number) =>
      col.find({ accountId, deletedAt: null }).sort({ updatedAt: -1 }).limit(limit).toArray(),

    async deleteForAccount(accountId: string, id: string): Promise<void> {
      await col.deleteOne({ _id: id, accountId });
    },

    /** Move the project's updatedAt forward to `at` (never back); the version stays. */
    async touchUpdatedAt(accountId: string, id: string, at: Date): Promise<void> {
      await col.updateOne({ _id: id, accountId, updatedAt: { $lt: at } }, { $set: { updatedAt: at } });
    },

    /** Record a finished build on the presentation. */
    async saveBuild(
      accountId: string,
      id: string,
      build: NonNullable<PresentationSettings['build']>,
    ): Promise<boolean> {
      const r = await col.updateOne(
        { _id: id, accountId },
        { $set: { 'presentation.build': build, updatedAt: new Date() } },
      );
      return r.matchedCount === 1;
    },

    /** One keyset page of the account's projects, without content (platform/infra/lists.ts). */
    async list(
      accountId: string,
      f: ProjectListFilter,
      page: { field: 'updatedAt' | 'createdAt' | 'name'; direction: 1 | -1; limit: number; cursor?: string },
    ): Promise<Page<ProjectDoc>> {
      await ensureIndex();
      const tag = `projects:${page.field}:${page.direction === 1 ? 'asc' : 'desc'}`;
      if (page.cursor) decodeCursor(tag, page.cursor); // 400 for a bad cursor, whatever the filters
      const filter: Filter<ProjectDoc> = { accountId, deletedAt: null };
      if (f.kind) {
        if (UNIQUE_TYPE.has(f.kind)) filter.projectType = PROJECT_TYPE_OF_KIND[f.kind];
        else filter.kind = f.kind;
      }
      if (f.projectType) {
        // A kind of another project type matches nothing.
        if (f.kind && PROJECT_TYPE_OF_KIND[f.kind] !== f.projectType) return { data: [], total: 0, cursor: null };
        filter.projectType = f.projectType;
      }
      if (f.tag !== undefined) filter.tags = f.tag;
      if (f.isStarred !== undefined) filter.isStarred = f.isStarred;
      if (f.nameRegex !== undefined) filter.name = { $regex: f.nameRegex, $options: 'i' };
      return keysetPage(col, filter, {
        tag,
        field: page.field,
        direction: page.direction,
        limit: page.limit,
        cursor: page.cursor,
        projection: LIST_PROJECTION,
      });
    },

    /**
     * Documents written before `version` existed get version 1 stored, so that the next change
     * makes it 2 (an `$inc` of a missing field would make it 1 again).
     */
    async ensureVersion(accountId: string, doc: ProjectDoc): Promise<void> {
      if (doc.version !== undefined) return;
      await col.updateOne({ _id: doc._id, accountId, version: { $exists: false } }, { $set: { version: 1 } });
      doc.version = 1;
    },

    /**
     * Set fields of the account's project in one atomic command (version +1, updatedAt now);
     * 404 not_found, or 409 version_conflict when `expectedVersion` is given and differs.
     */
    update: (accountId: string, id: string, set: Partial<ProjectDoc>, expectedVersion?: number) =>
      updateVersioned(
        col as unknown as Collection<ProjectDoc & { version: number }>,
        accountId,
        id,
        { $set: set } as UpdateFilter<ProjectDoc & { version: number }>,
        {
          expectedVersion,
          extra: { deletedAt: null },
          what: 'project',
        },
      ) as Promise<ProjectDoc>,

    /**
     * Delete the account's project (only at `expectedVersion` when given) and return what was
     * deleted; 404 not_found, 409 version_conflict.
     */
    async remove(accountId: string, id: string, expectedVersion?: number): Promise<ProjectDoc> {
      const base = mine(accountId, id);
      const gone = await col.findOneAndDelete(
        expectedVersion === undefined ? base : { ...base, version: expectedVersion },
      );
      if (gone) return gone;
      throw await missOrConflict(
        col as unknown as Collection<ProjectDoc & { version: number }>,
        base as Filter<ProjectDoc & { version: number }>,
        expectedVersion,
        'project',
      );
    },
  };
}

/**
 * Everything of one sheet (head, commits, blocks; platform/sheets/ owns their shapes): what
 * DELETE /projects/{id} removes. Here, not in the sheets repository, so that sheets depend on
 * projects and never the other way.
 */
export async function deleteSheetData(store: Store, accountId: string, id: string): Promise<void> {
  const db = openStore(store);
  await db.db.collection(COLLECTIONS.sheets).deleteOne({ _id: id as never, accountId });
  await db.db.collection(COLLECTIONS.sheetCommits).deleteMany({ sheetId: id, accountId });
  await db.db.collection(COLLECTIONS.sheetBlocks).deleteMany({ sheetId: id, accountId });
}
