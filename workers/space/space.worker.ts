import { SpacePlan, type SpaceResult } from '../../contracts/spaces';
import { AppError } from '../../platform/errors';
import type { Runtime } from '../../platform/runtime';
import { guardedFetch, readLimited } from '../../platform/ssrf';
import { createPhotoSpaceEngine } from '../engines/space/photo.engine';
import type { SpaceEngine } from '../engines/space/space.engine';
import { UnrecoverableError } from '../pool/errors';
import type { PoolDefinition } from '../pool/pool';

/** A user URL refused at fetch time (SSRF guard, 404, too large) cannot succeed on a retry. */
const unrecoverable = (err: unknown) => (err instanceof AppError && err.status < 500 ? new UnrecoverableError(err.message) : err);

/**
 * The space pool: fetch the photo through the SSRF guard (at most SPACE_PHOTO_MAX_BYTES), build
 * with the engine (the one-photo engine here; the room engine slots in behind the same
 * SpaceEngine interface), publish the stage-preview result while processing, complete at stage
 * space (or preview for quality preview). A failure fails the job and the job system refunds it.
 */
export function spaceWorker(rt: Runtime, engine: SpaceEngine = createPhotoSpaceEngine({ defaultFovDeg: rt.config.SPACE_DEFAULT_FOV_DEG, cameraHeightM: rt.config.SPACE_CAMERA_HEIGHT_M })): PoolDefinition<SpacePlan, SpaceResult> {
  const config = rt.config;
  return {
    pool: 'space',
    input: SpacePlan,
    async process(plan, ctx) {
      await ctx.progress('fetching', 'Fetching the photo');
      let photo: Buffer;
      try {
        const res = await guardedFetch(plan.imageUrl, 'imageUrl', { signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(30_000)]) }, { allowLoopback: config.ALLOW_LOOPBACK_URLS });
        if (!res.ok) throw new AppError('validation_error', `imageUrl could not be fetched (HTTP ${res.status})`);
        photo = await readLimited(res, config.SPACE_PHOTO_MAX_BYTES, 'imageUrl');
      } catch (err) {
        throw unrecoverable(err);
      }
      const accountId = ctx.job.accountId;
      return engine.build(
        { plan, photos: [photo] },
        {
          signal: ctx.signal,
          progress: (raw, msg) => ctx.progress(raw, msg),
          store: async (bytes, contentType, filename) => rt.blobs.url((await rt.blobs.put(bytes, { contentType, filename, accountId })).id, filename),
          publishPreview: (result) => ctx.progress('preview_ready', 'Panorama, depth and dimensions are ready; building the walkable space', result),
        },
      );
    },
    eventExtras: (r) => ({ stage: r.stage, panoramaUrl: r.panoramaUrl, spaceUrl: r.spaceUrl, depthUrl: r.depthUrl, posterUrl: r.posterUrl }),
  };
}
