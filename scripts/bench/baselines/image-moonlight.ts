// BASELINE ONLY (images bench): moonlight-procedural-v1 as it was before the scene composer,
// copied from git (workers/engines/images/moonlight.engine.ts at HEAD) with its imports pointed at
// the baseline PNG codec and the procedural painter (unchanged; the video engine still uses it). Not used by the service.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { MOONLIGHT_SIZES, type MoonlightAspectRatio } from '../../../contracts/images';
import { skinToneShare } from '../../../workers/engines/images/safety';
import { encodePng } from './png';
import { colourWordsIn, paint, paletteFor, prng, seedBytes } from '../../../workers/engines/images/procedural';

/** The old in-house model: value-noise octaves, glows and a palette, PNG by the hand-written encoder. */
export async function renderMoonlightBaseline(
  input: { prompt: string; aspectRatio: MoonlightAspectRatio; seed: number; steps: number; cfg: number },
  signal: AbortSignal,
) {
  const { width, height } = MOONLIGHT_SIZES[input.aspectRatio];
  const seed = seedBytes('moonlight-procedural-v1', input.prompt, input.seed);
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
  const png = encodePng(width, height, pixels, 3, {
    Software: 'moonlight-procedural-v1',
    Seed: String(input.seed),
    Steps: String(input.steps),
  });
  return { png, width, height, adultScore };
}
