import { MOONLIGHT_SIZES, type MoonlightAspectRatio } from '../../../contracts/images';
import { seedBytes } from './procedural';
import { renderScene } from './render';
import { skinToneShare } from './safety';

/** What the in-house model is asked: the request after validation and refusals. */
export interface MoonlightInput {
  prompt: string;
  aspectRatio: MoonlightAspectRatio;
  seed: number;
  steps: number;
  cfg: number;
}

export interface MoonlightRender {
  png: Buffer;
  width: number;
  height: number;
  /** Output safety score: share of skin-toned pixels (safety.ts). */
  adultScore: number;
}

/** The in-house model behind POST /images/moonlight: local (scene composer) or remote (moonlight-remote.engine.ts). */
export interface MoonlightEngine {
  /** Reported as the result's `engine`. */
  readonly name: string;
  render(input: MoonlightInput, signal: AbortSignal): Promise<MoonlightRender>;
}

export const MOONLIGHT_ENGINE_NAME = 'moonlight-scene-v2';

/**
 * moonlight-scene-v2, the offline stand-in for the in-house model: the scene composer (scene.ts)
 * seeded by SHA-256(prompt, seed), in photo-like lighting unless the prompt names a style. The
 * PNG carries Software, Seed and Steps stamps and no clock or host data, so the same prompt and
 * seed give byte-identical files. `steps` and `cfg` are reported, not used: composition is not
 * iterative. Stops between phases when `signal` aborts.
 */
export const localMoonlight: MoonlightEngine = {
  name: MOONLIGHT_ENGINE_NAME,
  async render(input, signal) {
    const { width, height } = MOONLIGHT_SIZES[input.aspectRatio];
    const r = await renderScene(
      {
        width,
        height,
        seed: seedBytes(MOONLIGHT_ENGINE_NAME, input.prompt, input.seed),
        prompt: input.prompt,
        defaultStyle: 'photo',
        text: { Software: MOONLIGHT_ENGINE_NAME, Seed: String(input.seed), Steps: String(input.steps) },
      },
      signal,
    );
    return { png: r.png, width, height, adultScore: skinToneShare(r.pixels, 3) };
  },
};
