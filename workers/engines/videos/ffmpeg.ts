import { spawn } from 'node:child_process';

/**
 * Thin wrappers over the ffmpeg and ffprobe binaries (Debian package `ffmpeg`; scripts/services.sh
 * installs it when missing). Arguments are passed as an array, never through a shell.
 */
export interface FfmpegTools {
  ffmpeg: string;
  ffprobe: string;
}

/**
 * Run ffmpeg with `-progress pipe:1`; `onFrame` receives the frame count as it encodes.
 * Rejects with the tail of stderr on a non-zero exit; kills ffmpeg when `signal` aborts.
 */
export function runFfmpeg(
  tools: FfmpegTools,
  args: string[],
  opts: { signal?: AbortSignal; onFrame?: (frame: number) => void } = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
    const child = spawn(
      tools.ffmpeg,
      ['-hide_banner', '-nostdin', '-loglevel', 'error', '-nostats', '-progress', 'pipe:1', ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    let buf = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        const m = /^frame=(\d+)$/.exec(line);
        if (m) opts.onFrame?.(Number(m[1]));
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => {
      stderr = (stderr + d).slice(-2000);
    });
    const onAbort = () => child.kill('SIGKILL');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (err) => {
      opts.signal?.removeEventListener('abort', onAbort);
      reject(new Error(`could not run ${tools.ffmpeg}: ${err.message}`));
    });
    child.on('close', (code) => {
      opts.signal?.removeEventListener('abort', onAbort);
      if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
      if (code === 0) resolve();
      else reject(new Error(`ffmpeg exited with ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`));
    });
  });
}

export interface ProbeResult {
  width: number;
  height: number;
  durationSeconds: number;
  fps: number;
  codec: string;
}

/** Longest an ffprobe run may take unless the caller says otherwise. */
const PROBE_TIMEOUT_MS = 30_000;

/**
 * The real facts of a video file, read by ffprobe. Input options (`-protocol_whitelist file`,
 * `-format_whitelist ...`, say) go before the file. ffprobe is killed when `signal` aborts or
 * after `timeoutMs`.
 */
export function probeVideo(
  tools: FfmpegTools,
  file: string,
  opts: { signal?: AbortSignal; timeoutMs?: number; inputOptions?: string[] } = {},
): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
    const child = spawn(
      tools.ffprobe,
      [
        '-v',
        'error',
        '-select_streams',
        'v:0',
        '-show_entries',
        'stream=width,height,r_frame_rate,codec_name:format=duration',
        '-of',
        'json',
        ...(opts.inputOptions ?? []),
        file,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    let timedOut = false;
    const onAbort = () => child.kill('SIGKILL');
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, opts.timeoutMs ?? PROBE_TIMEOUT_MS);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err = (err + d).slice(-2000)));
    child.on('error', (e) => {
      cleanup();
      reject(new Error(`could not run ${tools.ffprobe}: ${e.message}`));
    });
    child.on('close', (code) => {
      cleanup();
      if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error('aborted'));
      if (timedOut) return reject(new Error(`ffprobe did not finish within ${opts.timeoutMs ?? PROBE_TIMEOUT_MS} ms`));
      if (code !== 0) return reject(new Error(`ffprobe exited with ${code}: ${err.trim().slice(-300)}`));
      try {
        const j = JSON.parse(out) as {
          streams?: { width: number; height: number; r_frame_rate: string; codec_name: string }[];
          format?: { duration?: string };
        };
        const s = j.streams?.[0];
        if (!s) throw new Error('no video stream');
        const [n, d] = s.r_frame_rate.split('/').map(Number) as [number, number];
        resolve({
          width: s.width,
          height: s.height,
          durationSeconds: Math.round(Number(j.format?.duration ?? 0) * 1000) / 1000,
          fps: d ? Math.round((n / d) * 1000) / 1000 : n,
          codec: s.codec_name,
        });
      } catch (e) {
        reject(new Error(`ffprobe output unreadable: ${(e as Error).message}`));
      }
    });
  });
}

/** Write the first frame of `video` as a PNG poster. */
export const extractPoster = (tools: FfmpegTools, video: string, png: string, signal?: AbortSignal) =>
  runFfmpeg(tools, ['-y', '-i', video, '-frames:v', '1', '-f', 'image2', '-c:v', 'png', png], { signal });
