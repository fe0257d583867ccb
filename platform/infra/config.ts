import { z } from 'zod';
import {
  CREDIT_OPERATIONS,
  DEFAULT_CREDIT_PRICES,
  POOL_TYPES,
  type CreditOperation,
  type PoolType,
} from '../../contracts/registry';

const DEV_SECRET = 'dev-only-secret-change-me-0123456789abcdef';
const DEV_WEBHOOK_KEY = 'dev-only-webhook-secret-key-change-me-0123456789';

/** `1000,3000`: delays in ms before each retry of a webhook delivery. */
const msList = z.string().transform((v, ctx) => {
  const out = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
  if (out.length > 10 || out.some((n) => !Number.isInteger(n) || n < 1 || n > 3_600_000)) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be a comma-separated list of at most 10 delays in ms, each 1 to 3600000',
    });
  }
  return out;
});

/** The URLs of an AMQP_URL list, as platform/infra/amqp-nodes.ts amqpUrls splits it (config stays free of the client's imports). */
const amqpUrlList = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const isAmqpUrl = (v: string) => {
  try {
    const u = new URL(v);
    return (u.protocol === 'amqp:' || u.protocol === 'amqps:') && u.hostname !== '';
  } catch {
    return false;
  }
};

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

const poolList = z.string().transform((v, ctx) => {
  const names = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 1 && names[0] === 'all') return [...POOL_TYPES];
  for (const n of names) {
    if (!(POOL_TYPES as readonly string[]).includes(n))
      ctx.addIssue({ code: 'custom', message: `unknown pool "${n}"; pools are ${POOL_TYPES.join(', ')}` });
  }
  return names as PoolType[];
});

/** `code=2,video=1`: concurrency per pool. */
const poolConcurrency = z.string().transform((v, ctx) => {
  const out: Partial<Record<PoolType, number>> = {};
  for (const part of v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, n] = part.split('=');
    const count = Number(n);
    if (!name || !(POOL_TYPES as readonly string[]).includes(name) || !Number.isInteger(count) || count < 1) {
      ctx.addIssue({ code: 'custom', message: `"${part}" is not pool=count with a known pool and a positive integer` });
      continue;
    }
    out[name as PoolType] = count;
  }
  return out;
});

const creditPrices = z.string().transform((v, ctx) => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object of operation: price' });
    return z.NEVER;
  }
  // A whole number of millicredits (at most 3 decimals): balances are kept in them (platform/credits/units.ts).
  const millicredits = (v: number) => Math.abs(v * 1000 - Math.round(v * 1000)) < 1e-6;
  const r = z.partialRecord(z.enum(CREDIT_OPERATIONS), z.number().min(0).refine(millicredits)).safeParse(parsed);
  if (!r.success) {
    ctx.addIssue({
      code: 'custom',
      message: `must map operations (${CREDIT_OPERATIONS.join(', ')}) to non-negative numbers of at most 3 decimals`,
    });
    return z.NEVER;
  }
  return r.data as Partial<Record<CreditOperation, number>>;
});

