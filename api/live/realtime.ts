import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { API_PLANS } from '../../contracts/registry';
import { newId } from '../../platform/infra/ids';
import { createLiveEngine } from '../../platform/live/engine';
import { createLiveSessions, liveCapabilities, REALTIME_PATH } from '../../platform/live/sessions';
import { createLiveTools, type LiveTools } from '../../platform/live/tools';
import { createTranscriptionEngine, type TranscriptionEngine } from '../../platform/live/transcription';
import { createPersonaEventsHook } from '../../platform/personas/events';
import type { Runtime } from '../../platform/runtime';
import { voiceCatalogue } from '../../platform/speech/voices';
import { type ConnectionWatch, turnLimiter, watchConnections } from './realtime-process';
import {
  AUTH_WAIT_MS,
  EVENT_HEADROOM_BYTES,
  MAX_EARLY_BYTES,
  MAX_ERRORS_PER_SECOND,
  parseEvent,
  REALTIME_MAX_MESSAGE_BYTES,
  REFUSED_TERMINATE_MS,
} from './realtime-protocol';
import { type RealtimeShared, runSession } from './realtime-session';

export { addresses, speakableSentences } from './realtime-protocol';

export interface RealtimeServer {
  /** Open connections (the bench reads it). */
  readonly connections: number;
  close(): Promise<void>;
}

/**
 * The realtime engine (SPEC 4.8, 5.6): a WebSocket server on the API's HTTP server at
 * /realtime. A connection is accepted only with a valid token from POST /live/session; it then
 * carries one live session (protocol in the README, "Realtime protocol").
 */
export function attachRealtime(
  server: http.Server,
  rt: Runtime,
  opts: { transcription?: TranscriptionEngine | null; fetch?: typeof fetch } = {},
): RealtimeServer {
  const { config, log } = rt;
  const wss = new WebSocketServer({ noServer: true, maxPayload: REALTIME_MAX_MESSAGE_BYTES, perMessageDeflate: false });
  const sessions = createLiveSessions(rt);
  const engine = createLiveEngine(config, { fetch: opts.fetch });
  const transcription =
    opts.transcription === undefined ? createTranscriptionEngine(config, { fetch: opts.fetch }) : opts.transcription;
  const catalogue = voiceCatalogue(config);
  let liveTools: LiveTools | undefined;
  const personaEvents = createPersonaEventsHook(rt);
  const open = new Set<WebSocket>();
  /** The connection carrying each session in this process: a newer one closes the older. */
  const bySession = new Map<string, WebSocket>();
  const watch = watchConnections(rt, sessions, open);
  const takeTurn = turnLimiter(config);
  const capabilities = { ...liveCapabilities(config), audioIn: transcription !== null };

  const onUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== REALTIME_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const origin = typeof req.headers.origin === 'string' ? req.headers.origin : undefined;
    wss.handleUpgrade(req, socket, head, (ws) => {
      open.add(ws);
      watch.track(ws);
      ws.once('close', () => open.delete(ws));
      accept(shared, watch, ws, url.searchParams.get('token'), origin).catch((err: unknown) => {
        log.error('realtime connection failed', { err: err as Error });
        ws.close(1011, 'server error');
      });
    });
  };
  server.on('upgrade', onUpgrade);

  /** Error events sent in the current second, per connection. */
  const errorsSent = new WeakMap<WebSocket, { second: number; n: number }>();
  const send = (ws: WebSocket, event: Record<string, unknown>) => {
    if (ws.readyState !== ws.OPEN) return;
    // A client that does not read: close it rather than buffer events without bound.
    if (ws.bufferedAmount > config.LIVE_MAX_BUFFERED_BYTES + EVENT_HEADROOM_BYTES)
      return ws.close(1008, `the client is not reading (over ${config.LIVE_MAX_BUFFERED_BYTES} bytes unsent)`);
    if (event.type === 'error') {
      const second = Math.floor(Date.now() / 1000);
      const e = errorsSent.get(ws);
      if (e && e.second === second) {
        if (++e.n > MAX_ERRORS_PER_SECOND) return;
      } else errorsSent.set(ws, { second, n: 1 });
    }
    ws.send(JSON.stringify(event));
  };

  const shared: RealtimeShared = {
    rt,
    sessions,
    engine,
    transcription,
    catalogue,
    liveTools: () => {
      liveTools ??= createLiveTools(rt);
      return liveTools;
    },
    personaEvents,
    send,
    takeTurn,
    bySession,
    capabilities,
    log,
  };

  return {
    get connections() {
      return open.size;
    },
    async close() {
      watch.stop();
      server.off('upgrade', onUpgrade);
      for (const ws of open) ws.close(1001, 'server shutting down');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      for (const ws of open) ws.terminate();
    },
  };
}

