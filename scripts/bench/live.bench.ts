/**
 * Live sessions benchmark, against the real RabbitMQ and FerretDB on this machine, the
 * API in this process:
 *  sessions held at once by one API process: N sessions opened (POST /live/session) and
 *    connected to /realtime, idle after session.started; heap and RSS growth per session, against
 *    the same number of bare `ws` connections to a plain WebSocketServer in this process (the
 *    baseline: what a WebSocket costs before any session logic). Both sides (client and server)
 *    live in this process in both runs.
 *  audio frames relayed per second: K sessions (with a transcription engine configured, so frames
 *    go through turn detection) each send F frames of 20 ms silence (960 bytes) as fast as the
 *    socket takes them, then an unknown event whose error reply marks the end; against the same
 *    frames sent to a bare ws server that answers the last message.
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import WebSocket from 'ws';
import { client } from '../harness/http';
import { startStack } from '../harness/stack';
import { row, type Bench, type BenchRow } from './bench';

const SESSIONS = Number(process.env.BENCH_LIVE_SESSIONS ?? 1000);
const RELAY_SESSIONS = Number(process.env.BENCH_LIVE_RELAY_SESSIONS ?? 8);
const FRAMES = Number(process.env.BENCH_LIVE_FRAMES ?? 2000);
const FRAME = Buffer.alloc(960);

const gc = () => (globalThis as { gc?: () => void }).gc?.();
const mem = async () => {
  gc();
  await new Promise((r) => setTimeout(r, 200));
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
};

const opened = (ws: WebSocket, first?: (m: string) => boolean) =>
  new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    if (!first) {
      ws.once('open', () => resolve());
      return;
    }
    const on = (d: WebSocket.RawData, bin: boolean) => {
      if (!bin && first(d.toString())) {
        ws.off('message', on);
        resolve();
      }
    };
    ws.on('message', on);
  });

async function pool<T>(n: number, width: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** Send FRAMES binary frames on each socket, then `end`; resolve when every socket saw its answer. */
async function relay(sockets: WebSocket[], end: string, answered: (m: string) => boolean): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    sockets.map(async (ws) => {
      const done = opened(ws, answered);
      for (let i = 0; i < FRAMES; i++) {
        ws.send(FRAME);
        if (ws.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 1));
      }
      ws.send(end);
      await done;
    }),
  );
  return (sockets.length * FRAMES) / ((performance.now() - t0) / 1000);
}

export const bench: Bench = {
  name: 'live (realtime sessions held by one API process; audio frames relayed per second)',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    // A bare WebSocket server: the baseline of both figures.
    const bare = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    bare.on('connection', (ws) =>
      ws.on('message', (_d, bin) => {
        if (!bin) ws.send('{"type":"ok"}');
      }),
    );
    await new Promise((r) => bare.once('listening', r));
    const bareUrl = `ws://127.0.0.1:${(bare.address() as AddressInfo).port}`;

    const stack = await startStack({
      workers: false,
      scheduler: false,
      env: {
        RATE_LIMIT_MAX: '100000000',
        LIVE_TRANSCRIPTION_ENGINE: 'openai',
        LIVE_TRANSCRIPTION_BASE_URL: 'http://127.0.0.1:9',
        LOG_LEVEL: 'error',
      },
    });
    const held: WebSocket[] = [];
    try {
      const { key } = await stack.createAccount({ credits: 1_000_000 });
      const api = client(stack.baseUrl, key);
      const tokens = await pool(SESSIONS, 16, async () => {
        const r = await api.post('/live/session', {});
        if (r.status !== 200) throw new Error(`POST /live/session answered ${r.status}: ${r.text}`);
        return r.body as { token: string; realtimeUrl: string };
      });

      const m0 = await mem();
      const bareHeld = await pool(SESSIONS, 32, async () => {
        const ws = new WebSocket(bareUrl, { perMessageDeflate: false });
        await opened(ws);
        return ws;
      });
      const m1 = await mem();
      for (const ws of bareHeld) ws.close();
      await new Promise((r) => setTimeout(r, 300));

      const m2 = await mem();
      const t0 = performance.now();
      held.push(
        ...(await pool(SESSIONS, 32, async (i) => {
          const ws = new WebSocket(`${tokens[i]!.realtimeUrl}?token=${encodeURIComponent(tokens[i]!.token)}`, {
            perMessageDeflate: false,
          });
          await opened(ws, (m) => m.includes('"session.started"'));
          return ws;
        })),
      );
      const connectMs = performance.now() - t0;
      const m3 = await mem();
      const open = stack.api!.realtime.connections;
      const perSession = (m3.heap - m2.heap) / SESSIONS / 1024;
      const perBare = (m1.heap - m0.heap) / SESSIONS / 1024;
      rows.push(
        row(
          `live sessions held at once by one API process`,
          open,
          'sessions',
          SESSIONS,
          `all ${SESSIONS} opened and connected (${(connectMs / SESSIONS).toFixed(1)} ms each, 32 at a time); none refused`,
        ),
      );
      rows.push(
        row(
          `heap per live session (client and server side)`,
          perSession,
          'KiB',
          perBare,
          `baseline = a bare ws connection, both ends in this process; RSS +${((m3.rss - m2.rss) / SESSIONS / 1024).toFixed(0)} KiB per session vs +${((m1.rss - m0.rss) / SESSIONS / 1024).toFixed(0)} KiB${(globalThis as { gc?: unknown }).gc ? '' : '; run with --expose-gc for steadier heap figures'}`,
        ),
      );

      const relaySockets = held.slice(0, RELAY_SESSIONS);
      const live = await relay(relaySockets, '{"type":"bench.end"}', (m) => m.includes('"invalid_event"'));
      const bareSockets = await pool(RELAY_SESSIONS, RELAY_SESSIONS, async () => {
        const ws = new WebSocket(bareUrl, { perMessageDeflate: false });
        await opened(ws);
        return ws;
      });
      const base = await relay(bareSockets, '{"type":"end"}', (m) => m.includes('"ok"'));
      for (const ws of bareSockets) ws.close();
      rows.push(
        row(
          `audio frames relayed per second (20 ms, ${RELAY_SESSIONS} sessions)`,
          live,
          'frames/s',
          base,
          `${FRAMES} frames of silence per session through turn detection; baseline = a bare ws server reading the same frames; ${(live / 50).toFixed(0)} real-time streams' worth`,
        ),
      );
    } finally {
      for (const ws of held) ws.terminate();
      await stack.stop();
      await new Promise((r) => bare.close(() => r(undefined)));
    }
    return rows;
  },
};
