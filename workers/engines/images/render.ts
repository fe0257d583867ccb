import sharp from 'sharp';
import { encodePng } from '../../../platform/media/codec';
import { prng } from './procedural';
import { composeScene, type ComposeOptions, type SceneSpec, type Style } from './scene';
import { applyStyle } from './texture';

/** A finished local render: PNG bytes, its RGB pixels (for the safety scorer) and what was understood. */
export interface SceneRender {
  png: Buffer;
  pixels: Buffer;
  spec: SceneSpec;
  style: Style;
}

/**
 * Compose the prompt's scene as SVG, rasterise it with sharp (librsvg), texture it for the style
 * and encode the PNG with `text` stamps. `signal` is checked between phases. Same options, same bytes.
 */
export async function renderScene(
  o: ComposeOptions & { text: Record<string, string> },
  signal: AbortSignal,
): Promise<SceneRender> {
  const { svg, spec, style } = composeScene(o);
  signal.throwIfAborted();
  const raster = await sharp(Buffer.from(svg), { limitInputPixels: false })
    .resize(o.width, o.height, { fit: 'fill' })
    .removeAlpha()
    .raw()
    .toBuffer();
  signal.throwIfAborted();
  const pixels = await applyStyle(style, raster, o.width, o.height, prng(o.seed.subarray(16)));
  signal.throwIfAborted();
  const png = await encodePng({ width: o.width, height: o.height, channels: 3, data: pixels }, { text: o.text });
  return { png, pixels, spec, style };
}
