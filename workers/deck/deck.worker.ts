import { z } from 'zod';
import type { Runtime } from '../../platform/runtime';
import { UnrecoverableError } from '../pool/errors';
import type { PoolDefinition } from '../pool/pool';

export function deckWorker(_rt: Runtime): PoolDefinition<any, any> {
  return { pool: 'deck', input: z.any(), process: async () => { throw new UnrecoverableError('not ready'); } };
}
