import {
  ImageRpcRequest,
  IMAGE_SIZES,
  MOONLIGHT_DEFAULTS,
  MOONLIGHT_SIZES,
  adultTermIn,
  type ImageResult,
  type MoonlightResult,
} from '../../contracts/images';
import { ConfigError, type Config } from '../../platform/infra/config';
import { AppError } from '../../platform/infra/errors';
import { decodeImage } from '../../platform/media/codec';
import type { Runtime } from '../../platform/runtime';
import { fetchInput, InputFetchError } from '../../platform/infra/ssrf';
import type { ImageEngine } from '../engines/images/image.engine';
import { createLocalImageEngine } from '../engines/images/local.engine';
import { localMoonlight, type MoonlightEngine } from '../engines/images/moonlight.engine';
import { createRemoteMoonlight } from '../engines/images/moonlight-remote.engine';
import { createOpenAiImageEngine } from '../engines/images/openai.engine';
import { meanColour, seedBytes, type Rgb } from '../engines/images/procedural';
import type { ResponderDefinition } from '../pool/responder';

export function imageEngineFrom(config: Config): ImageEngine {
  return config.IMAGE_ENGINE === 'openai'
    ? createOpenAiImageEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.OPENAI_IMAGE_MODEL,
        allowLoopback: config.ALLOW_LOOPBACK_URLS,
      })
    : createLocalImageEngine();
}

/** The model behind /images/moonlight: the local scene composer, or a self-hosted diffusion server. */
export function moonlightEngineFrom(config: Config): MoonlightEngine {
  if (config.MOONLIGHT_ENGINE === 'local') return localMoonlight;
  // loadConfig refuses remote without a URL; this narrows the type for configs built by hand.
  if (!config.MOONLIGHT_REMOTE_URL)
    throw new ConfigError('invalid configuration:\n  MOONLIGHT_REMOTE_URL: must be set when MOONLIGHT_ENGINE=remote');
  return createRemoteMoonlight({
    baseUrl: config.MOONLIGHT_REMOTE_URL,
    apiKey: config.MOONLIGHT_REMOTE_API_KEY,
    protocol: config.MOONLIGHT_REMOTE_PROTOCOL,
    model: config.MOONLIGHT_REMOTE_MODEL,
    timeoutMs: config.MOONLIGHT_REMOTE_TIMEOUT_MS,
    allowLoopback: config.ALLOW_LOOPBACK_URLS,
  });
}

/** The /images answer before the API adds what it charged. */
export type ImageRenderReply = Omit<ImageResult, 'charged'>;

/**
 * Fetch a reference image through the SSRF guard and reduce it to its mean colour. PNG, JPEG,
 * WebP (anything sharp reads) are decoded; bytes that are no image sharp can read get a colour
 * derived from a hash of their bytes, and a note says so.
 */
export async function referenceColour(
  config: Config,
  url: string,
  field: string,
  signal: AbortSignal,
): Promise<{ colour: Rgb; note?: string }> {
  const loop = config.ALLOW_LOOPBACK_URLS;
  const bytes = await fetchInput(url, field, {
    allowLoopback: loop,
    signal,
    answerMs: Math.min(config.INPUT_FETCH_TIMEOUT_MS, 10_000),
    totalMs: 10_000,
    maxBytes: config.REFERENCE_IMAGE_MAX_BYTES,
  });
  try {
    const img = await decodeImage(bytes, { channels: 3 });
    return { colour: meanColour(img.data, 3) };
  } catch {
    const h = seedBytes('reference', bytes.toString('base64'));
    return {
      colour: [h[0]!, h[1]!, h[2]!],
      note: `${field} is not an image this service can read; its colour was estimated rather than measured.`,
    };
  }
}

/**
 * The image pool (request/reply): POST /images renders (stored in the blob store, signed URL)
 * and POST /images/moonlight renders (returned inline, nothing stored, output safety scored).
 */
export function imageResponder(
  rt: Runtime,
  engine: ImageEngine = imageEngineFrom(rt.config),
  moonlight: MoonlightEngine = moonlightEngineFrom(rt.config),
): ResponderDefinition<ImageRpcRequest, ImageRenderReply | MoonlightResult> {
  const config = rt.config;
  return {
    pool: 'image',
    input: ImageRpcRequest,
    async handle(req, ctx) {
      if (req.kind === 'moonlight') {
        // The API refuses adult prompts before charging; this is the model's own second line.
        if (adultTermIn(req.prompt))
          throw new AppError('adult_content', 'prompt: describes adult content, which this model does not render');
        const t0 = performance.now();
        const r = await moonlight.render(
          {
            prompt: req.prompt,
            aspectRatio: req.aspectRatio,
            seed: req.seed,
            steps: MOONLIGHT_DEFAULTS.steps,
            cfg: MOONLIGHT_DEFAULTS.cfg,
          },
          ctx.signal,
        );
        const renderMs = Math.round(performance.now() - t0);
        if (r.adultScore >= config.MOONLIGHT_ADULT_THRESHOLD) {
          throw new AppError(
            'adult_render',
            'the finished render was scored as adult content and is not delivered; nothing was charged',
          );
        }
        const size = MOONLIGHT_SIZES[req.aspectRatio];
        return {
          engine: moonlight.name,
          base64: `data:image/png;base64,${r.png.toString('base64')}`,
          mimeType: 'image/png',
          width: size.width,
          height: size.height,
          aspectRatio: req.aspectRatio,
          seed: req.seed,
          steps: MOONLIGHT_DEFAULTS.steps,
          cfg: MOONLIGHT_DEFAULTS.cfg,
          prompt: req.prompt,
          negativePrompt: req.negativePrompt,
          renderMs,
        } satisfies MoonlightResult;
      }

      const notes = [...req.notes];
      const colours: Rgb[] = [];
      for (const [i, url] of req.referenceImageUrls.entries()) {
        // A synchronous call is not tried again: an input that did not answer is the caller's 400, naming it.
        const ref = await referenceColour(config, url, `referenceImageUrls.${i}`, ctx.signal).catch((err: unknown) => {
          throw err instanceof InputFetchError ? new AppError('validation_error', err.message) : err;
        });
        colours.push(ref.colour);
        if (ref.note) notes.push(ref.note);
      }
      if (req.engine === 'auto') throw new AppError('validation_error', 'engine: must be resolved before rendering');
      const { width, height } = IMAGE_SIZES[req.aspectRatio];
      const seed =
        seedBytes(req.prompt, req.engine, req.style ?? '', req.aspectRatio, JSON.stringify(colours)).readUInt32LE(0) %
        1_000_000_000;
      const out = await engine.render(
        {
          prompt: req.prompt,
          engine: req.engine,
          aspectRatio: req.aspectRatio,
          width,
          height,
          style: req.style,
          referenceColours: colours,
          seed,
        },
        ctx,
      );
      notes.push(...out.notes);
      ctx.signal.throwIfAborted(); // the caller gave up (deadline passed): store nothing
      const blob = await rt.blobs.put(out.png, {
        contentType: 'image/png',
        filename: 'image.png',
        accountId: req.accountId,
      });
      return {
        url: rt.blobs.url(blob.id, 'image.png'),
        mimeType: 'image/png',
        width: out.width,
        height: out.height,
        aspectRatio: req.aspectRatio,
        engine: req.engine,
        renderer: engine.name,
        style: req.style,
        seed,
        sizeBytes: out.png.length,
        referenceImagesUsed: colours.length,
        notes,
        ...(req.includeBase64 ? { base64: `data:image/png;base64,${out.png.toString('base64')}` } : {}),
      } satisfies ImageRenderReply;
    },
  };
}
