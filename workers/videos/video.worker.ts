import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { VideoPlan, type VideoResult } from '../../contracts/videos';
import type { Config } from '../../platform/infra/config';
import { AppError } from '../../platform/infra/errors';
import type { Runtime } from '../../platform/runtime';
import { fetchInput } from '../../platform/infra/ssrf';
import type { Rgb } from '../engines/images/procedural';
import { extractPoster, probeVideo, type FfmpegTools } from '../engines/videos/ffmpeg';
import { createLocalVideoEngine } from '../engines/videos/local.engine';
import { createRemoteVideoEngine } from '../engines/videos/remote.engine';
import type { VideoEngine } from '../engines/videos/video.engine';
import { referenceColour } from '../images/image.worker';
import { UnrecoverableError } from '../pool/errors';
import type { PoolDefinition } from '../pool/pool';

export const ffmpegTools = (config: Config): FfmpegTools => ({
  ffmpeg: config.FFMPEG_PATH,
  ffprobe: config.FFPROBE_PATH,
});

export function videoEngineFrom(config: Config): VideoEngine {
  return config.VIDEO_ENGINE === 'remote'
    ? createRemoteVideoEngine({
        baseUrl: config.VIDEO_PROVIDER_BASE_URL,
        apiKey: config.VIDEO_PROVIDER_API_KEY,
        model: config.VIDEO_PROVIDER_MODEL,
        pollMs: config.VIDEO_PROVIDER_POLL_MS,
      })
    : createLocalVideoEngine({ tools: ffmpegTools(config), scale: config.VIDEO_RENDER_SCALE });
}

/** A user URL refused at fetch time (SSRF guard, 404...) cannot succeed on a retry. */
const unrecoverable = (err: unknown) =>
  err instanceof AppError && err.status < 500 ? new UnrecoverableError(err.message) : err;

/**
 * The video pool: fetch references (through the SSRF guard), render with the configured engine,
 * read the real size and duration with ffprobe, cut a poster, store both in the blob store, and
 * complete with signed URLs. Progress: fetching_references → encoding (per ffmpeg frame counter,
 * or the provider's own status) → probing → storing.
 */
export function videoWorker(
  rt: Runtime,
  engine: VideoEngine = videoEngineFrom(rt.config),
): PoolDefinition<VideoPlan, VideoResult> {
  const config = rt.config;
  const tools = ffmpegTools(config);
  return {
    pool: 'video',
    input: VideoPlan,
    async process(plan, ctx) {
      const workDir = await mkdtemp(path.join(tmpdir(), 'svc-video-'));
      try {
        let openingFramePath: string | null = null;
        const subjectColours: Rgb[] = [];
        const refCount = (plan.openingFrameUrl ? 1 : 0) + plan.referenceImageUrls.length;
        if (refCount)
          await ctx.progress('fetching_references', `Fetching ${refCount} reference image${refCount === 1 ? '' : 's'}`);
        const loop = config.ALLOW_LOOPBACK_URLS;
        try {
          if (plan.openingFrameUrl) {
            const frame = await fetchInput(plan.openingFrameUrl, 'openingFrameUrl', {
              allowLoopback: loop,
              signal: ctx.signal,
              answerMs: config.INPUT_FETCH_TIMEOUT_MS,
              totalMs: 15_000,
              maxBytes: config.REFERENCE_IMAGE_MAX_BYTES,
            });
            openingFramePath = path.join(workDir, 'opening-frame');
            await writeFile(openingFramePath, frame);
          }
          for (const [i, url] of plan.referenceImageUrls.entries()) {
            subjectColours.push((await referenceColour(config, url, `referenceImageUrls.${i}`, ctx.signal)).colour);
          }
        } catch (err) {
          throw unrecoverable(err);
        }

        await ctx.progress(
          'rendering',
          `Rendering ${plan.clipSeconds} s at ${plan.width}x${plan.height} on ${plan.tier}`,
        );
        const out = await engine.render(
          { plan, openingFramePath, subjectColours },
          { signal: ctx.signal, workDir, progress: (raw, msg) => ctx.progress(raw, msg) },
        );

        await ctx.progress('probing', 'Reading the rendered file');
        let facts: Awaited<ReturnType<typeof probeVideo>>;
        const posterFile = path.join(workDir, 'poster.png');
        try {
          facts = await probeVideo(tools, out.file);
          await extractPoster(tools, out.file, posterFile, ctx.signal);
        } catch (err) {
          if (ctx.signal.aborted) throw err; // stopping, not a broken file: the job is handed back
          throw new UnrecoverableError(`the rendered file is not a readable video: ${(err as Error).message}`);
        }

        await ctx.progress('storing', 'Saving the video and its poster');
        const video = await rt.blobs.putStream(createReadStream(out.file), {
          contentType: 'video/mp4',
          filename: 'video.mp4',
          accountId: ctx.job.accountId,
        });
        const poster = await rt.blobs.put(await readFile(posterFile), {
          contentType: 'image/png',
          filename: 'poster.png',
          accountId: ctx.job.accountId,
        });
        return {
          videoUrl: rt.blobs.url(video.id, 'video.mp4'),
          posterUrl: rt.blobs.url(poster.id, 'poster.png'),
          mimeType: 'video/mp4',
          width: facts.width,
          height: facts.height,
          durationSeconds: facts.durationSeconds,
          fps: facts.fps,
          sizeBytes: (await stat(out.file)).size,
          tier: plan.tier,
          aspectRatio: plan.aspectRatio,
          resolution: plan.resolution,
          clipSeconds: plan.clipSeconds,
          engine: engine.name,
          openingFrameUsed: openingFramePath !== null,
          referenceImagesUsed: refCount,
          notes: [...plan.notes, ...out.notes],
        } satisfies VideoResult;
      } finally {
        await rm(workDir, { recursive: true, force: true });
      }
    },
    eventExtras: (r) => ({ videoUrl: r.videoUrl, posterUrl: r.posterUrl }),
  };
}
