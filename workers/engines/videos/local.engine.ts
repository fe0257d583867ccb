import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { encodePng } from '../../../platform/media/codec';
import { UnrecoverableError } from '../../pool/errors';
import { colourWordsIn, paint, paletteFor, prng, seedBytes, type Rgb } from '../images/procedural';
import { runFfmpeg, type FfmpegTools } from './ffmpeg';
import type { VideoEngine, VideoRenderOutput } from './video.engine';

const hex = (c: Rgb) => `0x${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
const even = (n: number) => Math.max(16, Math.round(n / 2) * 2);

/**
 * local-ffmpeg-v1: renders a real H.264 MP4 offline with ffmpeg, deterministic for a prompt.
 * - With an opening frame: image-to-video, a slow pan across the frame (scaled to cover) that
 *   fades in from black.
 * - Without: text-to-video, a keyframe painted from the prompt by the image painter (palette from
 *   colour words, then subject references' colours; seeded by the plan), panned, with moving light
 *   from ffmpeg's animated `gradients` source blended over it (soft light).
 * `scale` (config VIDEO_RENDER_SCALE, tests and demos) shrinks frame size and clip length; a note
 * says so and the worker reports the real size and duration of the file (ffprobe).
 * Progress comes from ffmpeg's own `-progress` frame counter.
 */
export function createLocalVideoEngine(opts: { tools: FfmpegTools; scale: number }): VideoEngine {
  return {
    name: 'local-ffmpeg-v1',
    async render({ plan, openingFramePath, subjectColours }, ctx): Promise<VideoRenderOutput> {
      const notes: string[] = [];
      const w = even(plan.width * opts.scale);
      const h = even(plan.height * opts.scale);
      const seconds = Math.max(1, Math.round(plan.clipSeconds * opts.scale * 10) / 10);
      const frames = Math.round(seconds * plan.fps);
      if (opts.scale !== 1)
        notes.push(
          `Rendered at scale ${opts.scale} (VIDEO_RENDER_SCALE): ${w}x${h} for ${seconds} s instead of ${plan.width}x${plan.height} for ${plan.clipSeconds} s.`,
        );
      const out = path.join(ctx.workDir, 'video.mp4');
      const encode = [
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-crf',
        '23',
        '-pix_fmt',
        'yuv420p',
        '-r',
        String(plan.fps),
        '-frames:v',
        String(frames),
        '-threads',
        '1',
        '-movflags',
        '+faststart',
        '-map_metadata',
        '-1',
        '-fflags',
        '+bitexact',
        '-flags:v',
        '+bitexact',
        '-an',
        '-y',
        out,
      ];
      const pan = `crop=${w}:${h}:x='(in_w-out_w)*t/${seconds}':y='(in_h-out_h)/2'`;
      const fade = `fade=t=in:st=0:d=${Math.min(0.5, seconds / 4)}`;
      let input: string[];
      let graph: string;
      if (openingFramePath) {
        // Image-to-video: a slow pan across the opening frame (scaled to cover), fading in.
        input = ['-loop', '1', '-framerate', String(plan.fps), '-t', String(seconds), '-i', openingFramePath];
        graph = `[0:v]scale=${even(w * 1.2)}:${even(h * 1.2)}:force_original_aspect_ratio=increase,${pan},${fade},format=yuv420p[v]`;
      } else {
        // Text-to-video: a keyframe painted from the prompt (the image painter, seeded by the
        // plan), panned, with moving light from ffmpeg's gradients source in the same palette.
        const seed = seedBytes('local-ffmpeg-v1', plan.prompt, plan.seed);
        const named = [...colourWordsIn(plan.prompt), ...subjectColours];
        const palette = paletteFor(named, prng(seed), plan.prompt);
        await ctx.progress('painting', `Painting the keyframe at ${even(w * 1.2)}x${even(h * 1.2)}`);
        const kw = even(w * 1.2);
        const kh = even(h * 1.2);
        const pixels = await paint({
          width: kw,
          height: kh,
          seed,
          palette,
          steps: 6,
          cfg: 1,
          warp: 0.35,
          glows: 3,
          vignette: true,
          onStep: async () => {
            ctx.signal.throwIfAborted();
            await yieldToLoop();
          },
        });
        const keyframe = path.join(ctx.workDir, 'keyframe.png');
        await writeFile(
          keyframe,
          await encodePng({
            width: kw,
            height: kh,
            channels: 3,
            data: Buffer.from(pixels.buffer, pixels.byteOffset, pixels.byteLength),
          }),
        );
        const light = palette.slice(0, 8);
        while (light.length < 2) light.push([255, 255, 255]);
        const colours = light.map((c, i) => `c${i}=${hex(c)}`).join(':');
        input = [
          '-loop',
          '1',
          '-framerate',
          String(plan.fps),
          '-t',
          String(seconds),
          '-i',
          keyframe,
          '-f',
          'lavfi',
          '-i',
          `gradients=s=${w}x${h}:r=${plan.fps}:d=${seconds}:seed=${seed.readUInt32LE(0) % 2147483647}:speed=0.03:n=${light.length}:${colours}`,
        ];
        graph = `[0:v]${pan},format=yuv420p[bg];[1:v]format=yuv420p[fx];[bg][fx]blend=all_mode=softlight:all_opacity=0.45,${fade}[v]`;
      }
      await ctx.progress('encoding', `Encoding ${frames} frames at ${w}x${h}`);
      let reported = 0;
      let pending: Promise<void> = Promise.resolve();
      try {
        await runFfmpeg(
          opts.tools,
          ['-stats_period', '0.2', ...input, '-filter_complex', graph, '-map', '[v]', ...encode],
          {
            signal: ctx.signal,
            onFrame: (frame) => {
              const pct = Math.min(99, Math.floor((frame / frames) * 100));
              // One progress write per quarter keeps the job document moving without flooding it.
              if (pct >= reported + 25) {
                reported = pct - (pct % 25);
                pending = pending
                  .then(() => ctx.progress('encoding', `Encoding frames: ${pct}% (${frame}/${frames})`))
                  .catch(() => {});
              }
            },
          },
        );
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        throw new UnrecoverableError(`local video render failed: ${(err as Error).message}`);
      }
      await pending;
      return { file: out, notes };
    },
  };
}