/** Every configuration key, with its default and what it does. */
export const ConfigSchema = z.object({
  NODE_ENV: z
    .enum(['development', 'test', 'production'])
    .default('development')
    .describe('production refuses development secrets and loopback webhook targets.'),
  LOG_LEVEL: z
    .enum(['debug', 'info', 'warn', 'error', 'silent'])
    .default('info')
    .describe(
      'Minimum level written as JSON lines (pino): info writes one access line per request; debug adds detail.',
    ),
  LOG_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Append the log to this file instead of stdout (the test suite collects a whole run in one file). Default: stdout.',
    ),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080).describe('API port; 0 picks a free one (tests).'),
  API_PROCESSES: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(1)
    .describe(
      'API processes npm start runs behind PORT: the supervisor accepts the connections and hands each to the next ready API process. A crashed one is started again at once.',
    ),
  API_HOLD_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(600_000)
    .default(15_000)
    .describe(
      'npm start: how long a connection waits in the supervisor while no API process is ready (one crashed and is being replaced) before it is answered 503 with Retry-After.',
    ),
  API_HOLD_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000)
    .default(1024)
    .describe(
      'npm start: most connections held while no API process is ready; past it a new connection is answered 503 at once.',
    ),
  HTTP_HEADERS_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(300_000)
    .default(60_000)
    .describe(
      "How long the API waits for a request's headers before it answers 408 request_timeout and closes the connection (the whole request has 300 s).",
    ),
  PUBLIC_BASE_URL: z
    .string()
    .url()
    .optional()
    .describe('Absolute origin for public links (assets, openUrl). Default http://localhost:PORT.'),
  MONGODB_URL: z
    .string()
    .default('mongodb://127.0.0.1:27017/svc')
    .describe('MongoDB (or FerretDB) connection string, database included.'),
  MONGODB_MAX_POOL_SIZE: z.coerce
    .number()
    .int()
    .min(1)
    .max(500)
    .default(20)
    .describe(
      'Most MongoDB connections one process opens (driver maxPoolSize). FerretDB serves each command on one of its 50 PostgreSQL connections, shared by every process.',
    ),
  MONGODB_SERVER_SELECTION_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(500)
    .max(120_000)
    .default(5000)
    .describe(
      "How long an operation waits for a usable MongoDB server (driver serverSelectionTimeoutMS) before it fails. The API does not wait it out while the database is known to be away (it answers 503 at once, platform/infra/db-health.ts); raise it where a replica set's elections take longer (MongoDB's own default is 30000), lower it to fail faster.",
    ),
  AMQP_URL: z
    .string()
    .default('amqp://guest:guest@127.0.0.1:5672')
    .refine(
      (v) => amqpUrlList(v).length > 0 && amqpUrlList(v).every(isAmqpUrl),
      'must be an amqp:// or amqps:// URL, or a comma-separated list of them (the nodes of a cluster)',
    )
    .describe(
      'RabbitMQ connection string, or the nodes of a cluster as a comma-separated list of them (amqp://u:p@node1:5672,amqp://u:p@node2:5672,…): a process connects to the first that answers and, when that connection dies, to the next (round robin with backoff), declares its queues again, resumes its consumers and re-sends the publishes whose confirm was outstanding.',
    ),
  AMQP_HEARTBEAT_S: z.coerce
    .number()
    .int()
    .min(1)
    .max(60)
    .default(5)
    .describe(
      'AMQP heartbeat asked for on every RabbitMQ connection, in seconds (it overrides a heartbeat in AMQP_URL; the broker may lower it). A node that stops answering with the TCP connection still open (stalled, or a network path that drops packets silently) is noticed once two heartbeat intervals pass without a frame from it (so within two to three heartbeats), then the process reconnects, to the next node of AMQP_URL first.',
    ),
  QUEUE_TYPE: z
    .enum(['quorum', 'classic'])
    .default('quorum')
    .describe(
      'Queue type for pool queues. quorum survives node loss and enforces the delivery limit; classic is faster on one node. Changing it needs new queue names (QUEUE_PREFIX).',
    ),
  QUEUE_PREFIX: z
    .string()
    .default('')
    .describe('Prefix for every queue and exchange name; isolates test runs sharing a broker.'),
  DELIVERY_LIMIT: z.coerce
    .number()
    .int()
    .min(1)
    .default(10)
    .describe('Quorum queues dead-letter a message redelivered more than this many times (poison message).'),
  PUBLISH_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(3000)
    .describe('How long a publish may wait for the broker confirm before the job is left for the sweep.'),
  JOB_MAX_ATTEMPTS: z.coerce
    .number()
    .int()
    .min(1)
    .default(3)
    .describe('Attempts a job gets (crashes and transient errors) before it fails and is refunded.'),
  JOB_LEASE_MS: z.coerce
    .number()
    .int()
    .min(500)
    .default(6_000)
    .describe(
      'A worker holds a job this long and renews it every third of it while working. When a worker dies, the broker redelivers its messages at once and the next worker takes the job as soon as the lease runs out (so within this long); the sweep covers the rest.',
    ),
  JOB_RETRY_DELAY_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(5_000)
    .describe('Delay before a job that hit a transient error is tried again.'),
  DISPATCH_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(5_000)
    .describe(
      "An undispatched job younger than this is left to the API that created it; older ones are published by the sweep. Keep it well above 100 ms (the accept batches' longest window): below that the sweep republishes jobs whose dispatch record is still on its way (workers drop the duplicates).",
    ),
  SWEEP_INTERVAL: z
    .string()
    .default('10 seconds')
    .describe('How often the scheduler sweeps undispatched and stalled jobs (Agenda interval).'),
  SCHEDULER_PROCESS_EVERY_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(5000)
    .describe('How often Agenda looks for due scheduler tasks, in milliseconds.'),
  JOB_CACHE_ENTRIES: z.coerce
    .number()
    .int()
    .min(0)
    .default(10_000)
    .describe(
      'Queued and processing jobs each API process keeps for GET /jobs/{id} (no database read while a poller asks again); every state change reaches every API process at once over a RabbitMQ fanout, and the cache is dropped while that fanout is interrupted. 0 turns it off.',
    ),
  JOB_CACHE_FINISHED_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(64 * 1024 * 1024)
    .describe(
      'Bytes of finished (complete or failed) jobs each API process keeps for GET /jobs/{id}, least recently used dropped first: a finished job never changes, so it is kept without expiry and while the job-changes fanout is interrupted. 0 turns it off.',
    ),
  JOB_CACHE_TTL_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(10_000)
    .describe(
      'Backstop of the job cache: an entry is read again after this long, whatever was announced (bounds staleness only if a worker lost its broker right after a database write).',
    ),
  JOB_EVENTS_HEARTBEAT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(15_000)
    .describe(
      'GET /jobs/{id}/events: a `: heartbeat` comment this often on an idle stream (keeps proxies from closing it), and the job read again then, whatever was announced.',
    ),
  JOB_EVENT_STREAMS_MAX: z.coerce
    .number()
    .int()
    .min(0)
    .default(10_000)
    .describe(
      'Open GET /jobs/{id}/events streams and Prefer: wait requests each API process holds; one more answers 503 service_unavailable with Retry-After.',
    ),
  AUTH_CACHE_TTL_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(60_000)
    .describe(
      'API processes cache keys and accounts this long at most; revocations, scope, plan and feature changes reach every process at once over a RabbitMQ fanout, and the cache is dropped while that fanout is interrupted. 0 still caches between invalidations for no time (reads every request).',
    ),
  RATE_LIMIT_MAX: z.coerce.number().int().min(1).default(600).describe('Requests per key per window.'),
  RATE_LIMIT_WINDOW_SECONDS: z.coerce.number().int().min(1).default(60).describe('Rate-limit window length.'),
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(16 * 1024 * 1024)
    .describe('Largest JSON body accepted (413 beyond). 16 MiB fits the largest SPEC upload (10 MB decoded, base64).'),
  AUDIT_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .default(90)
    .describe('Audit entries older than this are deleted by the scheduler.'),
  IDEMPOTENCY_TTL_HOURS: z.coerce
    .number()
    .min(24)
    .default(24)
    .describe('How long Idempotency-Key records are kept (at least 24 h).'),
  IDEMPOTENCY_LEASE_MS: z.coerce
    .number()
    .int()
    .min(600)
    .default(6_000)
    .describe(
      'An in-flight Idempotency-Key record is leased to the API process running it, which renews the lease every third of this; when that process dies, a retry takes the record over once the lease ran out (so within this long).',
    ),
  CREDIT_LEASE_CREDITS: z.coerce
    .number()
    .min(0)
    .default(1000)
    .describe(
      'Credits an API process takes from an account at once (a lease, one conditional update) to charge job POSTs from in memory, so a job POST makes no account update; the job names its lease and the unspent part goes back when the lease ends. 0: every job is charged with its own conditional update.',
    ),
  CREDIT_LEASE_MIN_BALANCE: z.coerce
    .number()
    .min(0)
    .default(10_000)
    .describe(
      'A credit lease is taken only while the account keeps at least this many credits besides; below it every charge is its own conditional update, exact to the last credit.',
    ),
  CREDIT_LEASE_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30_000)
    .describe(
      'Life of a credit lease. Its process stops spending from it a quarter before (at most 5 s before) and gives back the unspent part; the scheduler settles, from the jobs that name it, a lease whose process died.',
    ),
  CREDIT_PRICES: creditPrices
    .optional()
    .describe(
      'JSON object overriding credit prices per operation (at most 3 decimals: balances are kept in whole millicredits).',
    ),
  ASSET_SIGNING_SECRET: z
    .string()
    .min(32)
    .default(DEV_SECRET)
    .describe('HMAC key for public asset links; the same on every process. Required in production.'),
  ASSET_URL_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(7 * 24 * 3600)
    .describe('Validity of signed links to generated media.'),
  WORKER_POOLS: poolList.default([...POOL_TYPES]).describe('Comma-separated pools this worker process runs, or "all".'),
  POOL_CONCURRENCY: poolConcurrency
    .default({})
    .describe('Per-pool concurrency, e.g. "code=4,video=1" (RabbitMQ prefetch). Default 2.'),
  DEFAULT_POOL_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .default(2)
    .describe('Concurrency of pools not named in POOL_CONCURRENCY.'),
  METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(9464)
    .describe(
      "Port of the API's GET /metrics (every API process's metrics, gathered by the supervisor under npm start; the process's own when the API runs alone). Prometheus scrapes it inside the cluster: never expose it publicly. 0: no metrics listener.",
    ),
  METRICS_HOST: z
    .string()
    .min(1)
    .default('0.0.0.0')
    .describe(
      'Address the METRICS_PORT listener binds (all interfaces, so Prometheus can scrape the pod; 127.0.0.1 keeps it on the machine).',
    ),
  METRICS_ON_API_PORT: bool
    .default(false)
    .describe(
      'Also answer GET /metrics on the API port (PORT). Off: that path answers 404 like any unknown path, so whoever reaches the API cannot read the metrics.',
    ),
  WORKER_METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(9101)
    .describe('Port of the worker process /metrics, /healthz, /readyz.'),
  SCHEDULER_METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(9102)
    .describe('Port of the scheduler process /metrics, /healthz, /readyz.'),
  SHUTDOWN_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(30_000)
    .describe('How long a stopping worker waits for jobs in flight before it leaves them to redelivery.'),
  CODE_ENGINE: z
    .enum(['local', 'openai', 'bench-no-work'])
    .default('local')
    .describe(
      "Code-build engine: local templates, or an OpenAI-compatible chat API. bench-no-work is for benchmarks only: a job completes as soon as it is claimed, nothing built or stored (the pipeline's own cost).",
    ),
  OPENAI_BASE_URL: z
    .string()
    .url()
    .default('https://api.openai.com/v1')
    .describe('Base URL of an OpenAI-compatible provider.'),
  OPENAI_API_KEY: z.string().optional().describe('Key for the OpenAI-compatible provider.'),
  OPENAI_MODEL: z.string().default('gpt-4o-mini').describe('Model name for the OpenAI-compatible code engine.'),
  CHAT_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      'Assistant engine for POST /chat and agent runs: local (offline planner, deterministic) or an OpenAI-compatible chat-completions API (OPENAI_BASE_URL, OPENAI_API_KEY, CHAT_MODEL), streamed.',
    ),
  CHAT_MODEL: z.string().optional().describe('Model name for the OpenAI-compatible chat engine. Default OPENAI_MODEL.'),
  CHAT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(60_000)
    .describe(
      'Time limit of one engine step (first byte to last) of a chat turn or agent run; past it the turn ends with an error chunk and a refund.',
    ),
  CHAT_KEEPALIVE_MS: z.coerce
    .number()
    .int()
    .min(50)
    .default(10_000)
    .describe(
      'Interval of ":" keepalive comments on POST /chat and /chat/completions streams while tools or agents work (SPEC: at least every 15 s).',
    ),
  AGENT_RUN_WAIT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(120_000)
    .describe(
      'How long POST /chat/completions waits for its agent run to complete or pause before it answers 504 (the run goes on; its resultUrl tells).',
    ),
  SONG_ENGINE: z
    .enum(['local', 'elevenlabs'])
    .default('local')
    .describe(
      'Song engine: local (offline PCM synthesiser, WAV) or the ElevenLabs Music API (MP3) at ELEVENLABS_BASE_URL.',
    ),
  ELEVENLABS_BASE_URL: z
    .string()
    .url()
    .default('https://api.elevenlabs.io')
    .describe('Base URL of the ElevenLabs API (POST /v1/music).'),
  ELEVENLABS_API_KEY: z.string().optional().describe('Key for the ElevenLabs API (xi-api-key header).'),
  ELEVENLABS_MUSIC_MODEL: z.string().default('music_v1').describe('model_id sent to the ElevenLabs Music API.'),
  RESEARCH_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      'Research report writer: local (extractive, offline) or an OpenAI-compatible chat API (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL) over the workspace sources found.',
    ),
  SPACE_ROOM_ENGINE: z
    .enum(['none', 'local', 'remote'])
    .default('local')
    .describe(
      'Room engine for imageUrls / videoUrl spaces. local: local-room-v1 on the space pool (phase-correlation stitching, box room, SPZ, GLB collider). remote: a hosted world-generation provider at SPACE_PROVIDER_BASE_URL. none: such requests answer 503 room_engine_unavailable before any charge.',
    ),
  SPACE_PHOTO_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(20 * 1024 * 1024)
    .describe('Largest photo a one-photo space fetches (bytes); a larger one fails the job (refunded).'),
  SPACE_DEFAULT_FOV_DEG: z.coerce
    .number()
    .min(20)
    .max(150)
    .default(65)
    .describe(
      'Horizontal field of view assumed for a space photo without EXIF FocalLengthIn35mmFormat, and for the frames of a room video.',
    ),
  SPACE_CAMERA_HEIGHT_M: z.coerce
    .number()
    .min(0.3)
    .max(3)
    .default(1.5)
    .describe(
      "Camera height above the floor assumed for a one-photo space and a local room (sets the metric scale; a room's metricScale and floorOffsetM).",
    ),
  RESEARCH_MAX_SOURCES: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(8)
    .describe('Most workspace sources a research job reads.'),
  DECK_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      'Deck outline author: local (from the brief, offline) or an OpenAI-compatible chat API (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). Slides are always rendered locally as PNG.',
    ),
  IMAGE_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      'Renderer behind POST /images: local (procedural PNG, offline, deterministic) or an OpenAI-compatible images API (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_IMAGE_MODEL).',
    ),
  OPENAI_IMAGE_MODEL: z.string().default('gpt-image-1').describe('Model name for the OpenAI-compatible image engine.'),
  SHEET_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      'Sheet-edit engine behind POST /sheets/{id}/edit: local (rule-based, offline) or an OpenAI-compatible chat API (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL) that answers JSON ops.',
    ),
  SPEECH_ENGINE: z
    .enum(['local', 'openai'])
    .default('local')
    .describe(
      "Speech synthesiser behind POST /speech: local (espeak-ng, offline, resampled to 24 kHz in process) or an OpenAI-compatible audio speech API (OPENAI_BASE_URL, OPENAI_API_KEY, SPEECH_MODEL; response_format pcm). The voice catalogue (GET /speech/voices) is the chosen engine's; API and speech pool must agree.",
    ),
  SPEECH_MODEL: z.string().default('gpt-4o-mini-tts').describe('Model name for the OpenAI-compatible speech engine.'),
  SPEECH_RPC_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(30_000)
    .describe(
      'Deadline of one POST /speech call, request to last audio byte. Before the first byte a miss answers 504 timeout (nothing charged); after it the stream is cut (charged).',
    ),
  LIVE_TOKEN_SECRET: z
    .string()
    .min(32)
    .optional()
    .describe(
      'HMAC key for live session tokens and resumption handles (POST /live/session); the same on every API process. Default: ASSET_SIGNING_SECRET (signed messages are kept apart by a prefix).',
    ),
  LIVE_TOKEN_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(10)
    .max(3600)
    .default(300)
    .describe('How long a live session token may be used to connect to the realtime engine (it is single-use).'),
  LIVE_RESUME_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(3600)
    .describe(
      'How long a resumption handle stays valid after the realtime engine sent it (only the newest handle of a session is valid).',
    ),
  LIVE_TRANSCRIPTION_ENGINE: z
    .enum(['none', 'openai'])
    .default('none')
    .describe(
      'Speech recognition of live audio turns: none (offline: text turns only, capabilities.audioIn false) or an OpenAI-compatible /audio/transcriptions API (LIVE_TRANSCRIPTION_BASE_URL or OPENAI_BASE_URL, OPENAI_API_KEY, LIVE_TRANSCRIPTION_MODEL).',
    ),
  LIVE_TRANSCRIPTION_BASE_URL: z
    .string()
    .url()
    .optional()
    .describe('Base URL of the OpenAI-compatible transcription provider; default OPENAI_BASE_URL.'),
  LIVE_TRANSCRIPTION_MODEL: z
    .string()
    .default('gpt-4o-mini-transcribe')
    .describe('Model name for the OpenAI-compatible transcription engine.'),
  LIVE_TRANSCRIPTION_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(30_000)
    .describe('Deadline of one transcription of a live audio turn.'),
  LIVE_CLIENT_TOOL_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(15_000)
    .describe(
      "How long the realtime engine waits for a client-run tool's tool_result before answering the assistant that the tool timed out.",
    ),
  LIVE_HEARTBEAT_MS: z.coerce
    .number()
    .int()
    .min(50)
    .default(10_000)
    .describe(
      'How often each API process records, in one batched update, that its realtime connections are alive (live_sessions.lastSeenAt), and notices sessions a connection of another process took over (closed 4409).',
    ),
  LIVE_STALE_AFTER_MS: z.coerce
    .number()
    .int()
    .min(200)
    .default(60_000)
    .describe(
      'A connected live session whose lastSeenAt is older than this (its API process died) is marked dropped by the scheduler (it can then be resumed by its handle). Keep it several LIVE_HEARTBEAT_MS.',
    ),
  LIVE_MAX_BUFFERED_BYTES: z.coerce
    .number()
    .int()
    .min(65_536)
    .default(1_048_576)
    .describe(
      "Bound on a realtime connection's unsent bytes (ws bufferedAmount): past it the rest of the assistant's audio for that turn is skipped and the client is told (error event backpressure); any event sent while more than this plus 256 KiB is unsent closes the connection (1008).",
    ),
  LIVE_SESSION_MAX_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(1_800_000)
    .describe(
      'Lifetime of one live session (5 credits), counted from when it was opened, connected or not: then the connection closes (4429 "session limit reached") and resuming it answers session_ended. Open a new session to go on.',
    ),
  LIVE_SESSION_MAX_TURNS: z.coerce
    .number()
    .int()
    .min(1)
    .default(200)
    .describe(
      'Turns (answered user turns) one live session may take; the next closes the connection (4429 "session limit reached") and resuming it answers session_ended.',
    ),
  LIVE_TURNS_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .default(20)
    .describe(
      'Turns per minute per account in one API process (a token bucket holding at most min(5, this) turns, refilled evenly); a turn past it is answered with error rate_limited and not run.',
    ),
  LIVE_AUTH_RECHECK_MS: z.coerce
    .number()
    .int()
    .min(50)
    .default(30_000)
    .describe(
      "How long the realtime engine trusts its last check of a session's key and account: on the heartbeat after this, a revoked key, a key without the ai scope, or an account without API access closes the connection (4403). Changes made in this process are seen on the next heartbeat.",
    ),
  ESPEAK_NG_PATH: z
    .string()
    .default('espeak-ng')
    .describe('espeak-ng binary (local speech engine; Debian package espeak-ng, installed by scripts/services.sh).'),
  SHEET_RPC_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(30_000)
    .describe(
      'How long POST /sheets/{id}/edit waits for the sheet pool before answering 504 timeout (nothing is charged).',
    ),
  EXTRACT_RPC_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(60_000)
    .describe(
      'How long POST /extract-flowchart waits for the extract pool (PDF, PPTX, OCR) before answering 504 timeout (nothing is charged).',
    ),
  EXTRACT_OCR_LANGUAGES: z
    .string()
    .regex(/^[a-z_]{3,}(\+[a-z_]{3,})*$/)
    .default('eng')
    .describe(
      'tesseract languages for reading images (POST /extract-flowchart), e.g. eng or eng+deu; each needs its Debian tesseract-ocr-<lang> package.',
    ),
  DRIVE_QUOTA_BYTES: z
    .string()
    .default('{"free":1073741824,"pro":10737418240,"teams":107374182400}')
    .transform((s, ctx) => {
      try {
        const v = JSON.parse(s) as Record<string, unknown>;
        for (const plan of ['free', 'pro', 'teams'])
          if (!Number.isSafeInteger(v[plan]) || (v[plan] as number) < 0) throw new Error(plan);
        return v as Record<'free' | 'pro' | 'teams', number>;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object of byte quotas for free, pro and teams' });
        return z.NEVER;
      }
    })
    .describe(
      'Drive storage quota per plan in bytes, JSON (default 1 GiB free, 10 GiB pro, 100 GiB teams). An upload past it answers 413 storage_quota_exceeded.',
    ),
  DRIVE_LINK_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(10)
    .max(3600)
    .default(900)
    .describe('Validity of Drive download links (downloadUrl and the /content redirect), about 15 minutes by SPEC.'),
  DRIVE_TRASH_DAYS: z.coerce
    .number()
    .min(0)
    .default(30)
    .describe('Days a trashed Drive file can be restored; then the scheduler purges its bytes, text and record.'),
  DRIVE_TEXT_STORED_CHARS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(200_000)
    .describe(
      'Characters of extracted text kept per Drive file (search indexes these; GET …/text answers about 12K of them).',
    ),
  DRIVE_TEXT_INFLATED_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(100 * 1024 * 1024)
    .describe(
      'Bytes a DOCX or XLSX (a ZIP) may really inflate to in all before the drive pool reads it (mammoth, the XLSX reader); past it the text is failed (a ZIP bomb).',
    ),
  IMAGE_RPC_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(60_000)
    .describe(
      'How long POST /images and /images/moonlight wait for the image pool before answering 504 timeout (the request also expires in the queue).',
    ),
  MOONLIGHT_ADULT_THRESHOLD: z.coerce
    .number()
    .min(0)
    .max(1)
    .default(0.8)
    .describe(
      'Output safety: a moonlight render whose skin-tone pixel share reaches this is scored adult and refused with 403 (workers/engines/images/safety.ts; 0 refuses everything).',
    ),
  INPUT_FETCH_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(600_000)
    .default(20_000)
    .describe(
      'How long a worker waits for the server of an input URL (imageUrl, imageUrls, videoUrl, openingFrameUrl, referenceImageUrls, brandUrl) to start answering; past it the attempt fails with "<field>: no answer within N s" (tried again like any transient error).',
    ),
  REFERENCE_IMAGE_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(10 * 1024 * 1024)
    .describe('Largest reference image fetched for images and videos.'),
  VIDEO_ENGINE: z
    .enum(['local', 'remote'])
    .default('local')
    .describe(
      'Video renderer: local (ffmpeg, offline) or a remote OpenAI-compatible videos API (create, poll, download) at VIDEO_PROVIDER_BASE_URL.',
    ),
  VIDEO_PROVIDER_BASE_URL: z
    .string()
    .url()
    .default('https://api.openai.com/v1')
    .describe('Base URL of the remote video provider (POST /videos, GET /videos/{id}, GET /videos/{id}/content).'),
  VIDEO_PROVIDER_API_KEY: z.string().optional().describe('Key for the remote video provider.'),
  VIDEO_PROVIDER_MODEL: z.string().default('sora-2').describe('Model name sent to the remote video provider.'),
  VIDEO_PROVIDER_POLL_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(2000)
    .describe('Poll interval of the remote video provider.'),
  VIDEO_RENDER_SCALE: z.coerce
    .number()
    .gt(0)
    .max(1)
    .default(1)
    .describe(
      'Local video engine only: scale of frame size and clip length (tests and demos render small, short clips). The result always reports the real size and duration of the file produced.',
    ),
  FFMPEG_PATH: z.string().default('ffmpeg').describe('ffmpeg binary (video rendering, posters).'),
  FFPROBE_PATH: z
    .string()
    .default('ffprobe')
    .describe('ffprobe binary (reads the real size and duration of rendered videos).'),
  ALLOW_LOOPBACK_URLS: bool
    .default(false)
    .describe(
      'DEVELOPMENT AND TESTS ONLY: let the SSRF guard fetch loopback URLs (and plain http to them). Refused in production.',
    ),
  WEBHOOK_SECRET_KEY: z
    .string()
    .min(32)
    .default(DEV_WEBHOOK_KEY)
    .describe(
      'Key (any string of 32+ characters; SHA-256 derives the AES key) that encrypts webhook signing secrets at rest with AES-256-GCM; the same on every process. Required in production. Changing it makes existing secrets unreadable.',
    ),
  WEBHOOK_ATTEMPT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(5000)
    .describe('Time limit of one webhook delivery attempt, connect to last response byte (SPEC 6.4: 5 s).'),
  WEBHOOK_RETRY_DELAYS_MS: msList
    .default([1000, 3000])
    .describe('Delays before each retry of a failed delivery, comma-separated (SPEC 6.4: "1000,3000", two retries).'),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce
    .number()
    .int()
    .min(1)
    .default(5)
    .describe('Consecutive failed deliveries (each after its retries) that disable a webhook (SPEC 6.4: 5).'),
  WEBHOOK_DELIVERY_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .default(32)
    .describe('Delivery attempts one webhook worker process runs at once (RabbitMQ prefetch of the delivery queue).'),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .default(16)
    .describe(
      'Attempts to one webhook a worker process runs at once (default half of WEBHOOK_DELIVERY_CONCURRENCY); further deliveries to it wait 500 ms in a delay queue, so a slow or dead endpoint cannot take every slot.',
    ),
  WEBHOOK_DELIVERY_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .default(30)
    .describe('Delivery-attempt records older than this are deleted by the scheduler.'),
  // --- Spaces: room engine, video, remote world-generation adapter ---
  SPACE_VIDEO_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(104_857_600)
    .describe('Largest video a room space fetches (bytes, SPEC 8: 100 MB); a larger one fails the job (refunded).'),
  SPACE_VIDEO_MAX_SECONDS: z.coerce
    .number()
    .min(1)
    .default(30)
    .describe(
      'Longest video a room space accepts (seconds, read with ffprobe; SPEC 8: 30); a longer one fails the job (refunded).',
    ),
  SPACE_VIDEO_FRAMES: z.coerce
    .number()
    .int()
    .min(2)
    .max(16)
    .default(12)
    .describe('Frames the room engine samples evenly from a video (ffmpeg fps filter, at most 640 px wide).'),
  SPACE_PROVIDER_BASE_URL: z
    .string()
    .url()
    .optional()
    .describe(
      'Base URL of the hosted world-generation provider used when SPACE_ROOM_ENGINE=remote (POST /v1/worlds, GET /v1/worlds/{id}; see README "Real-world spaces").',
    ),
  SPACE_PROVIDER_API_KEY: z
    .string()
    .optional()
    .describe('Bearer key for the world-generation provider (sent as Authorization; never logged).'),
  SPACE_PROVIDER_POLL_MS: z.coerce
    .number()
    .int()
    .min(50)
    .default(5000)
    .describe('Interval between status polls of a world-generation provider job.'),
  SPACE_PROVIDER_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(900_000)
    .describe('How long a space job waits for the world-generation provider before the job fails (refunded).'),
  SPACE_PROVIDER_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(200 * 1024 * 1024)
    .describe('Largest asset (splat, collider, panorama) downloaded from the world-generation provider (bytes).'),
  // --- [end:spaces-rooms] ---
  // --- Media: codecs, slides ---
  // --- [end:media-slides] ---
  // --- Images: scene renderer, remote moonlight adapter ---
  MOONLIGHT_ENGINE: z
    .enum(['local', 'remote'])
    .default('local')
    .describe(
      'Model behind POST /images/moonlight: local (moonlight-scene-v2, the offline scene composer, deterministic) or remote (a self-hosted diffusion server at MOONLIGHT_REMOTE_URL speaking MOONLIGHT_REMOTE_PROTOCOL). Prompt refusals and the output safety scorer apply to both.',
    ),
  MOONLIGHT_REMOTE_URL: z
    .string()
    .url()
    .optional()
    .describe(
      'Base URL of the self-hosted diffusion server (required when MOONLIGHT_ENGINE=remote), e.g. http://diffusion.internal:8000/v1. Operator configuration: not subject to the SSRF guard.',
    ),
  MOONLIGHT_REMOTE_API_KEY: z
    .string()
    .optional()
    .describe('Bearer token sent to the diffusion server, if it wants one.'),
  MOONLIGHT_REMOTE_PROTOCOL: z
    .enum(['openai', 'minimal'])
    .default('openai')
    .describe(
      'openai: POST {url}/images/generations (OpenAI images API, b64_json, with seed, steps and guidance_scale); minimal: POST {url}/generate {prompt, width, height, steps, guidance, seed} answering image/png.',
    ),
  MOONLIGHT_REMOTE_MODEL: z
    .string()
    .default('moonlight')
    .describe('Model name sent with the openai protocol; results report engine remote:<this>.'),
  MOONLIGHT_REMOTE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(50_000)
    .describe(
      'Deadline of one call to the diffusion server; past it the render answers 504 timeout (uncharged). Keep it below IMAGE_RPC_TIMEOUT_MS.',
    ),
  // --- [end:media-images] ---
  // --- MCP server ---
  // --- [end:mcp] ---
  // --- Developer console ---
  CONSOLE_LINK_TTL_MINUTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(1440)
    .default(15)
    .describe(
      'How long a developer console sign-in link (npm run console:link) stays valid, in minutes; each link works once.',
    ),
  CONSOLE_SESSION_TTL_HOURS: z.coerce
    .number()
    .min(0.1)
    .max(720)
    .default(12)
    .describe(
      'Developer console session lifetime in hours, sliding: every page view extends it; an idle session ends after this long.',
    ),
  // --- [end:console] ---
  // --- Operations pack ---
  // --- [end:ops] ---
  FAULT_POINT: z
    .enum([
      'accept.after-insert',
      'accept.after-charge',
      'accept.after-publish',
      'idempotency.before-finish',
      'agent.after-tool',
      'throw:accept.after-insert',
    ])
    .optional()
    .describe(
      'TESTS ONLY: the process kills itself with SIGKILL at this point of the accept path, or of an agent run (agent.after-tool: a tool made its result, the step is not checkpointed yet) (crash tests); with `throw:` in front, an uncaught exception is thrown there instead (the crash-only path). Refused in production.',
    ),
  DEV_ACCOUNT_CREDITS: z.coerce
    .number()
    .min(0)
    .default(1000)
    .describe('Credits given to the development account created by npm start.'),
  SERVED_BY_HEADER: bool
    .default(false)
    .describe(
      'TESTS AND BENCHMARKS ONLY: every API response carries X-Served-By: <process id>, to see which of the API_PROCESSES answered.',
    ),
});