/** Close a refused connection, and cut it if the client does not finish the close handshake. */
function refuse(ws: WebSocket, code: number, reason: string) {
  ws.close(code, reason);
  setTimeout(() => ws.terminate(), REFUSED_TERMINATE_MS).unref();
}

/**
 * A new connection: its token (from ?token= or a first auth event, within AUTH_WAIT_MS) claims
 * the session, the key and account are checked, then the session runs on it (a connection of
 * this process already carrying the session is closed). What the client sends meanwhile is kept.
 */
async function accept(
  shared: RealtimeShared,
  watch: ConnectionWatch,
  ws: WebSocket,
  queryToken: string | null,
  origin: string | undefined,
) {
  const { rt, sessions, bySession, log } = shared;
  const { instance, owned } = watch;
  // Events sent before the session is running are kept and handled once it is.
  const early: [RawData, boolean][] = [];
  let earlyBytes = 0;
  let firstMessage: ((e: [RawData, boolean]) => void) | undefined;
  const collect = (data: RawData, isBinary: boolean) => {
    if (firstMessage) return firstMessage([data, isBinary]);
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer).byteLength;
    // Past the bound the rest is dropped: an unauthenticated peer holds at most 64 KiB here.
    if (earlyBytes + size > MAX_EARLY_BYTES) return;
    earlyBytes += size;
    early.push([data, isBinary]);
  };
  ws.on('message', collect);
  let token = queryToken;
  if (token === null) {
    token = await new Promise<string | null>((resolve) => {
      const t = setTimeout(() => resolve(null), AUTH_WAIT_MS);
      firstMessage = ([data, isBinary]) => {
        firstMessage = undefined;
        clearTimeout(t);
        const e = isBinary ? null : parseEvent(data.toString());
        resolve(e && 'type' in e && e.type === 'auth' ? e.token : null);
      };
      ws.once('close', () => resolve(null));
    });
    if (token === null) return refuse(ws, 4401, 'token required: ?token= or a first {"type":"auth"} event');
  }
  let claimed: Awaited<ReturnType<typeof sessions.connect>>;
  const conn = newId('rtc');
  try {
    claimed = await sessions.connect(token, { origin, owner: { instance, conn } });
  } catch (err) {
    log.warn('realtime connect failed', { err: err as Error });
    return ws.close(1011, 'server error');
  }
  if (!claimed.ok) return refuse(ws, claimed.refusal.code, claimed.refusal.reason);
  const doc = claimed.doc;
  const auth = await rt.accounts.forAccount(doc.accountId).withKey(doc.keyId);
  if (!auth?.key.scopes.includes('ai') || !API_PLANS.includes(auth.account.plan)) {
    await sessions.setStatus(doc._id, 'dropped');
    return refuse(
      ws,
      4403,
      'the key that opened this session was revoked or lost the ai scope, or the account lost API access',
    );
  }
  const authAccount = auth.account;
  let handle: string;
  try {
    handle = await sessions.handle(doc);
  } catch (err) {
    log.error('live session start failed', { err: err as Error });
    return ws.close(1011, 'server error');
  }
  if (ws.readyState !== ws.OPEN) {
    void sessions
      .setStatus(doc._id, 'dropped')
      .catch((err: unknown) => log.warn('live session not marked dropped', { err: err as Error }));
    return;
  }
  ws.off('message', collect);
  bySession.get(doc._id)?.close(4409, 'superseded by a newer connection to this session');
  bySession.set(doc._id, ws);
  owned.set(conn, { sessionId: doc._id, ws, accountId: doc.accountId, keyId: auth.key._id });
  ws.once('close', () => owned.delete(conn));
  runSession(shared, ws, doc, authAccount, auth.key, handle, early);
}
