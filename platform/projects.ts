import type { Collection } from 'mongodb';
import type { DeckTheme, DeckSlide, OutlineItem, SlideMode } from '../contracts/presentations';
import { newId } from './ids';
import { COLLECTIONS, type Database } from './mongo';

/**
 * Projects (SPEC 4.3): one collection for every project type. A presentation keeps its deck
 * settings and, once built, its slides under `presentation`.
 * WARNING: field names are persisted.
 */
export interface ProjectDoc {
  _id: string; // prj_…
  accountId: string;
  name: string;
  description: string;
  projectType: 'presentation' | 'flowchart' | 'whiteboard' | 'notes';
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
