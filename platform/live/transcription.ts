import { SPEECH_AUDIO } from '../../contracts/speech';
import type { Config } from '../infra/config';

/** Speech recognition of one audio turn (24 kHz mono s16le PCM). */
export interface TranscriptionEngine {
  readonly name: string;
  transcribe(pcm: Buffer, signal: AbortSignal): Promise<string>;
}

export class TranscriptionError extends Error {
  override name = 'TranscriptionError';
}

/** A RIFF/WAVE header for raw PCM, so a provider that takes files reads the right format. */
export function wavOf(pcm: Buffer, sampleRate: number = SPEECH_AUDIO.sampleRate): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + pcm.length, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

/**
 * An OpenAI-compatible /audio/transcriptions API: multipart upload of the turn as WAV, JSON
 * answer `{ text }`. Errors say what failed without the provider's body (it may echo the key).
 */
export function createOpenAITranscription(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
  fetch?: typeof fetch;
}): TranscriptionEngine {
  const doFetch = opts.fetch ?? fetch;
  const url = `${opts.baseUrl.replace(/\/+$/, '')}/audio/transcriptions`;
  return {
    name: `openai-compatible:${opts.model}`,
    async transcribe(pcm, signal) {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(wavOf(pcm))], { type: 'audio/wav' }), 'turn.wav');
      form.append('model', opts.model);
      form.append('response_format', 'json');
      let res: Response;
      try {
        res = await doFetch(url, {
          method: 'POST',
          body: form,
          headers: opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {},
          signal: AbortSignal.any([signal, AbortSignal.timeout(opts.timeoutMs)]),
        });
      } catch (err) {
        if (signal.aborted) throw err;
        throw new TranscriptionError(
          `the transcription provider could not be reached or did not answer within ${opts.timeoutMs} ms`,
        );
      }
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        throw new TranscriptionError(`the transcription provider answered HTTP ${res.status}`);
      }
      const body = (await res.json().catch(() => null)) as { text?: unknown } | null;
      if (typeof body?.text !== 'string')
        throw new TranscriptionError('the transcription provider answered without a text');
      return body.text.trim();
    },
  };
}

/** The configured engine, or null offline (LIVE_TRANSCRIPTION_ENGINE=none: text turns only). */
export function createTranscriptionEngine(
  config: Config,
  opts: { fetch?: typeof fetch } = {},
): TranscriptionEngine | null {
  if (config.LIVE_TRANSCRIPTION_ENGINE === 'none') return null;
  return createOpenAITranscription({
    baseUrl: config.LIVE_TRANSCRIPTION_BASE_URL ?? config.OPENAI_BASE_URL,
    apiKey: config.OPENAI_API_KEY,
    model: config.LIVE_TRANSCRIPTION_MODEL,
    timeoutMs: config.LIVE_TRANSCRIPTION_TIMEOUT_MS,
    fetch: opts.fetch,
  });
}
