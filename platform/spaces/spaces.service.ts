import type { SpacePlan, SpaceRequest } from '../../contracts/spaces';
import type { AuthAccount } from '../accounts';
import { AppError } from '../errors';
import { toEnvelope } from '../jobs';
import type { Runtime } from '../runtime';
import { assertFetchable } from '../ssrf';

/**
 * POST /real-world/spaces: rooms (imageUrls, videoUrl) need a room engine this deployment may not
 * have, so they are refused with 503 before anything is charged (SPEC 7). A single imageUrl is
 * checked against the SSRF guard, charged once (space_full or space_preview) and queued.
 */
export function createSpacesService(rt: Pick<Runtime, 'jobs' | 'config'>) {
  return {
    async dispatch(input: { account: AuthAccount; requestId: string; jobId?: string; request: SpaceRequest }) {
      const { request } = input;
      if (request.imageUrls !== undefined || request.videoUrl !== undefined) {
        if (rt.config.SPACE_ROOM_ENGINE === 'none') {
          const field = request.imageUrls !== undefined ? 'imageUrls' : 'videoUrl';
          throw new AppError('room_engine_unavailable', `${field}: rooms from several photos or a video need the room engine, which this deployment does not have; send one imageUrl for a one-photo space (nothing was charged)`);
        }
      }
      const imageUrl = request.imageUrl!;
      await assertFetchable(imageUrl, 'imageUrl', { allowLoopback: rt.config.ALLOW_LOOPBACK_URLS });
      const quality = request.quality ?? 'full';
      const plan: SpacePlan = { source: 'photo', imageUrl, quality, title: request.title ?? null };
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
