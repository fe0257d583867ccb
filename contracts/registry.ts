/**
 * The one registry of names that cross process boundaries: job types, id prefixes, queues,
 * exchanges, routing keys, event names and credit operations.
 *
 * WARNING: every value here is persisted (job ids, job documents, queue names in a running
 * broker, events customers subscribe to). Renaming one breaks stored data and live queues.
 * Add new names; never change old ones.
 */

/** Asynchronous job types (SPEC 2.4). WARNING: persisted in job documents. */
export const JOB_TYPES = ['video', 'song', 'code', 'research', 'space', 'deck'] as const;
export type JobType = (typeof JOB_TYPES)[number];

/** Id prefix per job type (SPEC 2.4). WARNING: persisted in job ids handed to clients. */
export const JOB_ID_PREFIX = {
  video: 'vid',
  song: 'song',
  code: 'code',
  research: 'res',
  space: 'space',
  deck: 'deck',
} as const satisfies Record<JobType, string>;

/** Event name stem per job type (SPEC 6.1 emission ties). WARNING: public contract. */
export const JOB_EVENT_NAME = {
  video: 'video',
  song: 'song',
  code: 'code_build',
  research: 'research',
  space: 'space',
  deck: 'presentation',
} as const satisfies Record<JobType, string>;

/** Worker pools (ARCHITECTURE: one pool per type). `WORKER_POOLS` picks from these. */
export const POOL_TYPES = [
  'image',
  'video',
  'song',
  'code',
  'research',
  'space',
  'deck',
  'speech',
  'agent',
  'webhook',
  // Request/reply pools of the workspace: flowchart extraction from documents (PDF,
  // PPTX, OCR of images; CPU-heavy, scaled on its own) and sheet edits by instruction.
  'extract',
  'sheet',
  // Drive: text of uploaded documents, extracted after the upload answered.
  'drive',
] as const;
export type PoolType = (typeof POOL_TYPES)[number];

/**
 * Broker names. WARNING: declared on a live broker; a rename leaves the old queue behind with
 * its messages. `prefix` (config QUEUE_PREFIX) isolates test runs and environments sharing a vhost.
 */
export const broker = {
  /** Work queue of a pool. */
  poolQueue: (prefix: string, pool: PoolType) => `${prefix}svc.pool.${pool}`,
  /** Topic exchange where workers announce `<name>.completed` / `<name>.failed`. */
  eventsExchange: (prefix: string) => `${prefix}svc.events`,
  /** Dead-letter exchange and the queue that keeps poison messages for inspection. */
  deadLetterExchange: (prefix: string) => `${prefix}svc.dead-letter`,
  deadLetterQueue: (prefix: string) => `${prefix}svc.dead-letter`,
  /** Webhook deliveries, one message per (event, webhook); the webhook pool's own pool queue takes events. */
  webhookDeliveryQueue: (prefix: string) => `${prefix}svc.webhook.deliveries`,
  /** Holds a webhook delivery `ms` milliseconds (queue TTL), then dead-letters it back to the delivery queue. */
  webhookDelayQueue: (prefix: string, ms: number) => `${prefix}svc.webhook.delay.${ms}ms`,
  /** Audit entries published by API processes (confirmed before the answer) and written in batches. */
  auditQueue: (prefix: string) => `${prefix}svc.audit`,
  /** Fanout of key and account changes; every API process drops what it cached for them. */
  authExchange: (prefix: string) => `${prefix}svc.auth.invalidations`,
  /** Fanout of job state changes; every API process drops the in-flight job it cached (platform/jobs/job-cache.ts). */
  jobChangesExchange: (prefix: string) => `${prefix}svc.jobs.changes`,
} as const;

/**
 * Operations that cost credits; prices come from config (CREDIT_PRICES).
 * WARNING: persisted in the credit ledger.
 */
export const CREDIT_OPERATIONS = [
  'code_build',
  'image',
  'image_moonlight',
  'video_standard',
  'video_premium',
  'song',
  'research',
  'space_preview',
  'space_full',
  'deck',
  'speech_char',
  'live_session',
  'live_action',
  'agent_run',
  'chat_turn',
  'extract_flowchart',
  'sheet_edit',
] as const;
export type CreditOperation = (typeof CREDIT_OPERATIONS)[number];

/** Default credit prices (SPEC: "not shown"; ours). A premium video costs several standard ones. */
export const DEFAULT_CREDIT_PRICES: Record<CreditOperation, number> = {
  code_build: 5,
  image: 2,
  image_moonlight: 1,
  video_standard: 20,
  video_premium: 80,
  song: 10,
  research: 10,
  space_preview: 20,
  space_full: 40,
  deck: 15,
  speech_char: 0.01,
  live_session: 5,
  live_action: 1,
  agent_run: 5,
  chat_turn: 1,
  extract_flowchart: 3,
  sheet_edit: 1,
};

/** Plans (SPEC 5.4): only Pro and Teams reach the API. WARNING: persisted on accounts. */
export const PLANS = ['free', 'pro', 'teams'] as const;
export type Plan = (typeof PLANS)[number];
export const API_PLANS: readonly Plan[] = ['pro', 'teams'];

/** Key scopes (SPEC 5.3). WARNING: persisted on keys. */
export const SCOPES = ['read', 'write', 'ai', 'drive:read', 'drive:write'] as const;
export type Scope = (typeof SCOPES)[number];
