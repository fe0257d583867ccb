import {
  SPEECH_AUDIO,
  type SpeechRequest,
  type SpeechRpcReply,
  type SpeechRpcRequest,
  type Voice,
} from '../../contracts/speech';
import { metrics } from '../../monitoring/metrics';
import { RpcTimeoutError, type RpcReply } from '../infra/amqp';
import { AppError, ERROR_STATUS, type ErrorCode } from '../infra/errors';
import { HOLD_GRACE_MS } from '../credits/paid-call';
import type { Runtime } from '../runtime';
import { voiceCatalogue, type VoiceEntry } from './voices';

/** Where the audio goes as it arrives (the HTTP response). */
export interface SpeechSink {
  /** Once, right before the first chunk: audio is coming and its charge stands. */
  /** `charged`: millicredits. */
  start(meta: { voice: VoiceEntry; engine: string; charged: number; characters: number }): void;
  chunk(pcm: Buffer): void;
}

export interface SpeechOutcome {
  voice: string;
  engine: string;
  characters: number;
  /** Millicredits. */
  charged: number;
  bytes: number;
  audioSeconds: number;
}

/**
 * The stream broke after audio had been sent: the sink got part of the sentence, the charge
 * stands, and the caller must end the response so that the client sees it was cut.
 */
export class SpeechStreamCut extends Error {
  override name = 'SpeechStreamCut';
  constructor(
    message: string,
    readonly bytes: number,
  ) {
    super(message);
  }
}

const abortReason = (signal?: AbortSignal) =>
  signal?.reason instanceof Error ? signal.reason.message : 'the client left';

/** Characters charged for a text: Unicode code points of the trimmed text. */
export const chargedCharacters = (text: string) => [...text.trim()].length;

/**
 * POST /speech and GET /speech/voices. One sentence is synthesised by the speech pool over
 * RabbitMQ request/reply, streamed: the pool sends PCM chunks as its engine produces them and
 * each is handed to the sink at once. Paid per character through a credit hold, made while the
 * call starts (402 before any audio), captured when the first audio is handed on, released when
 * none was (the engine refused or failed, the deadline passed, the client left first). A failure
 * after audio was sent cuts the stream (SpeechStreamCut) and the charge stands: part of the
 * sentence was delivered and cannot be taken back, and a client cannot tell a cut from a full
 * sentence by its length alone, so the cut is made visible (no clean end of the HTTP body).
 */
