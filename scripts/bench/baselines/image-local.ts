// BASELINE ONLY (images bench): local-procedural-v1, the /images local engine as it was before the
// scene composer, copied from git (workers/engines/images/local.engine.ts at HEAD) with its imports
// pointed at the baseline PNG codec and the procedural painter (unchanged; the video engine still uses it). Not used by the service.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { encodePng } from './png';
import type { ImageEngine, ImageRenderInput, ImageRenderOutput } from '../../../workers/engines/images/image.engine';
import {
  colourWordsIn,
  paint,
  paletteFor,
  prng,
  seedBytes,
  type PaintOptions,
} from '../../../workers/engines/images/procedural';

/** How each public engine name looks when the local painter serves it. */
const LOOKS: Record<ImageRenderInput['engine'], Omit<PaintOptions, 'width' | 'height' | 'seed' | 'palette' | 'cfg'>> = {
  'svc-ultra': { steps: 8, glows: 4, warp: 0.15, vignette: true },
  'svc-creative': { steps: 6, glows: 2, warp: 0.45 },
  'svc-imagine': { steps: 7, glows: 3, warp: 0.8 },
  'svc-photo': { steps: 5, glows: 2, vignette: true },
  'svc-rapid': { steps: 3, glows: 1 },
  'svc-design': { steps: 4, posterize: true },
  'svc-studio': { steps: 5, glows: 1, vignette: true, warp: 0.1 },
  'svc-type': { steps: 3, bands: true, posterize: true },
  'partner-svc': { steps: 6, glows: 3, warp: 0.3 },
};

/**
 * local-procedural-v1: an offline, deterministic painter. Colours come from colour words in the
 * prompt and style, then from the reference images; the engine name picks the look (detail
 * passes, warp, glows, posterisation). Same input and seed, same bytes.
 */
export function createLocalImageEngineBaseline(): ImageEngine {
  return {
    name: 'local-procedural-v1',
    async render(input, ctx): Promise<ImageRenderOutput> {
      const seed = seedBytes('local-procedural-v1', input.engine, input.prompt, input.style ?? '', input.seed);
      const named = [...colourWordsIn(`${input.prompt} ${input.style ?? ''}`), ...input.referenceColours];
      const palette = paletteFor(named, prng(seed), `${input.prompt} ${input.style ?? ''}`);
      const pixels = await paint({
        width: input.width,
        height: input.height,
        seed,
        palette,
        cfg: 1,
        ...LOOKS[input.engine],
        onStep: async () => {
          ctx.signal.throwIfAborted();
          await yieldToLoop();
        },
      });
      const png = encodePng(input.width, input.height, pixels, 3, { Software: 'local-procedural-v1' });
      return { png, width: input.width, height: input.height, notes: [] };
    },
  };
}
