import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { probeVideo, runFfmpeg, type FfmpegTools } from '../engines/videos/ffmpeg';
import { UnrecoverableError } from '../pool/errors';

/** Widest frame the room engine reads (it works on 640 px copies). */
const FRAME_WIDTH = 640;
/** How long reading a user's video may take: ffprobe, then the frame sampling. */
const PROBE_TIMEOUT_MS = 30_000;
const SAMPLE_TIMEOUT_MS = 120_000;

/**
 * Input options for a user's video: only the local file protocol (a crafted playlist or
 * reference movie cannot make ffmpeg open URLs or other files) and only the MP4/MOV and
 * Matroska/WebM demuxers (no guessing among ffmpeg's hundreds of formats).
 */
export const USER_VIDEO_INPUT = [
  '-protocol_whitelist',
  'file',
  '-format_whitelist',
  'mov,mp4,m4a,3gp,3g2,mj2,matroska,webm',
];

/**
 * Check a fetched video with ffprobe (readable, at most `maxSeconds`) and sample `count` frames
 * evenly over its length with ffmpeg's fps filter (rate = count / duration, so frame k is taken
 * near (k + ½) · duration / count), scaled to at most 640 px wide, as PNGs in time order. Both
 * read the file with USER_VIDEO_INPUT, stop when `signal` aborts, and are killed past their time.
 */
export async function sampleVideoFrames(
  tools: FfmpegTools,
  file: string,
  dir: string,
  opts: { maxSeconds: number; count: number; signal: AbortSignal },
): Promise<{ frames: Buffer[]; durationSeconds: number }> {
  let durationSeconds: number;
  try {
    durationSeconds = (
      await probeVideo(tools, file, {
        signal: opts.signal,
        timeoutMs: PROBE_TIMEOUT_MS,
        inputOptions: USER_VIDEO_INPUT,
      })
    ).durationSeconds;
  } catch (err) {
    if (opts.signal.aborted) throw err;
    throw new UnrecoverableError('videoUrl: the file is not a readable video (MP4, MOV or WebM)');
  }
  if (!(durationSeconds > 0))
    throw new UnrecoverableError('videoUrl: the video has no duration (not a readable video)');
  if (durationSeconds > opts.maxSeconds)
    throw new UnrecoverableError(
      `videoUrl: the video is ${durationSeconds.toFixed(1)} s long; at most ${opts.maxSeconds} s is accepted`,
    );
  const rate = (opts.count / durationSeconds).toFixed(6);
  const sampling = AbortSignal.any([opts.signal, AbortSignal.timeout(SAMPLE_TIMEOUT_MS)]);
  try {
    await runFfmpeg(
      tools,
      [
        '-y',
        ...USER_VIDEO_INPUT,
        '-i',
        file,
        '-an',
        '-vf',
        `fps=${rate},scale='min(${FRAME_WIDTH},iw)':-2`,
        '-frames:v',
        String(opts.count),
        '-f',
        'image2',
        '-c:v',
        'png',
        path.join(dir, 'frame-%03d.png'),
      ],
      { signal: sampling },
    );
  } catch (err) {
    if (opts.signal.aborted) throw err;
    if (sampling.aborted)
      throw new UnrecoverableError(
        `videoUrl: frames could not be read from the video within ${SAMPLE_TIMEOUT_MS / 1000} s`,
      );
    throw new UnrecoverableError('videoUrl: frames could not be read from the video');
  }
  const names = (await readdir(dir)).filter((n) => n.startsWith('frame-')).sort();
  if (names.length === 0) throw new UnrecoverableError('videoUrl: no frames could be read from the video');
  return { frames: await Promise.all(names.map((n) => readFile(path.join(dir, n)))), durationSeconds };
}
