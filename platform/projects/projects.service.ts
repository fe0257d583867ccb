import { z } from 'zod';
import {
  FlowchartContent,
  NotesContent,
  openUrlOf,
  PROJECT_LIMITS,
  PROJECT_TYPE_OF_KIND,
  WhiteboardContent,
  type PresentationContent,
  type ProjectKind,
  type ProjectListQuery,
  type ProjectShareRequest,
  type ProjectUpdate,
} from '../../contracts/projects';
import { createBlobStore } from '../infra/media-blobs';
import { AppError, notFound } from '../infra/errors';
import { emitEvent } from '../events/events';
import { pollPath } from '../jobs/jobs';
import { mapPage } from '../infra/lists';
import { isDuplicateKey } from '../infra/mongo';
import { normalizeContent } from './content';
import { createProjects, kindOf, versionOf, type ProjectDoc, type ProjectShareDoc } from './projects.repository';
import type { Runtime } from '../runtime';
import { versionConflict } from '../infra/versioned';
import { parseOrThrow } from '../infra/validation';

/** What every project answers with (list items leave `content` and `shares` out). */
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
  shares?: { email: string; role: string; sharedAt: string }[];
}

/** A presentation's deck settings and build as read-only content; signed links are signed afresh. */
function presentationContent(p: ProjectDoc, resign: (url: string) => string): PresentationContent | null {
  const s = p.presentation;
  if (!s) return null;
  return {
    generationStatus: s.generationStatus,
    slideMode: s.slideMode,
    requestedSlides: s.slideCount,
    themeId: s.themeId,
    visualStyle: s.visualStyle,
    brief: s.brief,
    outline: s.outline,
    jobId: s.jobId,
    pollUrl: s.jobId ? pollPath(s.jobId) : null,
    build: s.build
      ? {
          status: s.build.status,
          builtAt: new Date(s.build.builtAt).toISOString(),
          manifestUrl: resign(s.build.manifestUrl),
          slides: s.build.slides.map((sl) => ({
            index: sl.index,
            title: sl.title,
            bullets: sl.bullets,
            status: sl.status,
            imageUrl: sl.imageUrl ? resign(sl.imageUrl) : null,
            contentUrl: sl.contentUrl ? resign(sl.contentUrl) : null,
            width: sl.width,
            height: sl.height,
          })),
        }
      : null,
  };
}

export function toProjectView(
  p: ProjectDoc,
  publicBaseUrl: string,
  opts: { content: boolean; resign?: (url: string) => string },
): ProjectView {
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
  if (opts.content) {
    view.content =
      kind === 'presentation' && p.presentation
        ? (presentationContent(p, opts.resign ?? ((u) => u)) as unknown as Record<string, unknown>)
        : (p.content ?? null);
    view.shares = (p.shares ?? []).map((s) => ({
      email: s.email,
      role: s.role,
      sharedAt: new Date(s.sharedAt).toISOString(),
    }));
  }
  return view;
}

export interface CreateProjectInput {
  accountId: string;
  kind: ProjectKind;
  name: string;
  description?: string;
  tags?: string[];
  /** The kind's content, already validated against its contract (flowcharts and whiteboards are completed: layout, defaults). */
  content: Record<string, unknown> | null;
  canvasMode?: string;
  /** The request's id maker (an Idempotency-Key retry names the same project). */
  idFor?: (prefix: string) => string;
}

/** The content contract of each kind whose content PATCH may replace. */
const PATCHABLE_CONTENT: Partial<Record<ProjectKind, z.ZodType>> = {
  flowchart: z.strictObject({ content: FlowchartContent }),
  whiteboard: z.strictObject({ content: WhiteboardContent }),
  notes: z.strictObject({ content: NotesContent }),
};

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const uniqueTags = (tags: string[] | undefined) => (tags === undefined ? undefined : [...new Set(tags)]);
/**
 * Tries of a share against concurrent changes of the same project (without If-Match): each try
 * reads the shares and writes them back conditional on the version it read (positional and
 * array-filter updates are not available on FerretDB 1.24), so one of N racing writers wins per
 * round; a short random pause spreads the rest.
 */
const SHARE_TRIES = 25;
const pause = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 3 * attempt)));

/**
 * Projects as the API and the assistant make them: store, then announce `project.created`.
 * Every capability that creates a project (flowcharts, whiteboards, notes, templates, sheets,
 * flowchart extraction) goes through `create`. The rest is /projects (SPEC 4.3): list, read,
 * PATCH, DELETE, share; every change stored first, then announced (project.updated,
 * project.deleted, project.shared) through the event outbox.
 * Length: a factory whose 11 operations share the projects repository and the blob store; the longest, share,
 * is 48 lines.
 */