export type Config = Readonly<Omit<z.infer<typeof ConfigSchema>, 'PUBLIC_BASE_URL' | 'CREDIT_PRICES'>> & {
  readonly PUBLIC_BASE_URL: string;
  readonly CREDIT_PRICES: Readonly<Record<CreditOperation, number>>;
  readonly concurrencyOf: (pool: PoolType) => number;
};

export class ConfigError extends Error {}

/** Parse configuration once; a bad key stops the process with a message that names it. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const raw = Object.fromEntries(Object.keys(ConfigSchema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]));
  const r = ConfigSchema.safeParse(raw);
  if (!r.success) {
    const lines = r.error.issues.map((i) => `${i.path.join('.') || '(config)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const c = r.data;
  if (c.NODE_ENV === 'production' && c.ASSET_SIGNING_SECRET === DEV_SECRET) {
    throw new ConfigError('invalid configuration:\n  ASSET_SIGNING_SECRET: must be set in production');
  }
  if (c.NODE_ENV === 'production' && c.WEBHOOK_SECRET_KEY === DEV_WEBHOOK_KEY) {
    throw new ConfigError('invalid configuration:\n  WEBHOOK_SECRET_KEY: must be set in production');
  }
  if (c.NODE_ENV === 'production' && c.ALLOW_LOOPBACK_URLS) {
    throw new ConfigError('invalid configuration:\n  ALLOW_LOOPBACK_URLS: must not be set in production');
  }
  if (c.NODE_ENV === 'production' && c.FAULT_POINT) {
    throw new ConfigError('invalid configuration:\n  FAULT_POINT: must not be set in production');
  }
  if (c.MOONLIGHT_ENGINE === 'remote' && !c.MOONLIGHT_REMOTE_URL) {
    throw new ConfigError('invalid configuration:\n  MOONLIGHT_REMOTE_URL: must be set when MOONLIGHT_ENGINE=remote');
  }
  const prices = { ...DEFAULT_CREDIT_PRICES, ...(c.CREDIT_PRICES ?? {}) };
  return Object.freeze({
    ...c,
    PUBLIC_BASE_URL: (c.PUBLIC_BASE_URL ?? `http://localhost:${c.PORT}`).replace(/\/$/, ''),
    CREDIT_PRICES: Object.freeze(prices),
    concurrencyOf: (pool: PoolType) => c.POOL_CONCURRENCY[pool] ?? c.DEFAULT_POOL_CONCURRENCY,
  });
}
