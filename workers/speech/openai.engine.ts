import { AppError } from '../../platform/infra/errors';
import type { Logger } from '../../platform/infra/log';
import { openAiSpeechEngineName } from '../../platform/speech/voices';
import type { SpeechEngine } from './speech.engine';

/**
 * openai-compatible:<model>: POST {base}/audio/speech with the OpenAI audio protocol
 * ({ model, input, voice, response_format: 'pcm' }), whose answer is raw 24 kHz mono s16le PCM,
 * streamed: each piece of the body is yielded as it arrives (an odd byte waits for its pair).
 * A refusal (4xx/5xx) or an unreachable provider is 503 service_unavailable with the provider's
 * status only, before any audio: the provider's message stays in the worker's log (key-like
 * strings redacted), because some quote the API key (OpenAI's 401 shows part of it). The base URL
 * is operator configuration, not user input (no SSRF guard).
 */
export function createOpenAiSpeechEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  log?: Logger;
}): SpeechEngine {
  const base = opts.baseUrl.replace(/\/$/, '');
  const redact = (text: string) => redactKeys(opts.apiKey ? text.split(opts.apiKey).join('[redacted]') : text);
  return {
    name: openAiSpeechEngineName(opts.model),
    async *synthesize(input, ctx) {
      let res: Response;
      try {
        res = await fetch(`${base}/audio/speech`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
          },
          body: JSON.stringify({ model: opts.model, input: input.text, voice: input.voice, response_format: 'pcm' }),
          signal: ctx.signal,
        });
      } catch (err) {
        ctx.signal.throwIfAborted();
        opts.log?.warn('speech provider unreachable', { detail: redact((err as Error).message) });
        throw new AppError('service_unavailable', 'speech provider unreachable');
      }
      if (!res.ok) {
        const detail = await res.text().catch(() => '');
        const msg = /"message"\s*:\s*"([^"]{1,200})"/.exec(detail)?.[1];
        opts.log?.warn('speech provider refused', { status: res.status, detail: msg ? redact(msg) : undefined });
        throw new AppError('service_unavailable', `speech provider answered ${res.status}`);
      }
      if (!res.body) throw new AppError('service_unavailable', 'speech provider answered without a body');
      let odd: Buffer | undefined;
      let done = false;
      const body = (res.body as unknown as AsyncIterableIterator<Uint8Array>)[Symbol.asyncIterator]();
      try {
        for (;;) {
          let next: IteratorResult<Uint8Array>;
          try {
            next = await body.next();
          } catch (err) {
            done = true;
            ctx.signal.throwIfAborted();
            opts.log?.warn('speech provider stream broke', { detail: redact((err as Error).message) });
            throw new AppError('service_unavailable', 'speech provider stream broke');
          }
          if (next.done) {
            done = true;
            break;
          }
          let b = Buffer.from(next.value);
          if (odd) b = Buffer.concat([odd, b]);
          odd = b.length % 2 ? Buffer.from(b.subarray(b.length - 1)) : undefined;
          if (odd) b = b.subarray(0, b.length - 1);
          if (b.length) yield b;
        }
      } finally {
        // The consumer stopped early (length cap, abort, broker failure): cancel the body so the
        // provider's connection closes now instead of streaming audio nobody reads.
        if (!done) await body.return?.().catch(() => {});
      }
    },
  };
}

/** Provider messages may quote a credential ("Incorrect API key provided: sk-abc***xyz"). */
export const redactKeys = (text: string) =>
  text.replace(/\b(sk|pk|rk)-[A-Za-z0-9_*\-.]{4,}/g, '$1-[redacted]').replace(/\b(Bearer\s+)\S+/gi, '$1[redacted]');
