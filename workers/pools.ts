import type { PoolType } from '../contracts/registry';
import type { Runtime } from '../platform/runtime';
import type { ConsumerDefinition } from './pool/consumer';
import type { PoolDefinition } from './pool/pool';
import type { ResponderDefinition } from './pool/responder';

/**
 * Every pool is imported when a process runs it, not before: a process started with
 * WORKER_POOLS=code never loads the libraries of the others (sharp, mammoth, pdf.js, ffmpeg
 * wrappers, fontkit, glTF), which keeps its start fast and its memory small.
 */
type Make<D> = (rt: Runtime) => D | Promise<D>;

const modules = {
  code: () => import('./code-builds/code.worker'),
  song: () => import('./songs/song.worker'),
  research: () => import('./research/research.worker'),
  deck: () => import('./presentations/deck.worker'),
  video: () => import('./videos/video.worker'),
  space: () => import('./spaces/space.worker'),
  image: () => import('./images/image.worker'),
  extract: () => import('./extract/extract.worker'),
  sheet: () => import('./sheets/sheet.worker'),
  speech: () => import('./speech/speech.worker'),
  drive: () => import('./drive/drive.worker'),
  agent: () => import('./agents/agent.worker'),
} satisfies Partial<Record<PoolType, () => Promise<unknown>>>;

/** Start loading the pools' modules (while the process connects); errors surface when a pool starts. */
export const preloadPools = (pools: readonly PoolType[]): Promise<unknown> =>
  Promise.all(
    pools.map((p) => (modules as Partial<Record<PoolType, () => Promise<unknown>>>)[p]?.().catch(() => undefined)),
  );

/**
 * The pools this build can run, by type. A pool listed in WORKER_POOLS but absent here has no
 * engine yet: the process logs it and leaves that queue to a deployment that has one.
 */
// biome-ignore lint/suspicious/noExplicitAny: one table of pools with different input and result types; each definition is typed where it is built
export const poolDefinitions: Partial<Record<PoolType, Make<PoolDefinition<any, any>>>> = {
  code: async (rt) => (await modules.code()).codeWorker(rt),
  song: async (rt) => (await modules.song()).songWorker(rt),
  research: async (rt) => (await modules.research()).researchWorker(rt),
  deck: async (rt) => (await modules.deck()).deckWorker(rt),
  video: async (rt) => (await modules.video()).videoWorker(rt),
  space: async (rt) => (await modules.space()).spaceWorker(rt),
};

/**
 * Request/reply pools that serve synchronous endpoints (ARCHITECTURE: /images, /images/moonlight,
 * /speech call their pool over RabbitMQ with a deadline). Started like `poolDefinitions`.
 */
// biome-ignore lint/suspicious/noExplicitAny: one table of responders with different request and reply types; each is typed where it is built
export const responderDefinitions: Partial<Record<PoolType, Make<ResponderDefinition<any, any>>>> = {
  image: async (rt) => (await modules.image()).imageResponder(rt),
  extract: async (rt) => (await modules.extract()).extractResponder(rt),
  sheet: async (rt) => (await modules.sheet()).sheetResponder(rt),
  speech: async (rt) => (await modules.speech()).speechResponder(rt),
};

/**
 * Plain consumer pools: background work that is neither a job nor request/reply (the drive pool
 * extracts the text of uploaded files). Started like `poolDefinitions` (workers/pool/consumer.ts).
 */
// biome-ignore lint/suspicious/noExplicitAny: one table of consumers with different message types; each is typed where it is built
export const consumerDefinitions: Partial<Record<PoolType, Make<ConsumerDefinition<any>>>> = {
  drive: async (rt) => (await modules.drive()).driveWorker(rt),
  // Agent runs: leased in their run documents, paused runs hold no worker.
  agent: async (rt) => (await modules.agent()).agentWorker(rt),
};
