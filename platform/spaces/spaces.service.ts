import type { SpacePlan, SpaceRequest } from '../../contracts/spaces';
import type { AuthAccount } from '../accounts/accounts';
import { AppError } from '../infra/errors';
import { toEnvelope } from '../jobs/jobs';
import type { Runtime } from '../runtime';
import { assertFetchable } from '../infra/ssrf';

/**
 * POST /real-world/spaces: rooms (imageUrls, videoUrl) need the room engine; a deployment
 * configured with SPACE_ROOM_ENGINE=none (or remote without SPACE_PROVIDER_BASE_URL) refuses
 * them with 503 before anything is charged
 * (SPEC 7). Every URL is checked against the SSRF guard (the worker checks again when it
 * fetches), then the job is charged once (space_full or space_preview) and queued.
 */
export function createSpacesService(rt: Pick<Runtime, 'jobs' | 'config'>) {
  return {
    async dispatch(input: { account: AuthAccount; requestId: string; jobId?: string; request: SpaceRequest }) {
      const { request } = input;
      const ssrf = { allowLoopback: rt.config.ALLOW_LOOPBACK_URLS };
      const quality = request.quality ?? 'full';
      const title = request.title ?? null;
      let plan: SpacePlan;
      if (request.imageUrls !== undefined || request.videoUrl !== undefined) {
        // remote without a provider URL has no room engine either: refuse before the charge, not in the job.
        if (
          rt.config.SPACE_ROOM_ENGINE === 'none' ||
          (rt.config.SPACE_ROOM_ENGINE === 'remote' && !rt.config.SPACE_PROVIDER_BASE_URL)
        ) {
          const field = request.imageUrls !== undefined ? 'imageUrls' : 'videoUrl';
          throw new AppError(
            'room_engine_unavailable',
            `${field}: rooms from several photos or a video need the room engine, which this deployment does not have; send one imageUrl for a one-photo space (nothing was charged)`,
          );
        }
        if (request.imageUrls !== undefined) {
          for (const [i, u] of request.imageUrls.entries()) await assertFetchable(u, `imageUrls[${i}]`, ssrf);
          plan = { source: 'photos', imageUrls: request.imageUrls, quality, title };
        } else {
          await assertFetchable(request.videoUrl!, 'videoUrl', ssrf);
          plan = { source: 'video', videoUrl: request.videoUrl!, quality, title };
        }
      } else {
        await assertFetchable(request.imageUrl!, 'imageUrl', ssrf);
        plan = { source: 'photo', imageUrl: request.imageUrl!, quality, title };
      }
      const { job, charged } = await rt.jobs.accept({
        accountId: input.account._id,
        requestId: input.requestId,
        jobId: input.jobId,
        type: 'space',
        operation: quality === 'full' ? 'space_full' : 'space_preview',
        input: plan,
      });
      return { envelope: { ...toEnvelope(job), source: plan.source, imagined: true as const }, charged };
    },
  };
}
