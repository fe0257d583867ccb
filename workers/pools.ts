import type { PoolType } from '../contracts/registry';
import type { Runtime } from '../platform/runtime';
import { agentWorker } from './agent/agent.worker';
import { codeWorker } from './code/code.worker';
import { deckWorker } from './deck/deck.worker';
import { driveWorker } from './drive/drive.worker';
import { extractResponder } from './extract/extract.worker';
import { imageResponder } from './image/image.worker';
import { sheetResponder } from './sheet/sheet.worker';
import { speechResponder } from './speech/speech.worker';
import { videoWorker } from './video/video.worker';
import { spaceWorker } from './space/space.worker';
import { researchWorker } from './research/research.worker';
import { songWorker } from './song/song.worker';
import type { ConsumerDefinition } from './pool/consumer';
import type { PoolDefinition } from './pool/pool';
import type { ResponderDefinition } from './pool/responder';

/**
 * The pools this build can run, by type. A pool listed in WORKER_POOLS but absent here has no
 * engine yet: the process logs it and leaves that queue to a deployment that has one.
 */
export const poolDefinitions: Partial<Record<PoolType, (rt: Runtime) => PoolDefinition<any, any>>> = {
  code: (rt) => codeWorker(rt),
  song: (rt) => songWorker(rt),
  research: (rt) => researchWorker(rt),
  deck: (rt) => deckWorker(rt),
  video: (rt) => videoWorker(rt),
  space: (rt) => spaceWorker(rt),
};

/**
 * Request/reply pools that serve synchronous endpoints (ARCHITECTURE: /images, /images/moonlight,
 * /speech call their pool over RabbitMQ with a deadline). Started like `poolDefinitions`.
 */
export const responderDefinitions: Partial<Record<PoolType, (rt: Runtime) => ResponderDefinition<any, any>>> = {
  image: (rt) => imageResponder(rt),
  extract: (rt) => extractResponder(rt),
  sheet: (rt) => sheetResponder(rt),
  speech: (rt) => speechResponder(rt),
};

/**
 * Plain consumer pools: background work that is neither a job nor request/reply (the drive pool
 * extracts the text of uploaded files). Started like `poolDefinitions` (workers/pool/consumer.ts).
 */
export const consumerDefinitions: Partial<Record<PoolType, (rt: Runtime) => ConsumerDefinition<any>>> = {
  drive: (rt) => driveWorker(rt),
  // Agent runs (issue 12): leased in their run documents, paused runs hold no worker.
  agent: (rt) => agentWorker(rt),
};
