/**
 * What every chaos scenario (scripts/chaos/*.ts) shares: a fake OpenAI-compatible provider that
 * makes code builds take CHAOS_JOB_MS, the compiled supervisor (npm start's process tree) on a
 * fresh database and queue prefix, an account, POSTs with an Idempotency-Key retried until they
 * are accepted, the figures table, and the clean-up (everything started is stopped, everything
 * created dropped, checked against the broker's queues and exchanges before the run).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAccountsRepository } from '../../platform/accounts/accounts.repository';
import { loadConfig, type Config } from '../../platform/infra/config';
import { connectMongo, ensureIndexes, storeOf, type Database } from '../../platform/infra/mongo';
import { brokerSnapshot, hygieneReport } from '../harness/broker-hygiene';
import { dropEverything, freePort, recordQueuePrefix } from '../harness/stack';
import { ensureBuilt } from '../build-once';
import { waitForApiProcesses } from '../supervisor/ready';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

/** A fake OpenAI-compatible provider: answers every chat completion with a tiny app after `jobMs`. */
export async function startFakeProvider(jobMs: number): Promise<{ url: string; close(): void }> {
  const APP = '```html\n<!doctype html><html><head><title>chaos</title></head><body>ok</body></html>\n```';
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            id: 'c',
            object: 'chat.completion',
            created: 1,
            model: 'm',
            choices: [{ index: 0, message: { role: 'assistant', content: APP }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
      }, jobMs),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => server.close() };
}

export interface ChaosRun {
  id: string;
  env: Record<string, string>;
  config: Config;
  /** `http://127.0.0.1:<port>/api/v1` */
  base: string;
  port: number;
  /** The supervisor's metrics listener (METRICS_PORT): GET /metrics of every API process. */
  metricsPort: number;
  supervisor: ChildProcess;
  /** The supervisor's output so far (JSON lines of every process). */
  output(): string;
  /** The JSON log lines so far. */
  lines(): Record<string, any>[];
  db: Database;
  accountId: string;
  key: string;
  provider: { url: string; close(): void };
  /** Stop everything, drop what was created, print the broker hygiene line. */
  close(): Promise<void>;
}

/**
 * The compiled service under its supervisor on a fresh database and queue prefix, with a fake
 * provider behind the code engine and an account holding `credits`. `env` adds or overrides
 * configuration (AMQP_URL of a cluster, MONGODB_URL of a private server, …).
 */
export async function startChaosRun(opts: {
  name: string;
  jobMs?: number;
  credits?: number;
  env?: Record<string, string>;
}): Promise<ChaosRun> {
  await ensureBuilt();
  const id = randomBytes(4).toString('hex');
  const brokerBefore = await brokerSnapshot();
  const provider = await startFakeProvider(opts.jobMs ?? Number(process.env.CHAOS_JOB_MS ?? 1000));
  const port = await freePort();
  const metricsPort = await freePort();
  const mongoServer = (opts.env?.MONGODB_URL ?? process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(
    /\/[^/?]*(\?.*)?$/,
    '',
  );
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    QUEUE_PREFIX: recordQueuePrefix(`chaos${id}.`),
    WORKER_METRICS_PORT: '0',
    SCHEDULER_METRICS_PORT: '0',
    SERVED_BY_HEADER: 'true',
    RATE_LIMIT_MAX: '100000',
    CODE_ENGINE: 'openai',
    OPENAI_BASE_URL: provider.url,
    OPENAI_API_KEY: 'sk-chaos',
    POOL_CONCURRENCY: 'code=4',
    ...opts.env,
    MONGODB_URL: `${mongoServer}/${opts.name}_${id}`,
  };
  delete env.LOG_FILE;
  const config = loadConfig(env);
  const supervisor = spawn(process.execPath, ['dist/scripts/supervisor.js'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  supervisor.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  supervisor.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const lines = () =>
    output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  let db: Database | undefined;
  const close = async () => {
    supervisor.kill('SIGTERM');
    if (supervisor.exitCode === null && supervisor.signalCode === null)
      await new Promise((r) => supervisor.once('exit', r));
    await db?.close().catch(() => {});
    await dropEverything(config).catch(() => {});
    provider.close();
    const hygiene = await hygieneReport(brokerBefore);
    console.log(hygiene.summary);
    if (hygiene.leaks.length > 0)
      console.log(`WARNING: the chaos run left these on the broker: ${hygiene.leaks.join(', ')}`);
  };
  try {
    db = await connectMongo(config.MONGODB_URL);
    await waitForApiProcesses(metricsPort, 1, 90_000, () => supervisor.exitCode === null).catch((err: Error) => {
      throw new Error(`${err.message}; supervisor output:\n${output.slice(-4000)}`);
    });
    await ensureIndexes(db);
    const accounts = createAccountsRepository(storeOf(db));
    const account = await accounts.createAccount({ name: opts.name, plan: 'pro', credits: opts.credits ?? 10_000 });
    const { key } = await accounts.forAccount(account._id).createKey();
    return {
      id,
      env,
      config,
      base: `http://127.0.0.1:${port}/api/v1`,
      port,
      metricsPort,
      supervisor,
      output: () => output,
      lines,
      db,
      accountId: account._id,
      key,
      provider,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The pid of the API process that answers now (X-Served-By), or 0. */
export async function apiPid(run: ChaosRun): Promise<number> {
  const r = await fetch(`${run.base}/account`, {
    headers: { authorization: `Bearer ${run.key}`, connection: 'close' },
  }).catch(() => null);
  return Number(r?.headers.get('x-served-by') ?? 0);
}

export interface Accepted {
  key: string;
  jobId: string;
  tries: number;
  statuses: number[];
  /** When the first try was sent and when the 202 came back (ms since the epoch). */
  sentAt: number;
  acceptedAt: number;
  /** Latency of the try that was accepted. */
  ms: number;
}

/**
 * POST /code-builds with Idempotency-Key `key`, retried every `retryMs` (any status but 202, or
 * no answer) until it is accepted; what a careful client does.
 */
export async function postUntilAccepted(
  run: ChaosRun,
  key: string,
  body: Record<string, unknown>,
  retryMs = 250,
  maxTries = 400,
): Promise<Accepted> {
  const statuses: number[] = [];
  const sentAt = Date.now();
  for (let tries = 1; tries <= maxTries; tries++) {
    const t = performance.now();
    const r = await fetch(`${run.base}/code-builds`, {
      method: 'POST',
      headers: { authorization: `Bearer ${run.key}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    }).then(
      async (res) => ({ status: res.status, body: (await res.json().catch(() => null)) as { jobId?: string } | null }),
      () => ({ status: 0, body: null }),
    );
    statuses.push(r.status);
    if (r.status === 202 && r.body?.jobId)
      return { key, jobId: r.body.jobId, tries, statuses, sentAt, acceptedAt: Date.now(), ms: performance.now() - t };
    await sleep(retryMs);
  }
  throw new Error(`${key} never got a 202: ${statuses.join(',')}`);
}

/** Wait until no job of the run's account is queued or processing. */
export async function waitForQuiet(run: ChaosRun, timeoutMs = 120_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; await sleep(250)) {
    const open = await run.db.jobs.countDocuments({
      accountId: run.accountId,
      status: { $in: ['queued', 'processing'] },
    });
    if (open === 0) return;
    if (Date.now() > deadline) throw new Error(`${open} jobs still open`);
  }
}

export function printFigures(title: string, rows: [string, string | number][]): void {
  console.log(`\n${title} ${new Date().toISOString()}, node ${process.version}\n\n| Figure | Value |\n|---|---|`);
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
}
