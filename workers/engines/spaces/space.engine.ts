import type { SpacePlan, SpaceResult } from '../../../contracts/spaces';
import type { Logger } from '../../../platform/infra/log';

/** What an engine may do with the job while it builds: report, store files, publish the preview. */
export interface SpaceEngineContext {
  /** The job's id: the idempotency key of anything the engine asks a provider to create. */
  jobId: string;
  signal: AbortSignal;
  progress(rawStatus: string, message: string): Promise<void>;
  /** Store a file in the blob store; answers its absolute signed URL. */
  store(bytes: Buffer, contentType: string, filename: string): Promise<string>;
  /** Write the stage-preview result to the job while it is still processing (SPEC 3.1). */
  publishPreview(result: SpaceResult): Promise<void>;
  /** The job's logger: details that must not reach the user (a failure's raw message) go here. */
  log: Logger;
  /**
   * A value an earlier attempt of this job remembered (the provider's world id, say), so a retry
   * resumes the work it paid for instead of starting it again; undefined on a first attempt.
   */
  recall(key: string): string | undefined;
  /** Keep a value on the job for later attempts (not shown to the user). */
  remember(key: string, value: string): Promise<void>;
}

export interface SpaceEngineInput {
  plan: SpacePlan;
  /** The fetched photos in request order (one for a one-photo space), or a video's sampled frames in time order. */
  photos: Buffer[];
}

/**
 * A space builder: the one-photo engine (local-photo-space-v1), the local room engine
 * (local-room-v1) and the remote world-generation adapter (remote-world-v1); the room engine is
 * chosen by configuration (SPACE_ROOM_ENGINE) in workers/spaces/space.worker.ts.
 */
export interface SpaceEngine {
  readonly name: string;
  build(input: SpaceEngineInput, ctx: SpaceEngineContext): Promise<SpaceResult>;
}
