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
import { type AccountSlice, accountSlice } from '../infra/tenant';
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

/** A sheet's documents as DELETE /projects/{id} sees them: their owner and sheet (platform/sheets/ owns their shapes). */
interface SheetPart {
  _id: string;
  accountId: string;
  sheetId?: string;
}

/**
 * Projects of every kind. Every operation on an account's projects goes through
 * `forAccount(accountId)`: another account's project is simply not found.
 */
export function createProjects(store: Store) {
  const db = openStore(store);
  const col = db.db.collection<ProjectDoc>(COLLECTIONS.projects) as unknown as Collection<ProjectDoc>;
  const sheetHeads = db.db.collection<SheetPart>(COLLECTIONS.sheets);
  const sheetCommits = db.db.collection<SheetPart>(COLLECTIONS.sheetCommits);
  const sheetBlocks = db.db.collection<SheetPart>(COLLECTIONS.sheetBlocks);
  let indexed: Promise<unknown> | undefined;
  // One index per list sort; FerretDB ignores them, MongoDB serves each list page from one.
  const ensureIndex = () =>
    (indexed ??= Promise.all([
      col.createIndex({ accountId: 1, updatedAt: -1, _id: -1 }),
      col.createIndex({ accountId: 1, createdAt: -1, _id: -1 }),
      col.createIndex({ accountId: 1, name: 1, _id: 1 }),
    ]).catch(() => undefined));

  return {
    newId: () => newId('prj'),

    forAccount(accountId: string) {
      const mine = accountSlice(col, accountId);
      const versioned = mine as unknown as AccountSlice<ProjectDoc & { version: number }>;
      const live = (id: string) => ({ _id: id, deletedAt: null }) as Filter<ProjectDoc>;

      return {
        /** Store a new project of the account; the document returned carries the account id. */
        async insert(doc: Omit<ProjectDoc, 'accountId'>): Promise<ProjectDoc> {
          await ensureIndex();
          await mine.insertOne(doc as ProjectDoc);
          return { ...doc, accountId };
        },

        /** The live (not deleted) project. */
        get: (id: string) => mine.findOne(live(id)),

        /** The `limit` most recently updated projects, whole (the research worker searches their text). */
        recent: (limit: number) => mine.find({ deletedAt: null }).sort({ updatedAt: -1 }).limit(limit).toArray(),

        /** Delete the project whatever its state (undoing a creation a later step failed). */
        async discard(id: string): Promise<void> {
          await mine.deleteOne({ _id: id });
        },

        /** Move the project's updatedAt forward to `at` (never back); the version stays. */
        async touchUpdatedAt(id: string, at: Date): Promise<void> {
          await mine.updateOne({ _id: id, updatedAt: { $lt: at } }, { $set: { updatedAt: at } });
        },

        /** Record a finished build on the presentation. */
        async saveBuild(id: string, build: NonNullable<PresentationSettings['build']>): Promise<boolean> {
          const r = await mine.updateOne({ _id: id }, { $set: { 'presentation.build': build, updatedAt: new Date() } });
          return r.matchedCount === 1;
        },

        /** One keyset page of the account's projects, without content (platform/infra/lists.ts). */
        async list(
          f: ProjectListFilter,
          page: { field: 'updatedAt' | 'createdAt' | 'name'; direction: 1 | -1; limit: number; cursor?: string },
        ): Promise<Page<ProjectDoc>> {
          await ensureIndex();
          const tag = `projects:${page.field}:${page.direction === 1 ? 'asc' : 'desc'}`;
          if (page.cursor) decodeCursor(tag, page.cursor); // 400 for a bad cursor, whatever the filters
          const filter: Filter<ProjectDoc> = { deletedAt: null };
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
          return keysetPage(mine, filter, {
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
        async ensureVersion(doc: ProjectDoc): Promise<void> {
          if (doc.version !== undefined) return;
          await mine.updateOne({ _id: doc._id, version: { $exists: false } }, { $set: { version: 1 } });
          doc.version = 1;
        },

        /**
         * Set fields of the project in one atomic command (version +1, updatedAt now);
         * 404 not_found, or 409 version_conflict when `expectedVersion` is given and differs.
         */
        update: (id: string, set: Partial<ProjectDoc>, expectedVersion?: number) =>
          updateVersioned(versioned, accountId, id, { $set: set } as UpdateFilter<ProjectDoc & { version: number }>, {
            expectedVersion,
            extra: { deletedAt: null },
            what: 'project',
          }) as Promise<ProjectDoc>,

        /**
         * Delete the project (only at `expectedVersion` when given) and return what was
         * deleted; 404 not_found, 409 version_conflict.
         */
        async remove(id: string, expectedVersion?: number): Promise<ProjectDoc> {
          const base = live(id);
          const gone = await mine.findOneAndDelete(
            expectedVersion === undefined ? base : { ...base, version: expectedVersion },
          );
          if (gone) return gone;
          throw await missOrConflict(
            versioned,
            base as Filter<ProjectDoc & { version: number }>,
            expectedVersion,
            'project',
          );
        },

        /**
         * Everything of one sheet (head, commits, blocks): what DELETE /projects/{id} removes.
         * Here, not in the sheets repository, so that sheets depend on projects and never the
         * other way.
         */
        async deleteSheetData(id: string): Promise<void> {
          await accountSlice(sheetHeads, accountId).deleteOne({ _id: id });
          await accountSlice(sheetCommits, accountId).deleteMany({ sheetId: id });
          await accountSlice(sheetBlocks, accountId).deleteMany({ sheetId: id });
        },
      };
    },
  };
}
