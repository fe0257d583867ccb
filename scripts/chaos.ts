/**
 * `npm run chaos`: the crash run of issue 9, against the real supervisor (npm start's process
 * tree) on a fresh database and queue prefix, measured and printed as a table:
 *   1. 60 POST /code-builds, each with its own Idempotency-Key, at about 30/s; the API process is
 *      killed with SIGKILL in the middle of the burst (the supervisor restarts it); every
 *      request that got no 202 is retried with the same key until it does.
 *   2. The worker process is killed with SIGKILL three times while it holds jobs.
 * Figures: duplicate jobs, extra credits, API restart → first successful retry, worker kill →
 * the killed jobs completing elsewhere (p50, max). Code builds use the OpenAI-compatible engine
 * against a local fake provider that answers after CHAOS_JOB_MS (1 s), so jobs are in flight
 * when the worker dies. Everything it starts it stops, and it drops what it created (checked at
 * the end against the broker's queues and exchanges before the run).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAccountsRepository } from '../platform/accounts';
import { loadConfig } from '../platform/config';
import { connectMongo, ensureIndexes } from '../platform/mongo';
import { brokerSnapshot, hygieneReport } from '../test/helpers/broker-hygiene';
import { dropEverything, freePort, recordQueuePrefix } from '../test/helpers/stack';

const JOB_MS = Number(process.env.CHAOS_JOB_MS ?? 1000);
const LOGICAL = 60;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

// A fake OpenAI-compatible provider: answers every chat completion with a tiny app after JOB_MS.
const APP = '```html\n<!doctype html><html><head><title>chaos</title></head><body>ok</body></html>\n```';
const provider = http.createServer((req, res) => {
  req.resume();
  req.on('end', () =>
    setTimeout(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: APP }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    }, JOB_MS),
  );
});
await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));

const id = randomBytes(4).toString('hex');
const brokerBefore = await brokerSnapshot();
const port = await freePort();
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  NODE_ENV: 'development',
  LOG_LEVEL: 'error',
  PORT: String(port),
  PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
  MONGODB_URL: `${(process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '')}/chaos_${id}`,
  QUEUE_PREFIX: recordQueuePrefix(`chaos${id}.`),
  WORKER_METRICS_PORT: '0',
  SCHEDULER_METRICS_PORT: '0',
  SERVED_BY_HEADER: 'true',
  RATE_LIMIT_MAX: '100000',
  CODE_ENGINE: 'openai',
  OPENAI_BASE_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`,
  OPENAI_API_KEY: 'sk-chaos',
  POOL_CONCURRENCY: 'code=4',
};
const config = loadConfig(env);
const base = `http://127.0.0.1:${port}/api/v1`;

const supervisor = spawn(process.execPath, ['--import', 'tsx', 'scripts/supervisor.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
let supervisorLog = '';
supervisor.stdout.on('data', (d: Buffer) => (supervisorLog += d.toString()));
supervisor.stderr.on('data', (d: Buffer) => (supervisorLog += d.toString()));

const healthy = () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
const db = await connectMongo(config.MONGODB_URL);
try {
  for (const deadline = Date.now() + 60_000; !(await healthy()); await sleep(100)) if (Date.now() > deadline) throw new Error(`supervisor not up:\n${supervisorLog}`);
  await ensureIndexes(db);
  const accounts = createAccountsRepository(db);
  const account = await accounts.createAccount({ name: 'chaos', plan: 'pro', credits: 10_000 });
  const { key } = await accounts.createKey(account._id);
  const headers = (k: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': k });

  // --- 1. the burst, with the API killed in the middle ---------------------------------
  let apiPid = 0;
  let killedApiAt = 0;
  let apiBackAt = 0;
  const firstOkAfterRestart: number[] = [];
  let lastRetryOkAt = 0;
  const answers: { key: string; jobId: string; tries: number; statuses: number[] }[] = [];
  const post = async (i: number) => {
    const k = `chaos-${id}-${i}`;
    const statuses: number[] = [];
    for (let tries = 1; tries < 200; tries++) {
      const r = await fetch(`${base}/code-builds`, { method: 'POST', headers: headers(k), body: JSON.stringify({ prompt: `chaos app ${i}` }) }).then(
        async (res) => ({ status: res.status, body: (await res.json().catch(() => null)) as { jobId?: string } | null, pid: Number(res.headers.get('x-served-by')) }),
        () => ({ status: 0, body: null, pid: 0 }),
      );
      statuses.push(r.status);
      if (r.status === 202 && r.body?.jobId) {
        apiPid ||= r.pid;
        if (tries > 1 && apiBackAt) firstOkAfterRestart.push(Date.now() - apiBackAt);
        if (tries > 1) lastRetryOkAt = Math.max(lastRetryOkAt, Date.now());
        answers.push({ key: k, jobId: r.body.jobId, tries, statuses });
        return;
      }
      await sleep(250);
    }
    throw new Error(`request ${i} never got a 202: ${statuses.join(',')}`);
  };
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < LOGICAL; i++) {
    inFlight.push(post(i));
    if (i === LOGICAL / 3) {
      while (!apiPid) await sleep(10);
      process.kill(apiPid, 'SIGKILL');
      killedApiAt = Date.now();
      // The supervisor (the cluster primary) keeps the port open; the API is back when it says
      // a new API process listens.
      const killed = apiPid;
      void (async () => {
        const listening = () => [...supervisorLog.matchAll(/api(?:#\d+)? \(pid (\d+)\) listening/g)].some((m) => Number(m[1]) !== killed);
        while (!listening()) await sleep(10);
        apiBackAt = Date.now();
      })();
    }
    await sleep(33);
  }
  await Promise.all(inFlight);
  const retried = answers.filter((a) => a.tries > 1).length;

  // --- 2. the worker killed three times while it holds jobs -----------------------------
  const takeovers: number[] = [];
  for (let round = 0; round < 3; round++) {
    // Give it work, wait until it holds some, kill the holder.
    const extra = await Promise.all(
      Array.from({ length: 4 }, async (_, j) => {
        const k = `chaos-${id}-w${round}-${j}`;
        const r = await fetch(`${base}/code-builds`, { method: 'POST', headers: headers(k), body: JSON.stringify({ prompt: `worker kill ${round}.${j}` }) });
        const body = (await r.json()) as { jobId: string };
        answers.push({ key: k, jobId: body.jobId, tries: 1, statuses: [r.status] });
        return body.jobId;
      }),
    );
    let held: { _id: string; lease: { owner: string } | null }[] = [];
    for (const deadline = Date.now() + 30_000; held.length === 0 && Date.now() < deadline; await sleep(50)) {
      held = await db.jobs.find({ _id: { $in: extra }, status: 'processing', 'lease.owner': { $not: /^retry$/ } }, { projection: { lease: 1 } }).toArray();
    }
    if (!held.length) throw new Error('no job was taken by a worker');
    const pid = Number(held[0]!.lease!.owner.split(':')[1]);
    const victims = held.filter((h) => h.lease?.owner === held[0]!.lease!.owner).map((h) => h._id);
    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    for (const jobId of victims) {
      for (const deadline = Date.now() + 60_000; ; await sleep(50)) {
        const j = await db.jobs.findOne({ _id: jobId }, { projection: { status: 1, completedAt: 1 } });
        if (j?.status === 'complete' && j.completedAt) {
          takeovers.push(j.completedAt.getTime() - killedAt);
          break;
        }
        if (Date.now() > deadline) throw new Error(`job ${jobId} did not complete after the worker kill`);
      }
    }
  }

  // --- figures ------------------------------------------------------------------------
  for (const deadline = Date.now() + 120_000; ; await sleep(250)) {
    const open = await db.jobs.countDocuments({ accountId: account._id, status: { $in: ['queued', 'processing'] } });
    if (open === 0) break;
    if (Date.now() > deadline) throw new Error(`${open} jobs still open`);
  }
  await sleep(1000); // ledger batches and the sweep settle
  const jobs = await db.jobs.find({ accountId: account._id }).toArray();
  const logical = new Set(answers.map((a) => a.key)).size;
  const balance = (await db.accounts.findOne({ _id: account._id }))!.credits;
  const expectedSpend = jobs.filter((j) => j.status === 'complete').length * 5;
  const rows: [string, string][] = [
    ['logical requests (each its own Idempotency-Key)', String(logical)],
    ['requests retried after the API kill', String(retried)],
    ['jobs created', String(jobs.length)],
    ['duplicate jobs', String(jobs.length - logical)],
    ['jobs complete / failed', `${jobs.filter((j) => j.status === 'complete').length} / ${jobs.filter((j) => j.status === 'failed').length}`],
    ['credits spent / expected (5 a build)', `${10_000 - balance} / ${expectedSpend}`],
    ['extra credits', String(10_000 - balance - expectedSpend)],
    ['API killed → answering again', apiBackAt ? `${apiBackAt - killedApiAt} ms` : 'n/a'],
    ['API back → first successful retry', firstOkAfterRestart.length ? `${Math.min(...firstOkAfterRestart)} ms` : 'n/a'],
    ['API kill → last retried request answered (its key held by the dead process until IDEMPOTENCY_LEASE_MS ran out)', lastRetryOkAt ? `${lastRetryOkAt - killedApiAt} ms` : 'n/a'],
    ['worker kill → killed job complete elsewhere, p50', `${pct(takeovers, 50)} ms (n=${takeovers.length})`],
    ['worker kill → killed job complete elsewhere, max', `${Math.max(...takeovers)} ms`],
    ['lease (JOB_LEASE_MS)', `${config.JOB_LEASE_MS} ms`],
  ];
  console.log(`\nchaos run ${new Date().toISOString()}, node ${process.version}\n\n| Figure | Value |\n|---|---|`);
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  if (jobs.length !== logical || balance !== 10_000 - expectedSpend) process.exitCode = 1;
} finally {
  supervisor.kill('SIGTERM');
  await new Promise((r) => supervisor.once('exit', r));
  await db.close();
  await dropEverything(config).catch(() => {});
  provider.close();
  const hygiene = await hygieneReport(brokerBefore);
  console.log(hygiene.summary);
  if (hygiene.leaks.length > 0) console.log(`WARNING: the chaos run left these on the broker: ${hygiene.leaks.join(', ')}`);
}
