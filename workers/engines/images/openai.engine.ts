import { guardedFetch, readLimited } from '../../../platform/infra/ssrf';
import { AppError } from '../../../platform/infra/errors';
import type { ImageEngine, ImageRenderOutput } from './image.engine';

const hex = (c: readonly number[]) => `#${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;

/** The sizes OpenAI-style image models offer, per orientation. */
const providerSize = (w: number, h: number) => (w === h ? '1024x1024' : w > h ? '1536x1024' : '1024x1536');

/** Width and height from a PNG's IHDR. */
function pngSize(png: Buffer): { width: number; height: number } | null {
  if (png.length < 24 || png.readUInt32BE(0) !== 0x89504e47 || png.toString('ascii', 12, 16) !== 'IHDR') return null;
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

/**
 * openai-compatible:<model>: POST {base}/images/generations with the OpenAI images protocol
 * ({ model, prompt, n, size, output_format }) → { data: [{ b64_json } | { url }] }. The provider
 * offers three sizes, so a shape it lacks comes back at its nearest size and a note says so; the
 * result reports the real size. Reference images cannot be sent to this endpoint: their colours
 * are written into the prompt instead (note). 429/5xx/unreachable answer 503; other errors 502-ish
 * service_unavailable with the provider's status. The base URL is operator configuration, not
 * user input, so it does not pass the SSRF guard.
 */
export function createOpenAiImageEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
  allowLoopback?: boolean;
}): ImageEngine {
  const base = opts.baseUrl.replace(/\/$/, '');
  return {
    name: `openai-compatible:${opts.model}`,
    async render(input, ctx): Promise<ImageRenderOutput> {
      const notes: string[] = [];
      let prompt = input.style ? `${input.prompt}\nStyle: ${input.style}` : input.prompt;
      if (input.referenceColours.length) {
        prompt += `\nPalette: ${input.referenceColours.map(hex).join(', ')}`;
        notes.push(
          'The provider engine takes no reference images; their colours were added to the prompt as a palette.',
        );
      }
      const size = providerSize(input.width, input.height);
      let res: Response;
      try {
        res = await fetch(`${base}/images/generations`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
          },
          body: JSON.stringify({ model: opts.model, prompt, n: 1, size, output_format: 'png' }),
          signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(opts.timeoutMs ?? 120_000)]),
        });
      } catch (err) {
        throw new AppError('service_unavailable', `image provider unreachable: ${(err as Error).message}`);
      }
      if (!res.ok) {
        const detail = await res.text().catch(() => '');
        const msg = /"message"\s*:\s*"([^"]{1,200})"/.exec(detail)?.[1];
        throw new AppError('service_unavailable', `image provider answered ${res.status}${msg ? `: ${msg}` : ''}`);
      }
      const body = (await res.json()) as { data?: { b64_json?: string; url?: string }[] };
      const item = body.data?.[0];
      let png: Buffer;
      if (item?.b64_json) png = Buffer.from(item.b64_json, 'base64');
      else if (item?.url) {
        // A URL in the provider's answer is still a URL the server fetches: through the guard.
        const r = await guardedFetch(
          item.url,
          'provider image url',
          { signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(60_000)]) },
          { allowLoopback: opts.allowLoopback },
        );
        if (!r.ok) throw new AppError('service_unavailable', `image provider file answered ${r.status}`);
        png = await readLimited(r, 50 * 1024 * 1024, 'provider image');
      } else throw new AppError('service_unavailable', 'image provider returned no image');
      const real = pngSize(png);
      if (!real) throw new AppError('service_unavailable', 'image provider returned something other than a PNG');
      if (real.width !== input.width || real.height !== input.height) {
        notes.push(
          `The provider renders ${real.width}x${real.height} for ${input.aspectRatio}; that is the size delivered.`,
        );
      }
      return { png, width: real.width, height: real.height, notes };
    },
  };
}
