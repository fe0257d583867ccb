import type { ImageAspectRatio, ImageEngineName } from '../../../contracts/images';
import type { Rgb } from './procedural';

/** What an /images engine receives: the request after plan and workspace rules. */
export interface ImageRenderInput {
  prompt: string;
  /** The public engine that serves the request (svc-ultra, svc-creative, ...), never auto. */
  engine: Exclude<ImageEngineName, 'auto'>;
  aspectRatio: ImageAspectRatio;
  /** Exact size asked for (IMAGE_SIZES). */
  width: number;
  height: number;
  style: string | null;
  /** Mean colours of the fetched reference images, in order. */
  referenceColours: Rgb[];
  seed: number;
}

export interface ImageRenderOutput {
  png: Buffer;
  /** Real size of the PNG (a provider may return another size than asked). */
  width: number;
  height: number;
  notes: string[];
}

export interface ImageEngine {
  /** What actually draws the pixels; reported as `renderer`. */
  readonly name: string;
  render(input: ImageRenderInput, ctx: { signal: AbortSignal }): Promise<ImageRenderOutput>;
}
