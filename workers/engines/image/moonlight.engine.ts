import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { MOONLIGHT_SIZES, type MoonlightAspectRatio } from '../../../contracts/images';
import { encodePng } from '../../../platform/media/png';
import { colourWordsIn, paint, paletteFor, prng, seedBytes } from './procedural';
import { skinToneShare } from './safety';

export const MOONLIGHT_ENGINE_NAME = 'moonlight-procedural-v1';

export interface MoonlightRender {
  png: Buffer;
  width: number;
  height: number;
  /** Output safety score: share of skin-toned pixels (safety.ts). */
  adultScore: number;
}

/**
 * The in-house model, moonlight-procedural-v1: a procedural "diffusion" whose state is a noise
 * field seeded by SHA-256(prompt, seed). Each of `steps` passes adds one finer octave of detail
 * (coarse composition first, texture last); guidance `cfg` sets the contrast the prompt's palette
 * is painted with; light sources come from the seed. The PNG carries no clock or host data, so
 * the same prompt and seed give byte-identical files. It yields between steps and stops when
 * `signal` aborts.
 */
export async function renderMoonlight(
  input: { prompt: string; aspectRatio: MoonlightAspectRatio; seed: number; steps: number; cfg: number },
  signal: AbortSignal,
): Promise<MoonlightRender> {
  const { width, height } = MOONLIGHT_SIZES[input.aspectRatio];
  const seed = seedBytes(MOONLIGHT_ENGINE_NAME, input.prompt, input.seed);
  const palette = paletteFor(colourWordsIn(input.prompt), prng(seed), input.prompt);
  const pixels = await paint({
    width,
    height,
    seed,
    palette,
    steps: input.steps,
    cfg: input.cfg,
    warp: 0.35,
    glows: 3,
    vignette: true,
    onStep: async () => {
      signal.throwIfAborted();
      await yieldToLoop();
    },
  });
  const adultScore = skinToneShare(pixels, 3);
  const png = encodePng(width, height, pixels, 3, { Software: MOONLIGHT_ENGINE_NAME, Seed: String(input.seed), Steps: String(input.steps) });
  return { png, width, height, adultScore };
}
