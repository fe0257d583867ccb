import { emitEvent } from '../events/events';
import type { AccountFeatures } from '../../contracts/account';
import type { DeckJobInput, PresentationCreated, PresentationRequest } from '../../contracts/presentations';
import { JOB_ID_PREFIX } from '../../contracts/registry';
import { toEnvelope } from '../jobs/jobs';
import type { JobDoc } from '../infra/mongo';
import { createProjects, type ProjectDoc } from '../projects/projects.repository';
import { openUrlOf } from '../../contracts/projects';
import type { Runtime } from '../runtime';
import { assertFetchable } from '../infra/ssrf';

export const DEFAULT_SLIDE_COUNT = 8;
export const DEFAULT_VISUAL_STYLE = 'illustration';

/**
 * POST /presentations (SPEC 2.5, 2.6, 3.3): create the presentation project and, when the account
 * builds decks in the background, a charged deck_ job; otherwise the deck waits for the editor
 * (`pending_editor_open`, job null, nothing charged). A private or unresolvable brandUrl is
 * refused here with 400 (the worker checks it again at fetch time).
 */
export function createPresentationsService(
  rt: Pick<Runtime, 'credits' | 'jobs' | 'store' | 'config' | 'amqp' | 'log'>,
) {
  const projects = createProjects(rt.store);
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
    openUrl: openUrlOf(rt.config.PUBLIC_BASE_URL, 'presentation', p._id),
    job: job ? toEnvelope(job) : null,
  });

  return {
    async create(input: {
      accountId: string;
      features: AccountFeatures;
      requestId: string;
      request: PresentationRequest;
      idFor?: (prefix: string) => string;
    }): Promise<{ body: PresentationCreated; charged: number }> {
      const req = input.request;
      if (req.brandUrl) await assertFetchable(req.brandUrl, 'brandUrl', ssrf);
      const outline = req.outline?.length ? req.outline : null;
      const brief = req.brief?.trim() ? req.brief : null;
      const slideMode = req.slideMode ?? 'creator';
      const background = input.features.backgroundDecks;
      const now = new Date();
      const projectId = input.idFor ? input.idFor('prj') : projects.newId();
      const mine = projects.forAccount(input.accountId);
      const project: ProjectDoc = {
        _id: projectId,
        accountId: input.accountId,
        name: req.name,
        description: req.description ?? '',
        kind: 'presentation',
        projectType: 'presentation',
        version: 1,
        content: null,
        shares: [],
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
        emitEvent(rt, input.accountId, 'project.created', {
          projectId,
          kind: 'presentation',
          projectType: 'presentation',
          name: project.name,
          openUrl: openUrlOf(rt.config.PUBLIC_BASE_URL, 'presentation', projectId),
        }).catch((err) => rt.log.error('project.created not recorded', { projectId, err: err as Error }));

      if (!background) {
        try {
          await mine.insert(project);
        } catch (err) {
          // A retry (same Idempotency-Key) of a request that stored it before a crash.
          const existing = (err as { code?: number }).code === 11000 ? await mine.get(projectId) : null;
          if (!existing) throw err;
          return { body: present(existing, null), charged: 0 };
        }
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
      let stored = project;
      const { job, charged, retried } = await rt.jobs.accept({
        accountId: input.accountId,
        requestId: input.requestId,
        type: 'deck',
        operation: 'deck',
        input: jobInput,
        jobId: input.idFor?.(JOB_ID_PREFIX.deck),
        // The project is stored before the job; a retry after a crash finds the one it stored.
        before: async (id) => {
          project.presentation!.jobId = id;
          try {
            await mine.insert(project);
          } catch (err) {
            if ((err as { code?: number }).code !== 11000) throw err;
            const existing = await mine.get(projectId);
            if (!existing) throw err;
            stored = existing;
          }
        },
        // Refused (a short balance): nothing stays.
        undo: () => mine.discard(projectId),
      });
      if (!retried) await announce();
      return { body: present(stored, job), charged };
    },
  };
}
