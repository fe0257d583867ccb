import type { SpacePlan, SpaceResult } from '../../../contracts/spaces';

/** What an engine may do with the job while it builds: report, store files, publish the preview. */
export interface SpaceEngineContext {
  signal: AbortSignal;
  progress(rawStatus: string, message: string): Promise<void>;
  /** Store a file in the blob store; answers its absolute signed URL. */
  store(bytes: Buffer, contentType: string, filename: string): Promise<string>;
  /** Write the stage-preview result to the job while it is still processing (SPEC 3.1). */
  publishPreview(result: SpaceResult): Promise<void>;
}

export interface SpaceEngineInput {
  plan: SpacePlan;
  /** The fetched photos in request order (one for a one-photo space), or a video's sampled frames in time order. */
  photos: Buffer[];
}

/**
 * A space builder: the one-photo engine (local-photo-space-v1), the local room engine
 * (local-room-v1) and the remote world-generation adapter (remote-world-v1); the room engine is
 * chosen by configuration (SPACE_ROOM_ENGINE) in workers/space/space.worker.ts.
 */
export interface SpaceEngine {
  readonly name: string;
  build(input: SpaceEngineInput, ctx: SpaceEngineContext): Promise<SpaceResult>;
}
