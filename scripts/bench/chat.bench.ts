/**
 * Chat benchmark (POST /chat), against the real RabbitMQ and FerretDB on this machine, with
 * the API in its own process (the supervisor running one API process, no workers):
 *  (a) latency of a turn with the local engine, one request at a time: time to the first streamed
 *      byte (the `start` chunk) and to the first text-delta, for a reply without tools ("hello")
 *      and for a turn that makes a flowchart (engine step, tool, engine step). Baselines from the
 *      same run: the bare engine call (createChatEngine local, step 0 to its first text-delta) and,
 *      for the flowchart turn, runTurn in this process with the same tools on the same kind of
 *      database (no HTTP, no credit hold, no stored messages).
 *  (b) concurrent streams held by one API process: S turns (default 1,000) kept open by an
 *      OpenAI-compatible provider (a local fake) that accepts each completion request and
 *      answers nothing until released, as a slow model or a slow tool would. Measured: the API
 *      process's RSS and heap before and with the S streams open (per stream), keepalive
 *      comments each stream received over a window (CHAT_KEEPALIVE_MS 1 s), and the time for all
 *      S turns to finish ([DONE]) once released.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocalEngine } from '../../platform/assistant/engines/index';
import { toolSpecs } from '../../platform/assistant/execute';
import { createAssistantTools } from '../../platform/assistant/tools/index';
import { runTurn } from '../../platform/assistant/turn';
import { startStack } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';
import { benchAccount, percentile } from './load';
import { startSupervisedApi, type SupervisedApi } from './processes';

const N = Number(process.env.BENCH_CHAT_TURNS ?? 100);
const STREAMS = Number(process.env.BENCH_CHAT_STREAMS ?? 1000);
const HOLD_SECONDS = Number(process.env.BENCH_CHAT_HOLD_SECONDS ?? 6);
const API_ENV = { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000000' };
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

interface Timed {
  firstByteMs: number;
  firstTextMs: number;
  body: string;
}

/** POST /chat with node:http: when the first body byte and the first text-delta arrived. */
function timedChat(url: string, key: string, message: string): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let firstByteMs = NaN;
    let firstTextMs = NaN;
    let body = '';
    const req = http.request(
      `${url}/chat`,
      { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`POST /chat answered ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          const now = performance.now() - t0;
          if (Number.isNaN(firstByteMs)) firstByteMs = now;
          body += d;
          if (Number.isNaN(firstTextMs) && body.includes('"type":"text-delta"')) firstTextMs = now;
        });
        res.on('end', () => resolve({ firstByteMs, firstTextMs, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ message }));
  });
}

const p = (xs: number[], q: number) => percentile(xs, q);

/** (a) latency: the API process against the bare engine and the in-process turn. */
async function latency(rows: BenchRow[]) {
  const api = await startSupervisedApi(1, { ...API_ENV, CHAT_ENGINE: 'local' });
  const stack = await startStack({ workers: false, scheduler: false, env: { LOG_LEVEL: 'warn' } });
  try {
    const { key } = await benchAccount(api.config.MONGODB_URL, { credits: 1e9 });
    const signal = new AbortController().signal;

    // Baselines in this process.
    const engine = createLocalEngine({ publicBaseUrl: stack.config.PUBLIC_BASE_URL });
    const tools = createAssistantTools(stack.rt);
    const specs = toolSpecs(tools);
    const bareFirstText = async (message: string) => {
      const t0 = performance.now();
      for await (const ev of engine.step({
        messages: [{ role: 'user', content: message }],
        tools: specs,
        mode: 'fast',
        stepIndex: 0,
        signal,
      })) {
        if (ev.type === 'text-delta') return performance.now() - t0;
      }
      throw new Error('the engine wrote no text');
    };
    const { accountId } = await stack.createAccount({ credits: 1e9 });
    const account = (await stack.rt.accounts.forAccount(accountId).get())!;
    let turnNo = 0;
    const inProcessFirstText = async (message: string) => {
      const t0 = performance.now();
      for await (const ev of runTurn({
        engine,
        tools,
        mode: 'fast',
        messages: [{ role: 'user', content: message }],
        ctx: { account, key: { scopes: ['ai', 'write', 'read'] }, requestId: 'bench', turnId: `msg_bench${turnNo++}` },
        signal,
      })) {
        if (ev.type === 'text-delta') return performance.now() - t0;
      }
      throw new Error('the turn wrote no text');
    };

    // The gateway's floor in the same process: an authenticated GET answered from the caches.
    const floor: number[] = [];
    for (let i = 0; i < N + 5; i++) {
      const t0 = performance.now();
      const r = await fetch(`${api.url}/account`, { headers: { authorization: `Bearer ${key}` } });
      await r.arrayBuffer();
      if (i >= 5) floor.push(performance.now() - t0);
    }

    for (const [label, message] of [
      ['reply without tools', 'hello, what can you do?'],
      ['flowchart turn (step, tool, step)', 'make a flowchart of our hiring process'],
    ] as const) {
      const withTool = message.includes('flowchart');
      for (let i = 0; i < 5; i++) {
        await timedChat(api.url, key, message);
        await (withTool ? inProcessFirstText(message) : bareFirstText(message));
      }
      const over: Timed[] = [];
      for (let i = 0; i < N; i++) over.push(await timedChat(api.url, key, message));
      const base: number[] = [];
      for (let i = 0; i < N; i++)
        base.push(withTool ? await inProcessFirstText(message) : await bareFirstText(message));
      if (!over.every((t) => t.body.endsWith('data: [DONE]\n\n')))
        throw new Error(`${label}: a stream did not end with [DONE]`);
      const fb = over.map((t) => t.firstByteMs);
      const ft = over.map((t) => t.firstTextMs);
      const baseName = withTool ? 'runTurn in-process with the same tools' : 'bare engine call (local, step 0)';
      rows.push(
        row(
          `(a) ${label}: first streamed byte p50`,
          p(fb, 50),
          'ms',
          p(floor, 50),
          `${N} turns one at a time; p95 ${p(fb, 95).toFixed(1)} ms; baseline: GET /account on the same API process (p50), the difference is mostly the credit hold`,
        ),
      );
      rows.push(
        row(
          `(a) ${label}: first text-delta p50`,
          p(ft, 50),
          'ms',
          p(base, 50),
          `baseline: ${baseName} to its first text-delta (p50); p95 ${p(ft, 95).toFixed(1)} ms vs ${p(base, 95).toFixed(2)} ms`,
        ),
      );
    }
  } finally {
    await stack.stop();
    await api.stop();
  }
}

/** A provider that takes every completion request and, while held, answers only when released. */
async function heldProvider() {
  const held: http.ServerResponse[] = [];
  let holding = false;
  const base = { id: 'chatcmpl-b', object: 'chat.completion.chunk', created: 1, model: 'held-1' };
  const finish = (res: http.ServerResponse) => {
    res.write(
      `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: 'Done.' }, finish_reason: null }] })}\n\n`,
    );
    res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
    res.end('data: [DONE]\n\n');
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`,
      );
      if (holding) held.push(res);
      else finish(res);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.maxConnections = Infinity;
  await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    get held() {
      return held.length;
    },
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      for (const res of held.splice(0)) finish(res);
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The API process's memory from its /metrics (prom-client default metrics). */
async function memoryOf(api: SupervisedApi) {
  const text = await (await fetch(api.url.replace(/\/api\/v1$/, '/metrics'))).text();
  const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { rss: metric('process_resident_memory_bytes'), heap: metric('nodejs_heap_size_used_bytes') };
}

