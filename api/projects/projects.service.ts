import { openUrlOf, PROJECT_TYPE_OF_KIND, type ProjectKind } from '../../contracts/projects';
import { emitEvent } from '../../platform/events';
import { createProjects, kindOf, versionOf, type ProjectDoc } from '../../platform/projects/projects.repository';
import type { Runtime } from '../../platform/runtime';

/** What every project answers with (list items leave `content` out). */
export interface ProjectView {
  id: string;
  name: string;
  description: string;
  kind: ProjectKind;
  projectType: string;
  tags: string[];
  isStarred: boolean;
  version: number;
  createdAt: string;
  updatedAt: string;
  openUrl: string;
  content?: Record<string, unknown> | null;
}

export function toProjectView(p: ProjectDoc, publicBaseUrl: string, opts: { content: boolean }): ProjectView {
  const kind = kindOf(p);
  const view: ProjectView = {
    id: p._id,
    name: p.name,
    description: p.description,
    kind,
    projectType: PROJECT_TYPE_OF_KIND[kind],
    tags: p.tags,
    isStarred: p.isStarred,
    version: versionOf(p),
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
    openUrl: openUrlOf(publicBaseUrl, kind, p._id),
  };
  if (opts.content) view.content = p.content ?? null;
  return view;
}

export interface CreateProjectInput {
  accountId: string;
  kind: ProjectKind;
  name: string;
  description?: string;
  tags?: string[];
  /** The kind's content, already validated against its contract. */
  content: Record<string, unknown> | null;
  canvasMode?: string;
  /** The request's id maker (an Idempotency-Key retry names the same project). */
  idFor?: (prefix: string) => string;
}

/**
 * Projects as the API and the assistant make them: store, then announce `project.created`.
 * Every capability that creates a project (flowcharts, whiteboards, notes, templates, sheets,
 * flowchart extraction) goes through `create`.
 */
export function createProjectsService(rt: Pick<Runtime, 'db' | 'config' | 'amqp' | 'log'>) {
  const projects = createProjects(rt.db);
  const base = rt.config.PUBLIC_BASE_URL;

  return {
    repository: projects,
    view: (p: ProjectDoc, content = true) => toProjectView(p, base, { content }),

    async create(input: CreateProjectInput): Promise<ProjectDoc> {
      const now = new Date();
      const doc: ProjectDoc = {
        _id: input.idFor ? input.idFor('prj') : projects.newId(),
        accountId: input.accountId,
        name: input.name,
        description: input.description ?? '',
        kind: input.kind,
        projectType: PROJECT_TYPE_OF_KIND[input.kind],
        version: 1,
        content: input.content,
        shares: [],
        canvasMode: input.canvasMode ?? input.kind,
        tags: input.tags ?? [],
        isStarred: false,
        createdAt: now,
        updatedAt: now,
        deletedAt: null,
      };
      await projects.insert(doc);
      // Stored first; the outbox covers a broker outage, so a failure to announce is only logged.
      await emitEvent(rt, input.accountId, 'project.created', { projectId: doc._id, kind: doc.kind, projectType: doc.projectType, name: doc.name, openUrl: openUrlOf(base, input.kind, doc._id) }).catch((err) =>
        rt.log.error('project.created not recorded', { projectId: doc._id, err: err as Error }),
      );
      return doc;
    },
  };
}
export type ProjectsService = ReturnType<typeof createProjectsService>;
