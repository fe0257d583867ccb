import type { VideoPlan } from '../../../contracts/videos';
import type { Rgb } from '../images/procedural';

export interface VideoRenderContext {
  signal: AbortSignal;
  /** A private temporary directory for this render; removed afterwards by the worker. */
  workDir: string;
  progress(rawStatus: string, message: string): Promise<void>;
}

/** What a video engine receives: the resolved plan plus what the worker fetched for it. */
export interface VideoRenderInput {
  plan: VideoPlan;
  /** Local file of the opening frame, when the plan has one. */
  openingFramePath: string | null;
  /** Mean colours of the subject references, when the plan has several. */
  subjectColours: Rgb[];
}

export interface VideoRenderOutput {
  /** Path of the MP4 written into workDir. */
  file: string;
  /** Notes on what this engine did differently from the plan (scale, unsupported inputs). */
  notes: string[];
}

export interface VideoEngine {
  /** Reported as the result's `engine`. */
  readonly name: string;
  render(input: VideoRenderInput, ctx: VideoRenderContext): Promise<VideoRenderOutput>;
}
