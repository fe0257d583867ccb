import { SPEECH_AUDIO, SpeechRpcRequest, type SpeechRpcReply } from '../../contracts/speech';
import type { Config } from '../../platform/infra/config';
import { AppError } from '../../platform/infra/errors';
import type { Logger } from '../../platform/infra/log';
import type { Runtime } from '../../platform/runtime';
import { SPEECH_AUDIO_MAX_BYTES } from '../../platform/speech/limits';
import { voiceCatalogue } from '../../platform/speech/voices';
import type { ResponderDefinition } from '../pool/responder';
import { createEspeakEngine } from './espeak.engine';
import { createOpenAiSpeechEngine } from './openai.engine';
import type { SpeechEngine } from './speech.engine';

/** Largest PCM message the pool sends (64 KiB: 1.4 s of audio). */
export const SPEECH_CHUNK_MAX_BYTES = 64 * 1024;

export function speechEngineFrom(config: Config, log?: Logger): SpeechEngine {
  return config.SPEECH_ENGINE === 'openai'
    ? createOpenAiSpeechEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.SPEECH_MODEL,
        log,
      })
    : createEspeakEngine({ bin: config.ESPEAK_NG_PATH });
}

/**
 * The speech pool (request/reply, streamed): synthesises one sentence and sends its PCM to the
 * caller as it comes (`ctx.send`, one message per chunk, in order), then answers the totals.
 * The first audio goes out alone as soon as it exists; later pieces that arrive while a send
 * awaits its confirm are sent together (at most SPEECH_CHUNK_MAX_BYTES a message), so a
 * synthesiser writing 4 KiB at a time does not cost one broker round trip each. An engine that
 * fails before any audio answers its error (the API refunds); after some audio, the error tells
 * the API the stream was cut. Audio stops at SPEECH_AUDIO_MAX_BYTES (30 s): the engine is
 * stopped there and the answer is a normal one, so the stream ends cleanly at that length.
 */
export function speechResponder(
  rt: Pick<Runtime, 'config'> & Partial<Pick<Runtime, 'log'>>,
  engine: SpeechEngine = speechEngineFrom(rt.config, rt.log),
): ResponderDefinition<SpeechRpcRequest, SpeechRpcReply> {
  const catalogue = voiceCatalogue(rt.config);
  return {
    pool: 'speech',
    input: SpeechRpcRequest,
    async handle(req, ctx) {
      const voice = catalogue.resolve(req.voice);
      const started = performance.now();
      let bytes = 0;
      let chunks = 0;
      let queued: Buffer[] = [];
      let queuedBytes = 0;
      let pump: Promise<void> | undefined;
      let failed: unknown;
      const sendQueued = async () => {
        while (queuedBytes > 0 && failed === undefined) {
          const all = Buffer.concat(queued);
          const take = all.subarray(0, Math.min(all.length, SPEECH_CHUNK_MAX_BYTES));
          queued = take.length < all.length ? [all.subarray(take.length)] : [];
          queuedBytes = all.length - take.length;
          try {
            await ctx.send(take);
          } catch (err) {
            failed = err;
            return;
          }
          bytes += take.length;
          chunks++;
        }
      };
      let produced = 0;
      for await (const pcm of engine.synthesize({ text: req.text, voice: voice.engineVoice }, { signal: ctx.signal })) {
        if (failed !== undefined) break;
        const take = pcm.subarray(0, Math.max(0, SPEECH_AUDIO_MAX_BYTES - produced)); // engines yield whole samples; the cap is even
        produced += take.length;
        if (take.length) {
          queued.push(take);
          queuedBytes += take.length;
          pump ??= sendQueued().finally(() => (pump = undefined));
        }
        if (produced >= SPEECH_AUDIO_MAX_BYTES) break; // leaving the loop stops the engine
      }
      while (pump !== undefined) await pump;
      if (failed === undefined) await sendQueued();
      if (failed !== undefined)
        throw new AppError(
          'service_unavailable',
          `the audio could not be handed to the broker: ${(failed as Error).message}`,
        );
      if (bytes === 0) throw new AppError('service_unavailable', 'the speech engine produced no audio');
      return {
        engine: engine.name,
        voice: voice.name,
        bytes,
        chunks,
        audioSeconds: bytes / SPEECH_AUDIO.bytesPerSample / SPEECH_AUDIO.sampleRate,
        synthMs: Math.round(performance.now() - started),
      };
    },
  };
}
