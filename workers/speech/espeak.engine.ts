import { spawn } from 'node:child_process';
import { SPEECH_AUDIO } from '../../contracts/speech';
import { AppError } from '../../platform/infra/errors';
import { ESPEAK_ENGINE_NAME } from '../../platform/speech/voices';
import { PcmResampler, WavStreamReader } from './pcm';
import type { SpeechEngine } from './speech.engine';

/**
 * espeak-ng-local: the espeak-ng binary (Debian package espeak-ng, installed by
 * scripts/services.sh) run once per call as a child process, text on stdin (never a shell, never
 * an argument: a text starting with "-" stays text), WAV on stdout. espeak-ng writes 22.05 kHz
 * as it synthesises; each piece is resampled to 24 kHz mono in this process (pcm.ts) and yielded
 * at once, so the first audio leaves before synthesis ends. In-process resampling instead of an
 * ffmpeg pipe: ffmpeg's start-up alone cost 65 ms of time to first byte per call, more than
 * espeak-ng takes to speak a whole sentence (measured, README "Speech").
 */
export function createEspeakEngine(opts: { bin: string }): SpeechEngine {
  return {
    name: ESPEAK_ENGINE_NAME,
    async *synthesize(input, ctx) {
      ctx.signal.throwIfAborted();
      // -b 1: the text is UTF-8. No -m: markup in the text is read out, not interpreted.
      const child = spawn(opts.bin, ['-v', input.voice, '--stdout', '-b', '1'], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (d: string) => (stderr = (stderr + d).slice(-500)));
      const exited = new Promise<number | null>((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (code) => resolve(code));
      });
      exited.catch(() => {}); // observed below; no unhandled rejection meanwhile
      const kill = () => child.kill('SIGKILL');
      ctx.signal.addEventListener('abort', kill, { once: true });
      child.stdin.on('error', () => {}); // a child that died early: its exit says why
      child.stdin.end(input.text);
      const wav = new WavStreamReader();
      let resampler: PcmResampler | undefined;
      try {
        for await (const chunk of child.stdout as AsyncIterable<Buffer>) {
          const pcm = wav.push(chunk);
          if (!pcm.length) continue;
          resampler ??= new PcmResampler(wav.format!, SPEECH_AUDIO.sampleRate);
          const out = resampler.push(pcm);
          if (out.length) yield out;
        }
        let code: number | null;
        try {
          code = await exited;
        } catch (err) {
          const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
          throw new AppError(
            'service_unavailable',
            missing
              ? `the speech engine is not installed on this worker (${opts.bin}; Debian package espeak-ng)`
              : `the speech engine could not start: ${(err as Error).message}`,
          );
        }
        ctx.signal.throwIfAborted();
        if (code !== 0)
          throw new AppError(
            'service_unavailable',
            `the speech engine failed (exit ${code}): ${stderr.trim().split('\n').slice(-1)[0] ?? ''}`.trim(),
          );
        if (resampler) {
          const tail = resampler.end();
          if (tail.length) yield tail;
        }
      } finally {
        ctx.signal.removeEventListener('abort', kill);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
    },
  };
}