export function createSpeechService(rt: Pick<Runtime, 'amqp' | 'credits' | 'config' | 'log'>) {
  const { config, credits } = rt;
  const catalogue = voiceCatalogue(config);
  const labels = { pool: 'speech', operation: 'speech' };

  return {
    catalogue,
    voices(): Voice[] {
      return catalogue.list();
    },

    async speak(
      input: { accountId: string; requestId: string; request: SpeechRequest; signal?: AbortSignal },
      sink: SpeechSink,
    ): Promise<SpeechOutcome> {
      const voice = catalogue.resolve(input.request.voice);
      const text = input.request.text.trim();
      const characters = chargedCharacters(text);
      // Exact per character: the speech_char price in millicredits, times the characters.
      const amount = credits.millicreditsFor('speech_char', characters);
      const timeoutMs = config.SPEECH_RPC_TIMEOUT_MS;
      // The hold and the call start together (the hold's three database writes would otherwise
      // come first in the time to first byte): audio that arrives before the hold is in place
      // waits here, so nothing is heard unpaid. A refused hold (402) stops waiting for the pool;
      // the pool may still synthesise that one sentence for nothing (bounded by the rate limit).
      const stopCall = new AbortController();
      const signal = input.signal ? AbortSignal.any([input.signal, stopCall.signal]) : stopCall.signal;
      let hold: string | undefined;
      let held = false;
      let bytes = 0; // audio handed to the sink
      const early: Buffer[] = [];
      let captured: Promise<void> | undefined;
      const deliver = (pcm: Buffer) => {
        if (bytes === 0) {
          sink.start({ voice, engine: catalogue.engine, charged: amount, characters });
          captured =
            hold === undefined
              ? Promise.resolve()
              : credits.capture(hold).catch((err: unknown) => {
                  // Left pending, the scheduler settles it after its deadline: released (no delivery record).
                  rt.log.warn('speech credit hold not captured', {
                    requestId: input.requestId,
                    holdId: hold,
                    err: err as Error,
                  });
                });
        }
        bytes += pcm.length;
        sink.chunk(pcm);
      };
      const holding = (
        amount > 0
          ? credits.hold({
              accountId: input.accountId,
              operation: 'speech_char',
              millicredits: amount,
              requestId: input.requestId,
              ttlMs: timeoutMs + HOLD_GRACE_MS,
            })
          : Promise.resolve(undefined)
      ).then(
        (id) => {
          hold = id;
          // The client may have left while the hold was being made: then nothing is delivered
          // and the hold is released below (bytes stays 0), not captured for audio nobody heard.
          if (input.signal?.aborted) return;
          held = true;
          for (const pcm of early.splice(0)) deliver(pcm);
        },
        (err: unknown) => {
          stopCall.abort(err);
          throw err;
        },
      );
      holding.catch(() => {}); // awaited below, after the call

      const payload: SpeechRpcRequest = { text, voice: voice.name };
      const started = performance.now();
      let reply: RpcReply<SpeechRpcReply> | undefined;
      let failure: AppError | undefined;
      let callError: unknown;
      try {
        reply = await rt.amqp.rpcStream<SpeechRpcReply>(
          'speech',
          payload,
          timeoutMs,
          (pcm) => (held && !signal.aborted ? deliver(pcm) : early.push(pcm)),
          { signal },
        );
      } catch (err) {
        callError = err;
      }
      await holding; // a refused hold (402) ends here: nothing was held, nothing is owed
      const got = bytes + early.reduce((n, b) => n + b.length, 0);
      if (callError !== undefined) {
        const err = callError;
        const outcome =
          err instanceof RpcTimeoutError ? 'timeout' : input.signal?.aborted ? 'abandoned' : 'unavailable';
        metrics.rpcCalls.inc({ ...labels, outcome: got > 0 ? 'cut' : outcome });
        failure =
          outcome === 'timeout'
            ? new AppError(
                'timeout',
                `the speech pool did not ${got > 0 ? 'finish' : 'answer'} within ${timeoutMs} ms`,
                { cause: err },
              )
            : outcome === 'abandoned'
              ? new AppError('bad_request', `${abortReason(input.signal)} before the audio was complete`, {
                  cause: err,
                })
              : new AppError('service_unavailable', 'the speech pool is unreachable', { cause: err });
      }
      if (reply) {
        metrics.rpcDuration.observe(labels, (performance.now() - started) / 1000);
        if (!reply.ok) {
          metrics.rpcCalls.inc({ ...labels, outcome: got > 0 ? 'cut' : 'refused' });
          const code = (reply.error.code in ERROR_STATUS ? reply.error.code : 'internal_error') as ErrorCode;
          failure = new AppError(code, reply.error.message);
        } else if (got === 0) {
          metrics.rpcCalls.inc({ ...labels, outcome: 'refused' });
          failure = new AppError('service_unavailable', 'the speech engine produced no audio');
        } else if (bytes === 0) {
          // All the audio came before the hold, and the client left before the hold was in place.
          metrics.rpcCalls.inc({ ...labels, outcome: 'abandoned' });
          failure = new AppError('bad_request', `${abortReason(input.signal)} before the audio was sent`);
        } else metrics.rpcCalls.inc({ ...labels, outcome: 'ok' });
      }

      if (failure) {
        if (bytes > 0) {
          await captured;
          throw new SpeechStreamCut(`speech stream cut after ${bytes} bytes: ${failure.message}`, bytes);
        }
        if (hold !== undefined) await credits.settle(hold);
        throw new AppError(failure.code, `${failure.message}; nothing was charged`, { cause: failure.cause });
      }
      await captured;
      return {
        voice: voice.name,
        engine: catalogue.engine,
        characters,
        charged: amount,
        bytes,
        audioSeconds: bytes / SPEECH_AUDIO.bytesPerSample / SPEECH_AUDIO.sampleRate,
      };
    },
  };
}
export type SpeechService = ReturnType<typeof createSpeechService>;
