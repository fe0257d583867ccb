import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { probeVideo } from '../../workers/engines/videos/ffmpeg';
import { UnrecoverableError } from '../../workers/pool/errors';
import { sampleVideoFrames } from '../../workers/spaces/video-frames';

const run = promisify(execFile);
const TOOLS = { ffmpeg: 'ffmpeg', ffprobe: 'ffprobe' };

const rejection = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
};

describe("spaces: reading a user's video (ffprobe and ffmpeg limits)", function () {
  this.timeout(30_000);
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(path.join(tmpdir(), 'space-frames-test-'))));
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const testVideo = async (name: string, extra: string[] = []) => {
    const file = path.join(dir, name);
    await run('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=64x48:rate=5',
      '-t',
      '1',
      ...extra,
      '-y',
      file,
    ]);
    return file;
  };

  it('when the video is an MP4, then frames are sampled from it', async () => {
    const file = await testVideo('in.mp4', ['-pix_fmt', 'yuv420p']);
    const out = await sampleVideoFrames(TOOLS, file, dir, {
      maxSeconds: 10,
      count: 3,
      signal: new AbortController().signal,
    });
    expect(out.frames).to.have.length(3);
    expect(out.durationSeconds).to.equal(1);
  });

  it('when the video is in a container other than MP4/MOV/Matroska/WebM (AVI, an HLS playlist), then it is refused as not a readable video', async () => {
    for (const [name, extra] of [
      ['in.avi', []],
      ['in.m3u8', ['-f', 'hls']],
    ] as const) {
      const file = await testVideo(name, [...extra]);
      const err = await rejection(
        sampleVideoFrames(TOOLS, file, dir, { maxSeconds: 10, count: 3, signal: new AbortController().signal }),
      );
      expect(err, name).to.be.instanceOf(UnrecoverableError);
      expect(err.message).to.match(/videoUrl: the file is not a readable video/);
    }
  });

  it('when a video input refers to a URL (a concat list naming http), then ffprobe refuses to open it (only local files)', async () => {
    // A concat list naming an http URL: with -protocol_whitelist file it cannot be opened even if the demuxer were allowed.
    const list = path.join(dir, 'list.txt');
    await writeFile(list, "file 'http://127.0.0.1:9/x.mp4'\n");
    const err = await rejection(
      probeVideo(TOOLS, list, { inputOptions: ['-protocol_whitelist', 'file', '-f', 'concat', '-safe', '0'] }),
    );
    expect(err.message).to.match(/Protocol 'http' not on whitelist/);
  });

  it('when ffprobe blocks on its input, then aborting the job or the probe time limit stops it', async () => {
    const fifo = path.join(dir, 'never.mp4');
    await run('mkfifo', [fifo]); // a reader of a FIFO nobody writes to waits forever
    const ac = new AbortController();
    const aborted = probeVideo(TOOLS, fifo, { signal: ac.signal });
    setImmediate(() => ac.abort(new Error('lease lost')));
    expect((await rejection(aborted)).message).to.equal('lease lost');
    expect((await rejection(probeVideo(TOOLS, fifo, { timeoutMs: 200 }))).message).to.match(
      /ffprobe did not finish within 200 ms/,
    );
  });
});
