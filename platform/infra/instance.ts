import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * This process, as named in leases and claims it holds (`host:pid:random`): job leases, the
 * Idempotency-Key records it runs, the job charges it settles.
 */
export const instanceId = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
