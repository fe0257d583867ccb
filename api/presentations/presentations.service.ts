import { emitEvent } from '../../platform/events';
import type { AccountFeatures } from '../../contracts/account';
import type { DeckJobInput, PresentationCreated, PresentationRequest } from '../../contracts/presentations';
import { toEnvelope } from '../../platform/jobs';
import type { JobDoc } from '../../platform/mongo';
import { createProjects, type ProjectDoc, presentationUrl } from '../../platform/projects';
import type { Runtime } from '../../platform/runtime';
import { assertFetchable } from '../../platform/ssrf';

export const DEFAULT_SLIDE_COUNT = 8;
export const DEFAULT_VISUAL_STYLE = 'illustration';

/**
 * POST /presentations (SPEC 2.5, 2.6, 3.3): create the presentation project and, when the account
 * builds decks in the background, a charged deck_ job; otherwise the deck waits for the editor
 * (`pending_editor_open`, job null, nothing charged). A private or unresolvable brandUrl is
 * refused here with 400 (the worker checks it again at fetch time).
 */
export function createPresentationsService(rt: Pick<Runtime, 'credits' | 'jobs' | 'db' | 'config' | 'amqp' | 'log'>) {
  const projects = createProjects(rt.db);
  const ssrf = { allowLoopback: rt.config.ALLOW_LOOPBACK_URLS };

  const present = (p: ProjectDoc, job: JobDoc | null): PresentationCreated => ({
    id: p._id,
    name: p.name,
    description: p.description,
    projectType: 'presentation',
    canvasMode: p.canvasMode,
    tags: p.tags,
    isStarred: p.isStarred,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
    generationStatus: p.presentation!.generationStatus,
    openUrl: presentationUrl(rt.config.PUBLIC_BASE_URL, p._id),
    job: job ? toEnvelope(job) : null,
  });

  return {
    async create(input: { accountId: string; features: AccountFeatures; requestId: string; request: PresentationRequest }): Promise<{ body: PresentationCreated; charged: number }> {
      const req = input.request;
      if (req.brandUrl) await assertFetchable(req.brandUrl, 'brandUrl', ssrf);
      const outline = req.outline?.length ? req.outline : null;
      const brief = req.brief?.trim() ? req.brief : null;
      const slideMode = req.slideMode ?? 'creator';
      const background = input.features.backgroundDecks;
      const now = new Date();
      const projectId = projects.newId();
      const project: ProjectDoc = {
        _id: projectId,
        accountId: input.accountId,
        name: req.name,
        description: req.description ?? '',
        projectType: 'presentation',
        canvasMode: slideMode,
        tags: req.tags ?? [],
        isStarred: false,
        createdAt: now,
        updatedAt: now,
        deletedAt: null,
        presentation: {
          brief,
          outline,
          slideCount: outline ? outline.length : (req.slideCount ?? DEFAULT_SLIDE_COUNT),
          slideMode,
          themeId: req.themeId ?? null,
          visualStyle: req.visualStyle?.trim() || DEFAULT_VISUAL_STYLE,
          brandUrl: req.brandUrl ?? null,
          companyName: req.companyName ?? null,
          generationStatus: background ? 'generating' : 'pending_editor_open',
          jobId: null, // set when the job is accepted
          build: null,
        },
      };

      // After the charge and the job, a failure to announce must not fail the request (a retry
      // would build a second deck): it is logged, and the outbox covers broker outages.
      const announce = () =>
        emitEvent(rt, input.accountId, 'project.created', { projectId, projectType: 'presentation', name: project.name, openUrl: presentationUrl(rt.config.PUBLIC_BASE_URL, projectId) }).catch((err) =>
          rt.log.error('project.created not recorded', { projectId, err: err as Error }),
        );

      if (!background) {
        await projects.insert(project);
        await announce();
        return { body: present(project, null), charged: 0 };
      }

      const s = project.presentation!;
      const jobInput: DeckJobInput = {
        projectId,
        name: project.name,
        description: project.description,
        brief: s.brief,
        outline: s.outline,
        slideCount: s.slideCount,
        slideMode: s.slideMode,
        themeId: s.themeId,
        visualStyle: s.visualStyle,
        brandUrl: s.brandUrl,
        companyName: s.companyName,
      };
      let stored = false;
      const { job, charged } = await rt.jobs
        .accept({
          accountId: input.accountId,
          requestId: input.requestId,
          type: 'deck',
          operation: 'deck',
          input: jobInput,
          // The project is stored after the debit (a short balance stores nothing) and before the job.
          before: async (id) => {
            project.presentation!.jobId = id;
            await projects.insert(project);
            stored = true;
          },
        })
        .catch(async (err) => {
          if (stored) await projects.deleteForAccount(input.accountId, projectId).catch(() => undefined);
          throw err;
        });
      await announce();
      return { body: present(project, job), charged };
    },
  };
}
