/**
 * What the parts of the job service share: their dependencies, the write-behind batches of the
 * accept path and the outbox, and the settlement claims this process holds. One object, built
 * once by createJobs and handed to every function, so each part is a file of plain functions and
 * none of them reaches another's state except through it.
 */
import type { createCreditLeases, CreditLeaseSettings, Credits } from '../credits/credits';
import type { AmqpClient } from '../infra/amqp';
import type { Logger } from '../infra/log';
import type { JobDoc, Store } from '../infra/mongo';
import type { createWriteBehind } from '../infra/write-behind';

/**
 * The accept path's batches: a lone job's writes follow its answer within 20 ms; under a steady
 * stream the window widens to 100 ms (n items in a batch → the next waits n × 20 ms), so two API
 * processes at a few hundred POSTs a second each send about ten batches a second, not fifty, to
 * the one database server (measured in `npm run bench gateway`, README).
 */
export const WRITE_BEHIND = { maxItems: 200, delayMs: 20, maxDelayMs: 100 };

export interface JobsDeps {
  store: Store;
  amqp: AmqpClient;
  credits: Credits;
  log: Logger;
  publicBaseUrl: string;
  queuePrefix: string;
  /** Claim on a new job's charge settlement (default 6 s, IDEMPOTENCY_LEASE_MS). */
  settleLeaseMs?: number;
  /** Credit leases for accounts with a large balance (default off). */
  creditLeases?: CreditLeaseSettings;
}

/** An accepted job whose ledger entry and marks wait in a batch. */
export interface AcceptedJob {
  job: JobDoc;
  requestId: string | null;
  dispatched: boolean;
}

type WriteBehind<T> = ReturnType<typeof createWriteBehind<T>>;

/** The shared part: the dependencies, and what the batches need before the batches exist. */
export interface JobsBase {
  deps: JobsDeps;
  store: Store;
  amqp: AmqpClient;
  credits: Credits;
  log: Logger;
  /** How long a process's claim to settle a job's charge lasts (the insert takes it). */
  settleLeaseMs: number;
  /** The fanout that tells every API process a job's envelope changed (outbox `announce`). */
  changesExchange: string;
  /**
   * Jobs whose settlement claim (`credits.settling`, owner instanceId) a request of this process
   * holds now, by count: the accept that inserted the job, a settleOne running for it.
   */
  claiming: Map<string, number>;
}

export interface JobsContext extends JobsBase {
  /** `eventPublishedAt` marks of confirmed events (outbox). */
  published: WriteBehind<string>;
  /** Ledger entries and charge marks of accepted jobs (accept path). */
  settled: WriteBehind<AcceptedJob>;
  /** Lease spends and ledger entries of jobs charged from a credit lease (accept path). */
  leaseLedger: WriteBehind<AcceptedJob>;
  leases: ReturnType<typeof createCreditLeases>;
  /** Where releaseSettledMarkers goes on from. */
  markerCursor: string;
}
