import { MOONLIGHT_SIZES } from '../../../contracts/images';
import { AppError } from '../../../platform/infra/errors';
import { decodeImage } from '../../../platform/media/codec';
import { guardedFetch, readLimited } from '../../../platform/infra/ssrf';
import type { MoonlightEngine } from './moonlight.engine';
import { skinToneShare } from './safety';

/** Wire protocol of the self-hosted diffusion server. */
export type MoonlightRemoteProtocol = 'openai' | 'minimal';

export interface MoonlightRemoteOptions {
  baseUrl: string;
  apiKey?: string;
  protocol: MoonlightRemoteProtocol;
  /** `model` sent with the OpenAI protocol; also the reported engine name (remote:<model>). */
  model: string;
  timeoutMs: number;
  allowLoopback?: boolean;
}

const MAX_PNG_BYTES = 50 * 1024 * 1024;

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

/**
 * The in-house model served by a self-hosted diffusion server. Two protocols:
 *
 * - openai: POST {base}/images/generations {model, prompt, n: 1, size: "WxH", response_format:
 *   "b64_json", seed, steps, guidance_scale} → {data: [{b64_json} | {url}]} (the OpenAI images
 *   API; seed, steps and guidance_scale are the extra fields self-hosted servers accept).
 * - minimal: POST {base}/generate {prompt, width, height, steps, guidance, seed} → image/png.
 *
 * The answer must be a PNG of exactly the SPEC 2.11 size asked for, else it is refused (a server
 * that ignores the size would break the contract). The worker refuses adult prompts before the
 * call and scores the decoded pixels after it, as for the local model. The base URL is operator
 * configuration, so (as for the /images provider engine) it is not SSRF-guarded; a URL in the
 * server's answer is fetched through the guard. Errors: unreachable, 429 and 5xx answer 503
 * service_unavailable; other statuses and malformed answers 503 with what was wrong; past
 * `timeoutMs`, 504 timeout. The API key is sent as a Bearer token and never logged.
 */
export function createRemoteMoonlight(opts: MoonlightRemoteOptions): MoonlightEngine {
  const base = opts.baseUrl.replace(/\/$/, '');
  const headers = {
    'content-type': 'application/json',
    ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
  };
  return {
    name: `remote:${opts.model}`,
    async render(input, signal) {
      const { width, height } = MOONLIGHT_SIZES[input.aspectRatio];
      const timeout = AbortSignal.timeout(opts.timeoutMs);
      const both = AbortSignal.any([signal, timeout]);
      const [url, body] =
        opts.protocol === 'openai'
          ? [
              `${base}/images/generations`,
              {
                model: opts.model,
                prompt: input.prompt,
                n: 1,
                size: `${width}x${height}`,
                response_format: 'b64_json',
                seed: input.seed,
                steps: input.steps,
                guidance_scale: input.cfg,
              },
            ]
          : [
              `${base}/generate`,
              { prompt: input.prompt, width, height, steps: input.steps, guidance: input.cfg, seed: input.seed },
            ];
      const failed = (err: unknown): never => {
        if (timeout.aborted)
          throw new AppError('timeout', `moonlight engine did not answer within ${opts.timeoutMs} ms`);
        // A refused answer (too large, an image URL the SSRF guard blocks) is the server's fault, not the caller's.
        if (err instanceof AppError && err.code === 'validation_error')
          throw new AppError('service_unavailable', `moonlight engine answer refused: ${err.message}`);
        if (err instanceof AppError) throw err;
        signal.throwIfAborted();
        throw new AppError('service_unavailable', `moonlight engine unreachable: ${(err as Error).message}`);
      };
      let png: Buffer;
      try {
        const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: both });
        if (!res.ok) {
          const detail = await readLimited(res, 65_536, 'moonlight engine error').then(
            (b) => b.toString('utf8'),
            () => '',
          );
          const msg = /"message"\s*:\s*"([^"]{1,200})"/.exec(detail)?.[1];
          throw new AppError('service_unavailable', `moonlight engine answered ${res.status}${msg ? `: ${msg}` : ''}`);
        }
        if (opts.protocol === 'minimal') png = await readLimited(res, MAX_PNG_BYTES, 'moonlight engine image');
        else {
          // Bounded like the PNG itself (base64 is 4/3 of the bytes), never an unbounded res.json().
          const raw = await readLimited(res, Math.ceil(MAX_PNG_BYTES * 1.4), 'moonlight engine answer');
          const json = parseJson(raw.toString('utf8')) as { data?: { b64_json?: string; url?: string }[] } | null;
          const item = json?.data?.[0];
          if (item?.b64_json) png = Buffer.from(item.b64_json, 'base64');
          else if (item?.url) {
            const r = await guardedFetch(
              item.url,
              'moonlight engine image url',
              { signal: both },
              { allowLoopback: opts.allowLoopback },
            );
            if (!r.ok) throw new AppError('service_unavailable', `moonlight engine image url answered ${r.status}`);
            png = await readLimited(r, MAX_PNG_BYTES, 'moonlight engine image');
          } else throw new AppError('service_unavailable', 'moonlight engine returned no image');
        }
      } catch (err) {
        return failed(err);
      }
      const img = await decodeImage(png, { channels: 3 }).catch(() => null);
      if (img?.format !== 'png')
        throw new AppError('service_unavailable', 'moonlight engine returned something other than a PNG');
      if (img.width !== width || img.height !== height) {
        throw new AppError(
          'service_unavailable',
          `moonlight engine returned ${img.width}x${img.height} for ${input.aspectRatio}; ${width}x${height} is required, so the render was refused`,
        );
      }
      return { png, width, height, adultScore: skinToneShare(img.data, 3) };
    },
  };
}
