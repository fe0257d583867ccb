import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** ffprobe the bytes: real width, height, duration, codec. */
export async function probeBytes(
  bytes: Buffer,
): Promise<{ width: number; height: number; duration: number; codec: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'probe-'));
  try {
    const f = path.join(dir, 'v.mp4');
    await writeFile(f, bytes);
    const { stdout } = await run('ffprobe', [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=width,height,codec_name:format=duration',
      '-of',
      'json',
      f,
    ]);
    const j = JSON.parse(stdout);
    return {
      width: j.streams[0].width,
      height: j.streams[0].height,
      codec: j.streams[0].codec_name,
      duration: Number(j.format.duration),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A small real MP4 made by ffmpeg (what a fake provider serves). */
export async function makeMp4(width: number, height: number, seconds: number): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mk-'));
  try {
    const f = path.join(dir, 'v.mp4');
    await run('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      `testsrc2=s=${width}x${height}:r=24:d=${seconds}`,
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-pix_fmt',
      'yuv420p',
      '-y',
      f,
    ]);
    return await readFile(f);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A promise with its resolver outside: a gate a fake server waits on. */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}