interface OpenStream {
  keepalives: number;
  done: Promise<{ ok: boolean; at: number }>;
  started: Promise<void>;
}

/** One held POST /chat: counts `: keepalive` lines; `done` when it ended (ok: [DONE] after a finish chunk). */
function openStream(url: string, key: string, streamAgent: http.Agent): OpenStream {
  const s = { keepalives: 0 } as OpenStream;
  let onStart!: () => void;
  s.started = new Promise<void>((r) => (onStart = r));
  s.done = new Promise((resolve, reject) => {
    let body = '';
    const req = http.request(
      `${url}/chat`,
      {
        method: 'POST',
        agent: streamAgent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`POST /chat answered ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
          if (body.includes('"type":"start"')) onStart();
          // Only the tail is kept: counting happens on complete frames.
          const frames = body.split('\n\n');
          body = frames.pop()!;
          for (const f of frames) if (f === ': keepalive') s.keepalives++;
          if (frames.includes('data: [DONE]')) resolve({ ok: true, at: performance.now() });
        });
        res.on('end', () => resolve({ ok: false, at: performance.now() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ message: 'tell me something slowly' }));
  });
  return s;
}

/** (b) S idle streams on one API process. */
async function idleStreams(rows: BenchRow[]) {
  const provider = await heldProvider();
  const api = await startSupervisedApi(1, {
    ...API_ENV,
    CHAT_ENGINE: 'openai',
    OPENAI_BASE_URL: provider.url,
    OPENAI_API_KEY: 'sk-bench',
    CHAT_MODEL: 'held-1',
    CHAT_TIMEOUT_MS: '600000',
    CHAT_KEEPALIVE_MS: '1000',
  });
  const streamAgent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    const { key } = await benchAccount(api.config.MONGODB_URL, { credits: 1e9 });
    // Warm-up with the provider answering at once: the idle figure includes what turns load.
    for (let i = 0; i < 50; i++) await timedChat(api.url, key, 'hello');
    await new Promise((r) => setTimeout(r, 1500));
    const idle = await memoryOf(api);

    provider.hold();
    const t0 = performance.now();
    const streams: OpenStream[] = [];
    for (let i = 0; i < STREAMS; i++) {
      streams.push(openStream(api.url, key, streamAgent));
      if (i % 100 === 99) await Promise.all(streams.slice(-100).map((x) => x.started));
    }
    await Promise.all(streams.map((x) => x.started));
    while (provider.held < STREAMS) await new Promise((r) => setTimeout(r, 50));
    const openMs = performance.now() - t0;
    const before = streams.map((x) => x.keepalives);
    await new Promise((r) => setTimeout(r, HOLD_SECONDS * 1000));
    const during = streams.map((x, i) => x.keepalives - before[i]!);
    const held = await memoryOf(api);

    const r0 = performance.now();
    provider.release();
    const ends = await Promise.all(streams.map((x) => x.done));
    const finishMs = Math.max(...ends.map((e) => e.at)) - r0;
    const ok = ends.filter((e) => e.ok).length;
    const perStreamRss = (held.rss - idle.rss) / STREAMS;
    const perStreamHeap = (held.heap - idle.heap) / STREAMS;
    rows.push(
      row(
        `(b) idle streams held by one API process`,
        ok,
        'streams',
        STREAMS,
        `opened in ${(openMs / 1000).toFixed(1)} s; every one ended with finish + [DONE] after release: ${ok === STREAMS}`,
      ),
    );
    rows.push(
      row(
        `(b) RSS per held stream`,
        perStreamRss / 1024,
        'KiB',
        undefined,
        `API process RSS ${(idle.rss / 2 ** 20).toFixed(0)} MiB idle (after warm-up) → ${(held.rss / 2 ** 20).toFixed(0)} MiB with ${STREAMS} streams; heap +${(perStreamHeap / 1024).toFixed(1)} KiB per stream (each holds its client socket, its turn and its upstream provider request)`,
      ),
    );
    rows.push(
      row(
        `(b) keepalives per stream in ${HOLD_SECONDS} s (CHAT_KEEPALIVE_MS 1000)`,
        p(during, 50),
        'comments',
        undefined,
        `min ${Math.min(...during)}, max ${Math.max(...during)} over ${STREAMS} streams`,
      ),
    );
    rows.push(
      row(
        `(b) all ${STREAMS} turns finished after release`,
        finishMs,
        'ms',
        undefined,
        'provider answers, stored answers, captured holds, finish + [DONE] on every stream',
      ),
    );
  } finally {
    provider.release();
    streamAgent.destroy();
    await api.stop();
    await provider.close();
  }
}

export const bench: Bench = {
  name: 'chat',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    await latency(rows);
    await idleStreams(rows);
    return rows;
  },
};
