import { readLimited } from '../../../platform/infra/ssrf';
import { RetryLaterError, UnrecoverableError } from '../../pool/errors';
import type { SongEngine, SongPlan } from './song.engine';

/**
 * elevenlabs-music: ElevenLabs' Music API ("compose"): `POST {base}/v1/music?output_format=…`
 * with the `xi-api-key` header and `{ prompt, music_length_ms, model_id, force_instrumental }`;
 * the answer is the audio itself (MP3 by default). The plan's tempo, key, structure and lyrics
 * go into the prompt, and its length into music_length_ms (the API takes 10 s to 5 min), so the
 * remote song follows the request like the local one. The duration reported is measured from
 * the MP3 frames received. 429 and 5xx are transient (retried); other 4xx are not.
 * The provider URL is operator configuration, not user input, so it does not pass the SSRF guard.
 */
export interface ElevenLabsOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
}

const MP3_BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MP3_BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const MP3_RATES: Record<number, number[]> = {
  3: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  0: [11025, 12000, 8000],
};

/** Walk MPEG audio Layer III frames: sample rate and duration, or null when it is not MP3. */
export function mp3Info(buf: Buffer): { sampleRate: number; durationSeconds: number; frames: number } | null {
  let off = 0;
  if (buf.toString('latin1', 0, 3) === 'ID3' && buf.length >= 10) {
    off = 10 + (((buf[6]! & 0x7f) << 21) | ((buf[7]! & 0x7f) << 14) | ((buf[8]! & 0x7f) << 7) | (buf[9]! & 0x7f));
  }
  let frames = 0;
  let samples = 0;
  let sampleRate = 0;
  while (off + 4 <= buf.length) {
    if (buf[off] !== 0xff || (buf[off + 1]! & 0xe0) !== 0xe0) {
      if (frames > 0) break; // trailing data (e.g. ID3v1)
      off++;
      continue;
    }
    const version = (buf[off + 1]! >> 3) & 3; // 3 = MPEG1, 2 = MPEG2, 0 = MPEG2.5
    const layer = (buf[off + 1]! >> 1) & 3; // 1 = Layer III
    const brIdx = buf[off + 2]! >> 4;
    const srIdx = (buf[off + 2]! >> 2) & 3;
    const pad = (buf[off + 2]! >> 1) & 1;
    if (version === 1 || layer !== 1 || brIdx === 0 || brIdx === 15 || srIdx === 3) {
      if (frames > 0) break;
      off++;
      continue;
    }
    const kbps = (version === 3 ? MP3_BITRATES_V1 : MP3_BITRATES_V2)[brIdx]!;
    const sr = MP3_RATES[version]![srIdx]!;
    const len = Math.floor(((version === 3 ? 144 : 72) * kbps * 1000) / sr) + pad;
    if (len < 4) break;
    sampleRate = sr;
    samples += version === 3 ? 1152 : 576;
    frames++;
    off += len;
  }
  return frames ? { sampleRate, durationSeconds: samples / sampleRate, frames } : null;
}

export function songPrompt(plan: SongPlan): string {
  const parts = [
    `${plan.style}.`,
    `Tempo ${plan.tempoBpm} BPM, key of ${plan.key}, 4/4, ${plan.bars} bars.`,
    plan.instrumental ? 'Instrumental, no vocals.' : `Sung lyrics, in order:\n${plan.lines.join('\n')}`,
  ];
  if (plan.title) parts.unshift(`Song title: "${plan.title}".`);
  return parts.join('\n');
}

export function createElevenLabsSongEngine(opts: ElevenLabsOptions): SongEngine {
  return {
    name: `elevenlabs-music:${opts.model}`,
    async render(plan, ctx) {
      await ctx.progress(
        'requesting',
        `Asking the music provider for ${Math.round(plan.durationSeconds)} s at ${plan.tempoBpm} BPM in ${plan.key}`,
      );
      const lengthMs = Math.max(10_000, Math.min(300_000, Math.round(plan.durationSeconds * 1000)));
      let res: Response;
      try {
        res = await fetch(`${opts.baseUrl.replace(/\/$/, '')}/v1/music?output_format=mp3_44100_128`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'audio/mpeg',
            ...(opts.apiKey ? { 'xi-api-key': opts.apiKey } : {}),
          },
          body: JSON.stringify({
            prompt: songPrompt(plan),
            music_length_ms: lengthMs,
            model_id: opts.model,
            force_instrumental: plan.instrumental,
          }),
          signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(opts.timeoutMs ?? 300_000)]),
        });
      } catch (err) {
        throw new RetryLaterError(`music provider unreachable: ${(err as Error).message}`);
      }
      if (res.status === 429 || res.status >= 500) {
        const after = Number(res.headers.get('retry-after'));
        throw new RetryLaterError(
          `music provider answered ${res.status}`,
          Number.isFinite(after) && after > 0 ? after * 1000 : undefined,
        );
      }
      if (!res.ok) {
        // Only the provider's status and its error code are kept, never the prompt.
        let code = '';
        try {
          const body = (await res.json()) as { detail?: { status?: string } | string };
          code = typeof body.detail === 'object' && body.detail?.status ? `: ${body.detail.status}` : '';
        } catch {
          // not JSON
        }
        throw new UnrecoverableError(`music provider refused the request (${res.status}${code})`);
      }
      await ctx.progress('downloading', 'Receiving the audio');
      const audio = await readLimited(res, 100 * 1024 * 1024, 'provider audio');
      const info = mp3Info(audio);
      if (!info) throw new UnrecoverableError('music provider did not return MPEG audio');
      return {
        audio,
        format: 'mp3',
        mimeType: 'audio/mpeg',
        sampleRate: info.sampleRate,
        durationSeconds: info.durationSeconds,
      };
    },
  };
}
