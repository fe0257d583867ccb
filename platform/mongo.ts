import { MongoClient } from 'mongodb';
import { createWriteLocks, isFerretDb } from './mongo-locks';
import type { Plan, Scope, CreditOperation, JobType } from '../contracts/registry';
import type { JobStatus } from '../contracts/common';
import type { AccountFeatures } from '../contracts/account';

/** Collection names. WARNING: persisted; renaming one orphans its data. */
export const COLLECTIONS = {
  accounts: 'accounts',
  apiKeys: 'api_keys',
  jobs: 'jobs',
  ledger: 'credit_ledger',
  audit: 'audit_log',
  idempotency: 'idempotency_keys',
  rateLimits: 'rate_limits',
  agenda: 'scheduler_jobs',
  blobBucket: 'blobs',
  projects: 'projects',
  webhooks: 'webhooks',
  webhookDeliveries: 'webhook_deliveries',
  eventOutbox: 'event_outbox',
  deadLetters: 'dead_letters',
  creditHolds: 'credit_holds',
} as const;

export interface AccountDoc {
  _id: string;
  name: string;
  plan: Plan;
  credits: number;
  /** Jobs whose credits were given back (the last 1000): makes refunds idempotent. */
  refundedJobs?: string[];
  /** What was charged (job or hold ids, the last 1000): makes debits idempotent and checkable. */
  chargedRefs?: string[];
  features: AccountFeatures;
  createdAt: Date;
}

export interface ApiKeyDoc {
  _id: string;
  accountId: string;
  name: string;
  /** sha256 of the full key, hex. The key itself is never stored. */
  hash: string;
  prefix: string;
  scopes: Scope[];
  createdAt: Date;
  revokedAt: Date | null;
}

export interface JobDoc {
  _id: string;
  accountId: string;
  type: JobType;
  status: JobStatus;
  rawStatus: string;
  progressMessage: string;
  input: Record<string, unknown>;
  result: Record<string, unknown> | null;
  error: string | null;
  notes: string[];
  credits: { operation: CreditOperation; amount: number; refunded: boolean };
  /** Null until the broker confirmed the message; the sweep publishes undispatched jobs. */
  dispatchedAt: Date | null;
  /** Times a worker claimed the job. */
  attempts: number;
  /** The worker holding the job and until when; an expired lease may be taken over. */
  lease: { owner: string; until: Date } | null;
  /** When the sweep last republished it. */
  sweptAt: Date | null;
  /** The completion event, kept until the broker confirmed it (then eventPublishedAt is set). */
  event?: import('./jobs').JobEvent;
  eventPublishedAt?: Date | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

export interface LedgerDoc {
  _id: string;
  accountId: string;
  kind: 'charge' | 'refund';
  /** Charges: `pending` until the balance moved (see credits.ts). */
  state?: 'pending' | 'applied';
  operation: CreditOperation;
  amount: number;
  jobId: string | null;
  requestId: string | null;
  at: Date;
}

export interface AuditDoc {
  _id: string;
  at: Date;
  accountId: string;
  keyId: string;
  method: string;
  route: string;
  status: number;
  durationMs: number;
  creditsCharged: number;
  requestId: string;
}

export interface IdempotencyDoc {
  _id: string;
  accountId: string;
  key: string;
  route: string;
  bodyHash: string;
  state: 'in_flight' | 'done';
  lockedUntil: Date;
  response: { status: number; body: unknown } | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface RateLimitDoc {
  _id: string;
  count: number;
  expiresAt: Date;
}

/**
 * Connect. `writeLocks`: 'auto' serialises single-document writes only on FerretDB, whose
 * updates are not atomic (see mongo-locks.ts); 'on' / 'off' force it.
 */
export async function connectMongo(url: string, opts: { writeLocks?: 'auto' | 'on' | 'off' } = {}) {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000, maxPoolSize: 50 });
  await client.connect();
  const rawDb = client.db();
  const mode = opts.writeLocks ?? 'auto';
  const locked = mode === 'on' || (mode === 'auto' && (await isFerretDb(rawDb)));
  const db = locked ? createWriteLocks(rawDb).wrapDb(rawDb) : rawDb;
  return {
    client,
    db,
    /** Whether single-document writes go through write locks (FerretDB). */
    writeLocks: locked,
    accounts: db.collection<AccountDoc>(COLLECTIONS.accounts),
    apiKeys: db.collection<ApiKeyDoc>(COLLECTIONS.apiKeys),
    jobs: db.collection<JobDoc>(COLLECTIONS.jobs),
    ledger: db.collection<LedgerDoc>(COLLECTIONS.ledger),
    audit: db.collection<AuditDoc>(COLLECTIONS.audit),
    idempotency: db.collection<IdempotencyDoc>(COLLECTIONS.idempotency),
    rateLimits: db.collection<RateLimitDoc>(COLLECTIONS.rateLimits),
    ping: async () => {
      await db.command({ ping: 1 });
    },
    close: () => client.close(),
  };
}
export type Database = Awaited<ReturnType<typeof connectMongo>>;

/**
 * Indexes every process relies on. Idempotent. TTL and partial indexes are not used: FerretDB
 * 1.24 lacks them, so expiry runs in the scheduler (deleteMany on expiresAt / at).
 */
export async function ensureIndexes(m: Database): Promise<void> {
  await Promise.all([
    m.apiKeys.createIndex({ hash: 1 }, { unique: true }),
    m.apiKeys.createIndex({ accountId: 1 }),
    m.jobs.createIndex({ accountId: 1, createdAt: -1 }),
    m.jobs.createIndex({ status: 1, dispatchedAt: 1 }),
    m.jobs.createIndex({ 'lease.until': 1 }),
    m.ledger.createIndex({ accountId: 1, at: -1 }),
    m.ledger.createIndex({ jobId: 1 }),
    m.ledger.createIndex({ kind: 1, state: 1, at: 1 }),
    m.audit.createIndex({ at: 1 }),
    m.audit.createIndex({ accountId: 1, at: -1 }),
    m.idempotency.createIndex({ expiresAt: 1 }),
    m.rateLimits.createIndex({ expiresAt: 1 }),
    // One slot 0..9 per webhook: the unique index makes the 10-per-account limit race-free.
    m.db.collection(COLLECTIONS.webhooks).createIndex({ accountId: 1, slot: 1 }, { unique: true }),
    m.db.collection(COLLECTIONS.webhooks).createIndex({ accountId: 1, events: 1 }),
    m.db.collection(COLLECTIONS.webhookDeliveries).createIndex({ webhookId: 1, at: -1 }),
    m.db.collection(COLLECTIONS.webhookDeliveries).createIndex({ at: 1 }),
  ]);
}
