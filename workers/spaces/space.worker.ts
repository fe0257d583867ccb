import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SpacePlan, type SpaceResult } from '../../contracts/spaces';
import type { Config } from '../../platform/infra/config';
import { AppError } from '../../platform/infra/errors';
import type { JobDoc } from '../../platform/infra/mongo';
import type { Runtime } from '../../platform/runtime';
import { fetchInput } from '../../platform/infra/ssrf';
import { createPhotoSpaceEngine } from '../engines/spaces/photo.engine';
import { createRemoteSpaceEngine } from '../engines/spaces/remote.engine';
import { createRoomSpaceEngine } from '../engines/spaces/room.engine';
import type { SpaceEngine } from '../engines/spaces/space.engine';
import { UnrecoverableError } from '../pool/errors';
import type { PoolDefinition } from '../pool/pool';
import { sampleVideoFrames } from './video-frames';

/** A user URL refused at fetch time (SSRF guard, 404, too large) cannot succeed on a retry. */
const unrecoverable = (err: unknown) =>
  err instanceof AppError && err.status < 500 ? new UnrecoverableError(err.message) : err;

/**
 * What a space job's attempts remember for the next one (SpaceEngineContext.remember): a field of
 * its own on the job document, so it survives a retry and never shows in the job's result.
 */
type ResumableJob = JobDoc & { spaceResume?: Record<string, string> };
const RESUME_KEY = /^[A-Za-z][A-Za-z0-9]{0,39}$/;

/** The engines of the pool: one photo, and rooms (photos or video) as SPACE_ROOM_ENGINE says. */
export interface SpaceEngines {
  photo: SpaceEngine;
  room: SpaceEngine | null;
}

/** The engines this configuration selects (none: no room engine). */
export function spaceEngines(config: Config): SpaceEngines {
  const estimate = { defaultFovDeg: config.SPACE_DEFAULT_FOV_DEG, cameraHeightM: config.SPACE_CAMERA_HEIGHT_M };
  const room =
    config.SPACE_ROOM_ENGINE === 'local'
      ? createRoomSpaceEngine(estimate)
      : config.SPACE_ROOM_ENGINE === 'remote'
        ? createRemoteSpaceEngine({
            baseUrl: config.SPACE_PROVIDER_BASE_URL,
            apiKey: config.SPACE_PROVIDER_API_KEY,
            pollMs: config.SPACE_PROVIDER_POLL_MS,
            timeoutMs: config.SPACE_PROVIDER_TIMEOUT_MS,
            maxBytes: config.SPACE_PROVIDER_MAX_BYTES,
            allowLoopback: config.ALLOW_LOOPBACK_URLS,
          })
        : null;
  return { photo: createPhotoSpaceEngine(estimate), room };
}

/**
 * The space pool: fetch every input through the SSRF guard with its limit (photos at most
 * SPACE_PHOTO_MAX_BYTES each; a video at most SPACE_VIDEO_MAX_BYTES and SPACE_VIDEO_MAX_SECONDS,
 * checked with ffprobe, then SPACE_VIDEO_FRAMES frames sampled with ffmpeg), build with the
 * one-photo engine or the room engine, publish the stage-preview result while processing,
 * complete at stage space (or preview). A failure fails the job and the job system refunds it.
 * The inputs are fetched and checked for the remote engine too, so the limits hold whatever
 * builds the room.
 */
export function spaceWorker(rt: Runtime, engines?: Partial<SpaceEngines>): PoolDefinition<SpacePlan, SpaceResult> {
  const config = rt.config;
  const chosen = { ...spaceEngines(config), ...engines };
  const ssrf = { allowLoopback: config.ALLOW_LOOPBACK_URLS };

  async function fetchPhoto(url: string, field: string, signal: AbortSignal): Promise<Buffer> {
    try {
      return await fetchInput(url, field, {
        ...ssrf,
        signal,
        answerMs: config.INPUT_FETCH_TIMEOUT_MS,
        totalMs: 30_000,
        maxBytes: config.SPACE_PHOTO_MAX_BYTES,
      });
    } catch (err) {
      throw unrecoverable(err);
    }
  }

  async function fetchVideoFrames(url: string, signal: AbortSignal): Promise<Buffer[]> {
    const dir = await mkdtemp(path.join(tmpdir(), 'space-video-'));
    try {
      const file = path.join(dir, 'input');
      try {
        await fetchInput(url, 'videoUrl', {
          ...ssrf,
          signal,
          answerMs: config.INPUT_FETCH_TIMEOUT_MS,
          totalMs: 120_000,
          maxBytes: config.SPACE_VIDEO_MAX_BYTES,
          file,
        });
      } catch (err) {
        throw unrecoverable(err);
      }
      const tools = { ffmpeg: config.FFMPEG_PATH, ffprobe: config.FFPROBE_PATH };
      return (
        await sampleVideoFrames(tools, file, dir, {
          maxSeconds: config.SPACE_VIDEO_MAX_SECONDS,
          count: config.SPACE_VIDEO_FRAMES,
          signal,
        })
      ).frames;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  return {
    pool: 'space',
    input: SpacePlan,
    async process(plan, ctx) {
      const engine = plan.source === 'photo' ? chosen.photo : chosen.room;
      if (!engine)
        throw new UnrecoverableError(
          'rooms from several photos or a video need the room engine, which this deployment no longer has (SPACE_ROOM_ENGINE=none)',
        );
      let photos: Buffer[];
      if (plan.source === 'video') {
        await ctx.progress('fetching', 'Fetching the video');
        photos = await fetchVideoFrames(plan.videoUrl!, ctx.signal);
      } else if (plan.source === 'photos') {
        await ctx.progress('fetching', 'Fetching the photos');
        photos = [];
        for (const [i, u] of plan.imageUrls!.entries()) photos.push(await fetchPhoto(u, `imageUrls[${i}]`, ctx.signal));
      } else {
        await ctx.progress('fetching', 'Fetching the photo');
        photos = [await fetchPhoto(plan.imageUrl!, 'imageUrl', ctx.signal)];
      }
      const accountId = ctx.job.accountId;
      return engine.build(
        { plan, photos },
        {
          jobId: ctx.job._id,
          signal: ctx.signal,
          progress: (raw, msg) => ctx.progress(raw, msg),
          store: async (bytes, contentType, filename) =>
            rt.blobs.url((await rt.blobs.put(bytes, { contentType, filename, accountId })).id, filename),
          publishPreview: (result) =>
            ctx.progress(
              'preview_ready',
              plan.source === 'photo'
                ? 'Panorama, depth and dimensions are ready; building the walkable space'
                : 'The quick walkable room is ready; building the full room',
              result,
            ),
          log: ctx.log,
          recall: (key) => (ctx.job as ResumableJob).spaceResume?.[key],
          remember: async (key, value) => {
            if (!RESUME_KEY.test(key)) throw new Error('a resume key is a short alphanumeric name');
            if (!(await rt.jobs.checkpoint(ctx.job._id, ctx.job.lease?.owner, { [`spaceResume.${key}`]: value })))
              throw new Error('the job is no longer held by this worker');
          },
        },
      );
    },
    eventExtras: (r) => ({
      stage: r.stage,
      panoramaUrl: r.panoramaUrl,
      spaceUrl: r.spaceUrl,
      spaceFullUrl: r.spaceFullUrl,
      colliderUrl: r.colliderUrl,
      depthUrl: r.depthUrl,
      posterUrl: r.posterUrl,
    }),
  };
}
