import type { PoolType } from '../contracts/registry';
import type { Runtime } from '../platform/runtime';
import { codeWorker } from './code/code.worker';
import { deckWorker } from './deck/deck.worker';
import { researchWorker } from './research/research.worker';
import { songWorker } from './song/song.worker';
import type { PoolDefinition } from './pool/pool';

/**
 * The pools this build can run, by type. A pool listed in WORKER_POOLS but absent here has no
 * engine yet: the process logs it and leaves that queue to a deployment that has one.
 */
export const poolDefinitions: Partial<Record<PoolType, (rt: Runtime) => PoolDefinition<any, any>>> = {
  code: (rt) => codeWorker(rt),
  song: (rt) => songWorker(rt),
  research: (rt) => researchWorker(rt),
  deck: (rt) => deckWorker(rt),
};
