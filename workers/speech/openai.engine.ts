import { AppError } from '../../platform/errors';
import { openAiSpeechEngineName } from '../../platform/speech/voices';
import type { SpeechEngine } from './speech.engine';

/**
 * openai-compatible:<model>: POST {base}/audio/speech with the OpenAI audio protocol
 * ({ model, input, voice, response_format: 'pcm' }), whose answer is raw 24 kHz mono s16le PCM,
 * streamed: each piece of the body is yielded as it arrives (an odd byte waits for its pair).
 * A refusal (4xx/5xx) or an unreachable provider is 503 service_unavailable with the provider's
 * status, before any audio. The base URL is operator configuration, not user input (no SSRF guard).
 */
export function createOpenAiSpeechEngine(opts: { baseUrl: string; apiKey?: string; model: string }): SpeechEngine {
  const base = opts.baseUrl.replace(/\/$/, '');
  return {
    name: openAiSpeechEngineName(opts.model),
    async *synthesize(input, ctx) {
      let res: Response;
      try {
        res = await fetch(`${base}/audio/speech`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}) },
          body: JSON.stringify({ model: opts.model, input: input.text, voice: input.voice, response_format: 'pcm' }),
          signal: ctx.signal,
        });
      } catch (err) {
        ctx.signal.throwIfAborted();
        throw new AppError('service_unavailable', `speech provider unreachable: ${(err as Error).message}`);
      }
      if (!res.ok) {
        const detail = await res.text().catch(() => '');
        const msg = /"message"\s*:\s*"([^"]{1,200})"/.exec(detail)?.[1];
        throw new AppError('service_unavailable', `speech provider answered ${res.status}${msg ? `: ${msg}` : ''}`);
      }
      if (!res.body) throw new AppError('service_unavailable', 'speech provider answered without a body');
      let odd: Buffer | undefined;
      const body = (res.body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<Uint8Array>;
        try {
          next = await body.next();
        } catch (err) {
          ctx.signal.throwIfAborted();
          throw new AppError('service_unavailable', `speech provider stream broke: ${(err as Error).message}`);
        }
        if (next.done) break;
        let b = Buffer.from(next.value);
        if (odd) b = Buffer.concat([odd, b]);
        odd = b.length % 2 ? Buffer.from(b.subarray(b.length - 1)) : undefined;
        if (odd) b = b.subarray(0, b.length - 1);
        if (b.length) yield b;
      }
    },
  };
}
