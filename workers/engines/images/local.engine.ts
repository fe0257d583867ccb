import type { ImageEngine, ImageRenderInput, ImageRenderOutput } from './image.engine';
import { seedBytes } from './procedural';
import { renderScene } from './render';
import type { Style } from './scene';

/** The style each public engine name paints in when neither the prompt nor `style` names one. */
const ENGINE_STYLES: Record<ImageRenderInput['engine'], Style> = {
  'svc-ultra': 'photo',
  'svc-creative': 'oil',
  'svc-imagine': 'watercolour',
  'svc-photo': 'photo',
  'svc-rapid': 'flat',
  'svc-design': 'flat',
  'svc-studio': 'photo',
  'svc-type': 'flat',
  'partner-svc': 'oil',
};

export const LOCAL_IMAGE_RENDERER = 'local-scene-v2';

/**
 * local-scene-v2: an offline, deterministic scene renderer (scene.ts). The prompt's subjects,
 * time of day and weather are composed as vector shapes; the style comes from the prompt or the
 * `style` field, else from the engine name (ENGINE_STYLES); reference-image colours tint the
 * scene. Same input and seed, same bytes.
 */
export function createLocalImageEngine(): ImageEngine {
  return {
    name: LOCAL_IMAGE_RENDERER,
    async render(input, ctx): Promise<ImageRenderOutput> {
      const r = await renderScene(
        {
          width: input.width,
          height: input.height,
          seed: seedBytes(LOCAL_IMAGE_RENDERER, input.engine, input.prompt, input.style ?? '', input.seed),
          prompt: input.prompt,
          styleText: input.style ?? '',
          defaultStyle: ENGINE_STYLES[input.engine],
          referenceColours: input.referenceColours,
          text: { Software: LOCAL_IMAGE_RENDERER },
        },
        ctx.signal,
      );
      return { png: r.png, width: input.width, height: input.height, notes: [] };
    },
  };
}
