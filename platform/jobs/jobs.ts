/**
 * The job service: one object that the API, the workers and the scheduler share, composed from
 * the parts of a job's life, each in its own file:
 * - jobs.repository.ts: the job document and its state machine (claim, progress, complete, fail,
 *   retry), every move one conditional update;
 * - accept.ts: the API's accept path and its write-behind batches;
 * - outbox.ts: what goes to the broker (job messages, finished-job events, change announcements);
 * - recovery.ts: the sweep that finishes what a crash or an outage left half-done;
 * - envelope.ts: how a job looks from outside (its poll path, its SPEC 2.4 envelope).
 * The parts share one context (context.ts): the dependencies, the batches and the claims held.
 */
import { broker } from '../../contracts/registry';
import { accept, acceptAgain, acceptFromLease, chargeAndPublish, createAcceptBatches } from './accept';
import type { JobsBase, JobsContext, JobsDeps } from './context';
import {
  claim,
  complete,
  create,
  fail,
  findById,
  exists,
  forAccount,
  leaseOf,
  progress,
  renewLease,
  checkpoint,
  scheduleRetry,
} from './jobs.repository';
import { createPublishedMarks, dispatch, publish } from './outbox';
import { releaseSettledMarkers, settleUnpaid, sweep } from './recovery';
export { pollPath, toEnvelope } from './envelope';
export type { JobMessage } from './outbox';

/**
 * The job service of one process (SPEC 3.1): queued → processing → complete | failed. Every
 * method is a function of its part bound to this process's context; `flushAccepted` and `close`
 * write the batches of all parts.
 */
export function createJobs(deps: JobsDeps) {
  const base: JobsBase = {
    deps,
    store: deps.store,
    amqp: deps.amqp,
    credits: deps.credits,
    log: deps.log,
    settleLeaseMs: deps.settleLeaseMs ?? 6000,
    changesExchange: broker.jobChangesExchange(deps.queuePrefix),
    claiming: new Map(),
  };
  const ctx: JobsContext = {
    ...base,
    published: createPublishedMarks(base),
    ...createAcceptBatches(base),
    markerCursor: '',
  };
  const { settled, leaseLedger, published, leases } = ctx;
  return {
    create: create.bind(null, ctx),
    accept: accept.bind(null, ctx),
    chargeAndPublish: chargeAndPublish.bind(null, ctx),
    acceptFromLease: acceptFromLease.bind(null, ctx),
    acceptAgain: acceptAgain.bind(null, ctx),
    publish: publish.bind(null, ctx),
    dispatch: dispatch.bind(null, ctx),
    settleUnpaid: settleUnpaid.bind(null, ctx),
    releaseSettledMarkers: releaseSettledMarkers.bind(null, ctx),
    /**
     * Write what is waiting in the write-behind batches: accepted jobs, lease ledger entries,
     * published-event marks (on stop, and in tests).
     */
    flushAccepted: async () => {
      await Promise.all([settled.flush(), leaseLedger.flush(), published.flush()]);
    },
    /** Write the batches and give back what this process's credit leases did not spend. */
    close: async () => {
      await Promise.all([settled.close(), leaseLedger.close(), published.close()]);
      await leases.close();
    },
    forAccount: forAccount.bind(null, ctx),
    findById: findById.bind(null, ctx),
    exists: exists.bind(null, ctx),
    claim: claim.bind(null, ctx),
    leaseOf: leaseOf.bind(null, ctx),
    renewLease: renewLease.bind(null, ctx),
    checkpoint: checkpoint.bind(null, ctx),
    progress: progress.bind(null, ctx),
    complete: complete.bind(null, ctx),
    fail: fail.bind(null, ctx),
    scheduleRetry: scheduleRetry.bind(null, ctx),
    sweep: sweep.bind(null, ctx),
  };
}