export function createProjectsService(rt: Pick<Runtime, 'store' | 'config' | 'amqp' | 'log'>) {
  const projects = createProjects(rt.store);
  const base = rt.config.PUBLIC_BASE_URL;
  const blobs = createBlobStore(rt.store, {
    secret: rt.config.ASSET_SIGNING_SECRET,
    publicBaseUrl: base,
    defaultTtlSeconds: rt.config.ASSET_URL_TTL_SECONDS,
  });
  /** A stored signed asset link, signed again from now (a deck read weeks later still opens). */
  const resign = (url: string) => {
    const m = /\/api\/v1\/assets\/([A-Za-z0-9_-]{1,128})\/([^/?#]+)\?/.exec(url);
    if (!m) return url;
    try {
      return blobs.url(m[1]!, decodeURIComponent(m[2]!));
    } catch {
      return url;
    }
  };
  const view = (p: ProjectDoc, content = true) => toProjectView(p, base, { content, resign });

  const announce = (
    accountId: string,
    name: 'project.created' | 'project.updated' | 'project.deleted' | 'project.shared',
    data: Record<string, unknown>,
  ) =>
    // Stored first; the outbox covers a broker outage, so a failure to announce is only logged.
    emitEvent(rt, accountId, name, data).then(
      () => undefined,
      (err) => rt.log.error(`${name} not recorded`, { projectId: data.projectId as string, err: err as Error }),
    );

  const mustGet = async (accountId: string, id: string) => {
    const doc = await projects.forAccount(accountId).get(id);
    if (!doc) throw notFound('project');
    return doc;
  };

  async function create(input: CreateProjectInput): Promise<ProjectDoc> {
    const now = new Date();
    const doc: ProjectDoc = {
      _id: input.idFor ? input.idFor('prj') : projects.newId(),
      accountId: input.accountId,
      name: input.name,
      description: input.description ?? '',
      kind: input.kind,
      projectType: PROJECT_TYPE_OF_KIND[input.kind],
      version: 1,
      content: normalizeContent(input.kind, input.content),
      shares: [],
      canvasMode: input.canvasMode ?? input.kind,
      tags: uniqueTags(input.tags) ?? [],
      isStarred: false,
      createdAt: now,
      updatedAt: now,
      deletedAt: null,
    };
    const mine = projects.forAccount(input.accountId);
    try {
      await mine.insert(doc);
    } catch (err) {
      // An Idempotency-Key retry of a request that stored the project before it died: answer that one.
      const existing = isDuplicateKey(err) && input.idFor ? await mine.get(doc._id) : null;
      if (!existing) throw err;
      return existing;
    }
    await announce(input.accountId, 'project.created', {
      projectId: doc._id,
      kind: input.kind,
      projectType: doc.projectType,
      name: doc.name,
      openUrl: openUrlOf(base, input.kind, doc._id),
    });
    return doc;
  }

  return {
    repository: projects,
    view,
    create,

    /** GET /projects: one keyset page, newest change first unless asked otherwise. */
    async list(accountId: string, q: ProjectListQuery) {
      const search = q.q?.trim();
      const direction = q.order ? (q.order === 'asc' ? 1 : -1) : q.sort === 'name' ? 1 : -1;
      const page = await projects.forAccount(accountId).list(
        {
          projectType: q.projectType,
          kind: q.kind,
          tag: q.tag,
          isStarred: q.starred === undefined ? undefined : q.starred === 'true',
          nameRegex: search ? escapeRegex(search) : undefined,
        },
        { field: q.sort, direction, limit: q.limit, cursor: q.cursor },
      );
      return mapPage(page, (p) => view(p, false));
    },

    get: async (accountId: string, id: string) => view(await mustGet(accountId, id)),

    /** PATCH /projects/{id}: only the fields sent change, in one atomic command. */
    async update(accountId: string, id: string, patch: ProjectUpdate, ifMatch: number | undefined) {
      const doc = await mustGet(accountId, id);
      const kind = kindOf(doc);
      const set: Partial<ProjectDoc> = {};
      if (patch.content !== undefined) {
        const schema = PATCHABLE_CONTENT[kind];
        if (!schema) {
          const where =
            kind === 'presentation'
              ? 'slides are built by its deck job'
              : kind === 'sheet'
                ? 'change the grid through /sheets/{id}'
                : 'it has no editable content';
          throw new AppError(
            'validation_error',
            `content: the content of a ${kind} project cannot be changed here (${where})`,
          );
        }
        const parsed = parseOrThrow(schema, { content: patch.content }) as { content: Record<string, unknown> };
        set.content = normalizeContent(kind, parsed.content);
      }
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.description !== undefined) set.description = patch.description;
      if (patch.tags !== undefined) set.tags = uniqueTags(patch.tags);
      if (patch.isStarred !== undefined) set.isStarred = patch.isStarred;
      const mine = projects.forAccount(accountId);
      await mine.ensureVersion(doc);
      const after = await mine.update(id, set, ifMatch);
      await announce(accountId, 'project.updated', {
        projectId: id,
        kind,
        projectType: PROJECT_TYPE_OF_KIND[kind],
        changedFields: Object.keys(set),
        version: versionOf(after),
      });
      return view(after);
    },

    /**
     * A sheet's grid changed (a merged commit: ops, edit, merged proposal, rollback): one update
     * moves the project's updatedAt to the commit's time (GET /projects sorted by updatedAt shows
     * it), then project.updated is announced with changedFields ['content'], the sheet's version
     * and the commit. The project's own version (If-Match of PATCH /projects/{id}) does not move.
     * The commit is merged already: a failure here is logged, not answered.
     */
    async sheetChanged(accountId: string, id: string, change: { version: number; commitId: string; at: Date }) {
      try {
        await projects.forAccount(accountId).touchUpdatedAt(id, change.at);
      } catch (err) {
        rt.log.error('sheet project updatedAt not moved', { projectId: id, err: err as Error });
      }
      await announce(accountId, 'project.updated', {
        projectId: id,
        kind: 'sheet',
        projectType: PROJECT_TYPE_OF_KIND.sheet,
        changedFields: ['content'],
        version: change.version,
        commitId: change.commitId,
      });
    },

    /** DELETE /projects/{id}; a sheet's grid and commits go with it, a presentation's deck job stays. */
    async remove(accountId: string, id: string, ifMatch: number | undefined) {
      const mine = projects.forAccount(accountId);
      if (ifMatch !== undefined) await mine.ensureVersion(await mustGet(accountId, id));
      const gone = await mine.remove(id, ifMatch);
      const kind = kindOf(gone);
      if (kind === 'sheet') await mine.deleteSheetData(id);
      await announce(accountId, 'project.deleted', {
        projectId: id,
        kind,
        projectType: PROJECT_TYPE_OF_KIND[kind],
        name: gone.name,
      });
    },

    /**
     * POST /projects/{id}/share: add the email with its role, or change the role of an email
     * already there (never a second entry). Re-sending the same email and role changes nothing
     * and announces nothing. At most PROJECT_LIMITS.sharesMax people per project.
     */
    async share(accountId: string, id: string, req: ProjectShareRequest, ifMatch: number | undefined) {
      const mine = projects.forAccount(accountId);
      for (let attempt = 1; ; attempt++) {
        const doc = await mustGet(accountId, id);
        await mine.ensureVersion(doc);
        if (ifMatch !== undefined && ifMatch !== versionOf(doc)) {
          throw versionConflict('project', versionOf(doc), ifMatch);
        }
        const shares: ProjectShareDoc[] = doc.shares ?? [];
        const existing = shares.find((s) => s.email === req.email);
        if (existing?.role === req.role) return view(doc);
        if (!existing && shares.length >= PROJECT_LIMITS.sharesMax) {
          throw new AppError(
            'limit_exceeded',
            `project is already shared with ${PROJECT_LIMITS.sharesMax} people, the most a project can be shared with`,
          );
        }
        const next = existing
          ? shares.map((s) => (s.email === req.email ? { ...s, role: req.role } : s))
          : [...shares, { email: req.email, role: req.role, sharedAt: new Date() }];
        let after: ProjectDoc;
        try {
          // Conditional on the version read, so a concurrent share is never overwritten.
          after = await mine.update(id, { shares: next }, versionOf(doc));
        } catch (err) {
          if (
            ifMatch === undefined &&
            err instanceof AppError &&
            err.code === 'version_conflict' &&
            attempt < SHARE_TRIES
          ) {
            await pause(attempt);
            continue;
          }
          throw err;
        }
        const kind = kindOf(after);
        await announce(accountId, 'project.shared', {
          projectId: id,
          kind,
          projectType: PROJECT_TYPE_OF_KIND[kind],
          email: req.email,
          role: req.role,
          previousRole: existing?.role ?? null,
          version: versionOf(after),
        });
        return view(after);
      }
    },
  };
}
