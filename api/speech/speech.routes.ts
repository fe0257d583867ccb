import type { ServerResponse } from 'node:http';
import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { SPEECH_AUDIO, SPEECH_MEDIA_TYPE } from '../../contracts/speech';
import { pageWhole } from '../../platform/infra/lists';
import { fromUnits } from '../../platform/credits/credits';
import type { Runtime } from '../../platform/runtime';
import { SPEECH_AUDIO_MAX_SECONDS, SPEECH_UNREAD_MAX_BYTES } from '../../platform/speech/limits';
import { createSpeechService, SpeechStreamCut, type SpeechService } from '../../platform/speech/speech.service';
import { abortWhenClientLeaves } from '../http/client-gone';
import { mount, type RouteDeps } from '../http/route';

/**
 * POST /speech and GET /speech/voices (SPEC 4.8). POST /speech answers raw PCM with chunked
 * transfer, each chunk written as the speech pool sends it. Everything that can refuse (400,
 * 402, 503 engine failure, 504 deadline) answers in the Error shape before any audio; once audio
 * has gone out, a failure destroys the connection without the closing chunk, so the client sees
 * an incomplete body (an error from its HTTP library), never a short body that looks whole.
 * Audio stops at SPEECH_AUDIO_MAX_SECONDS (a clean end at exactly that length); a client that
 * leaves more than SPEECH_UNREAD_MAX_BYTES unread is cut, so one call holds at most that here.
 */
export function speechRoutes(rt: Runtime, deps: RouteDeps, opts: { service?: SpeechService } = {}): Router {
  const r = Router();
  let service = opts.service;
  const get = () => (service ??= createSpeechService(rt));

  mount(r, endpoints.listVoices, async ({ query }) => pageWhole(get().voices(), query, 'voices'), deps);

  mount(
    r,
    endpoints.createSpeech,
    async (ctx) => {
      const { res } = ctx;
      const abort = new AbortController();
      abortWhenClientLeaves(res, abort, new Error('the client left'));
      try {
        await get().speak(
          { accountId: ctx.auth.account._id, requestId: ctx.requestId, request: ctx.body, signal: abort.signal },
          {
            start({ voice, engine, charged, characters }) {
              res.status(200);
              res.setHeader('Content-Type', SPEECH_MEDIA_TYPE);
              res.setHeader('X-Audio-Sample-Rate', String(SPEECH_AUDIO.sampleRate));
              res.setHeader('X-Audio-Channels', String(SPEECH_AUDIO.channels));
              res.setHeader('X-Audio-Encoding', SPEECH_AUDIO.encoding);
              res.setHeader('X-Speech-Voice', voice.name);
              res.setHeader('X-Speech-Engine', engine);
              res.setHeader('X-Speech-Characters', String(characters));
              res.setHeader('X-Audio-Max-Seconds', String(SPEECH_AUDIO_MAX_SECONDS));
              res.setHeader('X-Credits-Charged', String(fromUnits(charged)));
              res.setHeader('Cache-Control', 'no-store');
              ctx.charged(charged);
            },
            chunk(pcm) {
              writeAudio(res, pcm, abort);
            },
          },
        );
      } catch (err) {
        if (!(err instanceof SpeechStreamCut)) throw err;
        rt.log.warn('speech stream cut after audio was sent', { requestId: ctx.requestId, bytes: err.bytes, err });
        res.destroy();
        return undefined;
      }
      res.end();
      return undefined;
    },
    deps,
  );
  return r;
}

/**
 * One piece of audio to a client that may not be reading. The pool cannot be paused (its chunks
 * are not acknowledged one by one), so waiting for 'drain' would only move the buffer here:
 * once more than `limit` bytes wait unsent, `abort` fires (the service then ends the call as a
 * cut stream) and nothing more is written.
 */
export function writeAudio(
  res: ServerResponse,
  pcm: Buffer,
  abort: AbortController,
  limit = SPEECH_UNREAD_MAX_BYTES,
): void {
  if (res.destroyed || abort.signal.aborted) return;
  res.write(pcm);
  if (res.writableLength > limit) abort.abort(new Error(`the client left more than ${limit} bytes unread`));
}
