import type { Collection } from 'mongodb';
import type { DeckTheme, DeckSlide, OutlineItem, SlideMode } from '../../contracts/presentations';
import type { ProjectKind, ProjectType } from '../../contracts/projects';
import { newId } from '../ids';
import { COLLECTIONS, type Database } from '../mongo';

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
  /** Optimistic concurrency (platform/versioned.ts): 1 at creation, +1 per change. */
  version?: number;
  /** The kind's content (FlowchartContent, whiteboard elements, notes Markdown); null for presentations and sheets. */
  content?: Record<string, unknown> | null;
  /** People the project was shared with (POST /projects/{id}/share). */
  shares?: { email: string; role: string; sharedAt: Date }[];
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
  build: { status: 'built' | 'partial'; theme: DeckTheme; slides: DeckSlide[]; manifestUrl: string; builtAt: Date } | null;
}

/** The kind of a stored project (documents older than `kind` are presentations). */
export const kindOf = (p: Pick<ProjectDoc, 'kind' | 'projectType'>): ProjectKind => p.kind ?? (p.projectType as ProjectKind);
export const versionOf = (p: Pick<ProjectDoc, 'version'>): number => p.version ?? 1;

export function createProjects(db: Database) {
  const col = db.db.collection<ProjectDoc>(COLLECTIONS.projects) as unknown as Collection<ProjectDoc>;
  let indexed: Promise<unknown> | undefined;
  const ensureIndex = () => (indexed ??= col.createIndex({ accountId: 1, updatedAt: -1 }).catch(() => undefined));

  return {
    newId: () => newId('prj'),

    async insert(doc: ProjectDoc): Promise<ProjectDoc> {
      await ensureIndex();
      await col.insertOne(doc);
      return doc;
    },

    findForAccount: (accountId: string, id: string) => col.findOne({ _id: id, accountId, deletedAt: null }),

    async deleteForAccount(accountId: string, id: string): Promise<void> {
      await col.deleteOne({ _id: id, accountId });
    },

    /** Record a finished build on the presentation. */
    async saveBuild(accountId: string, id: string, build: NonNullable<PresentationSettings['build']>): Promise<boolean> {
      const r = await col.updateOne({ _id: id, accountId }, { $set: { 'presentation.build': build, updatedAt: new Date() } });
      return r.matchedCount === 1;
    },
  };
}
export type Projects = ReturnType<typeof createProjects>;

/** The absolute editor link of a presentation (SPEC 2.7 path shape /presentations/{projectId}). */
export const presentationUrl = (publicBaseUrl: string, projectId: string) => `${publicBaseUrl}/presentations/${projectId}`;
