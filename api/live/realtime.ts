import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { LIVE_CLIENT_TOOLS, type LiveClientTool } from '../../contracts/live';
import { secondSentenceAt, SPEECH_TEXT_MAX_CHARS, type SpeechRpcReply } from '../../contracts/speech';
import type { AuthAccount } from '../../platform/accounts/accounts';
import type { EngineMessage } from '../../platform/assistant/engine';
import { errorArtifact } from '../../platform/assistant/execute';
import type { ToolDefinition } from '../../platform/assistant/tool';
import { runTurn } from '../../platform/assistant/turn';
import { newId } from '../../platform/infra/ids';
import { createPersonaEventsHook } from '../../platform/personas/events';
import { createLiveEngine } from '../../platform/live/engine';
import { createLiveSessions, liveCapabilities, REALTIME_PATH, SESSION_LIMIT_CLOSE } from '../../platform/live/sessions';
import type { LiveHistoryEntry, LiveSessionDoc } from '../../platform/live/sessions.repository';
import { API_PLANS } from '../../contracts/registry';
import { CLIENT_TOOL_SPECS, createLiveTools, type LiveTools } from '../../platform/live/tools';
import { createTranscriptionEngine, type TranscriptionEngine } from '../../platform/live/transcription';
import { EnergyVad } from '../../platform/live/vad';
import type { ApiKeyDoc } from '../../platform/infra/mongo';
import type { Runtime } from '../../platform/runtime';
import { voiceCatalogue } from '../../platform/speech/voices';

/** Largest WebSocket message accepted (a JSON event or an audio frame). */
export const REALTIME_MAX_MESSAGE_BYTES = 256 * 1024;
/** How long a connection without ?token= may take to send {type:"auth", token}. */
const AUTH_WAIT_MS = 5000;
/** Turns waiting behind the running one; more answer error `busy`. */
const MAX_QUEUED_TURNS = 4;
/** Audio received but not yet through turn detection (it waits while a turn is transcribed): 10 s. */
const MAX_AUDIO_WAITING_BYTES = 480_000;
/** Text of one input_text turn. */
const MAX_TEXT_CHARS = 2000;
/** Bytes kept of what a connection sends before it is authenticated and its session runs. */
export const MAX_EARLY_BYTES = 64 * 1024;
/** After a refusal (4401/4403) the client has this long to finish the close handshake. */
const REFUSED_TERMINATE_MS = 1000;
/** Headroom above LIVE_MAX_BUFFERED_BYTES for the events that tell a slow client its audio was cut. */
const EVENT_HEADROOM_BYTES = 256 * 1024;
/** Error events per second per connection; more are dropped (a client sending garbage gets no flood back). */
const MAX_ERRORS_PER_SECOND = 20;

/** Split a reply into sentences the speech pool accepts (one sentence, at most 300 characters). */
export function speakableSentences(text: string): string[] {
  const plain = text
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/https?:\/\/\S+/g, '')
    .replace(/[*_`#>]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  const out: string[] = [];
  let rest = plain;
  while (rest) {
    const at = secondSentenceAt(rest);
    let s = at < 0 ? rest : rest.slice(0, at);
    rest = at < 0 ? '' : rest.slice(at);
    s = s.trim();
    while ([...s].length > SPEECH_TEXT_MAX_CHARS) {
      const cut = s.lastIndexOf(' ', SPEECH_TEXT_MAX_CHARS - 1);
      const head = s.slice(0, cut > 0 ? cut : SPEECH_TEXT_MAX_CHARS - 1);
      out.push(head.trim());
      s = s.slice(head.length).trim();
    }
    if (s && /[\p{L}\p{N}]/u.test(s)) out.push(s);
    rest = rest.trim();
  }
  return out;
}

/** Whether an ambient turn addresses the device by its name (a whole-word match, any case). */
export function addresses(text: string, deviceName: string): boolean {
  const name = deviceName
    .trim()
    .toLowerCase()
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\p{L}\\p{N}])${name}($|[^\\p{L}\\p{N}])`, 'iu').test(text.toLowerCase());
}

type ClientEvent =
  | { type: 'auth'; token: string }
  | { type: 'input_text'; text: string }
  | { type: 'tool_result'; callId: string; output: unknown }
  | { type: 'end' };

function parseEvent(raw: string): ClientEvent | { error: string } {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return { error: 'not JSON' };
  }
  const e = v as Record<string, unknown>;
  if (!e || typeof e !== 'object' || typeof e.type !== 'string')
    return { error: 'an event must be a JSON object with a string type' };
  switch (e.type) {
    case 'auth':
      return typeof e.token === 'string' ? { type: 'auth', token: e.token } : { error: 'auth: token must be a string' };
    case 'input_text':
      if (typeof e.text !== 'string' || !e.text.trim()) return { error: 'input_text: text must be a non-empty string' };
      if ([...e.text].length > MAX_TEXT_CHARS)
        return { error: `input_text: text must be at most ${MAX_TEXT_CHARS} characters` };
      return { type: 'input_text', text: e.text.trim() };
    case 'tool_result':
      return typeof e.callId === 'string'
        ? { type: 'tool_result', callId: e.callId, output: e.output ?? null }
        : { error: 'tool_result: callId must be a string' };
    case 'end':
      return { type: 'end' };
    default:
      return { error: `unknown event type ${String(e.type).slice(0, 40)}` };
  }
}

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
  /** This process's connections by connection id, for the heartbeat (owner of their session rows). */
  const instance = newId('rti');
  const owned = new Map<string, { sessionId: string; ws: WebSocket; accountId: string; keyId: string }>();
  /** Sockets that answered the last ping; one silent for a whole heartbeat is dead and terminated. */
  const alive = new WeakSet<WebSocket>();
  /** Last check of each key (and its account) still allowed to run a session: keyId → verdict. */
  const authChecked = new Map<string, { ok: boolean; at: number }>();
  const onAuthChange = (msg: { kind: string; keyId?: string; accountId?: string }) => {
    if (msg.kind === 'key' && msg.keyId) authChecked.delete(msg.keyId);
    else authChecked.clear();
  };
  rt.authChanges?.on('change', onAuthChange);
  /** Keys whose check is older than LIVE_AUTH_RECHECK_MS are read again, in one batch. */
  const refusedKeys = async (conns: { accountId: string; keyId: string }[]): Promise<Set<string>> => {
    const now = Date.now();
    for (const [k, v] of authChecked) if (now - v.at >= config.LIVE_AUTH_RECHECK_MS) authChecked.delete(k);
    const due = conns.filter((c) => !authChecked.has(c.keyId));
    if (due.length) {
      const keyIds = [...new Set(due.map((c) => c.keyId))];
      const live = await rt.accounts.liveKeys(keyIds);
      for (const id of keyIds) {
        const k = live.get(id);
        const ok = !!k && k.scopes.includes('ai') && API_PLANS.includes(k.plan);
        authChecked.set(id, { ok, at: now });
      }
    }
    return new Set(conns.filter((c) => authChecked.get(c.keyId)?.ok === false).map((c) => c.keyId));
  };
  let beating = false;
  const heartbeat = setInterval(() => {
    for (const ws of open) {
      if (ws.readyState !== ws.OPEN) continue;
      // No pong since the previous ping: the peer is gone (a closed laptop, a lost network).
      if (!alive.has(ws)) {
        ws.terminate();
        continue;
      }
      alive.delete(ws);
      ws.ping();
    }
    if (beating || !owned.size) return;
    beating = true;
    const snapshot = [...owned];
    Promise.all([
      sessions.heartbeat(
        instance,
        snapshot.map(([conn, o]) => ({ sessionId: o.sessionId, conn })),
      ),
      refusedKeys(snapshot.map(([, o]) => o)),
    ])
      .then(([{ lost, ended }, refused]) => {
        for (const conn of lost) {
          // A connection of another process took the session over: this one stops answering.
          owned.get(conn)?.ws.close(4409, 'superseded by a newer connection to this session');
          owned.delete(conn);
        }
        for (const conn of ended) {
          owned.get(conn)?.ws.close(1000, 'session ended');
          owned.delete(conn);
        }
        for (const [conn, o] of snapshot) {
          if (!refused.has(o.keyId) || !owned.has(conn)) continue;
          o.ws.close(
            4403,
            'the key that opened this session was revoked or lost the ai scope, or the account lost API access',
          );
          owned.delete(conn);
        }
      })
      .catch((err: unknown) => log.warn('live heartbeat failed', { err: err as Error }))
      .finally(() => (beating = false));
  }, config.LIVE_HEARTBEAT_MS);
  heartbeat.unref();
  /** Turns per account in this process: a token bucket (LIVE_TURNS_PER_MINUTE, at most 5 at once). */
  const turnBuckets = new Map<string, { tokens: number; at: number }>();
  const bucketSize = Math.min(5, config.LIVE_TURNS_PER_MINUTE);
  const takeTurn = (accountId: string): boolean => {
    const now = Date.now();
    const b = turnBuckets.get(accountId) ?? { tokens: bucketSize, at: now };
    b.tokens = Math.min(bucketSize, b.tokens + ((now - b.at) * config.LIVE_TURNS_PER_MINUTE) / 60_000);
    b.at = now;
    if (turnBuckets.size > 10_000) for (const [k, v] of turnBuckets) if (v.tokens >= bucketSize) turnBuckets.delete(k);
    turnBuckets.set(accountId, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };
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
      alive.add(ws);
      ws.on('pong', () => alive.add(ws));
      ws.once('close', () => open.delete(ws));
      accept(ws, url.searchParams.get('token'), origin).catch((err: unknown) => {
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
  /** Close a refused connection, and cut it if the client does not finish the close handshake. */
  const refuse = (ws: WebSocket, code: number, reason: string) => {
    ws.close(code, reason);
    setTimeout(() => ws.terminate(), REFUSED_TERMINATE_MS).unref();
  };

  async function accept(ws: WebSocket, queryToken: string | null, origin: string | undefined) {
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
    const auth = await rt.accounts.byIds(doc.accountId, doc.keyId);
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
    runSession(ws, doc, authAccount, auth.key, handle, early);
  }

  function runSession(
    ws: WebSocket,
    doc: LiveSessionDoc,
    account: AuthAccount,
    key: ApiKeyDoc,
    handle: string,
    early: [RawData, boolean][],
  ) {
    const slog = log.child({ component: 'realtime', sessionId: doc._id });
    liveTools ??= createLiveTools(rt);
    const tools = liveTools;
    const abort = new AbortController();
    const pendingCalls = new Map<string, (output: unknown) => void>();
    const history: LiveHistoryEntry[] = [...doc.history];
    const voice = catalogue.resolve(doc.voice);
    const vad = new EnergyVad(doc.turnDetection);
    let queue = Promise.resolve();
    let queued = 0;
    let ended = false;
    let lastAudioRefusal = 0;

    const clientDefs: ToolDefinition[] = doc.clientTools.map((name: LiveClientTool) => ({
      name,
      description: CLIENT_TOOL_SPECS[name].description,
      input: CLIENT_TOOL_SPECS[name].input,
      scope: 'ai',
      spends: [],
      async run(args) {
        const callId = newId('call');
        const output = await new Promise<unknown>((resolve) => {
          const t = setTimeout(() => {
            pendingCalls.delete(callId);
            resolve(undefined);
          }, config.LIVE_CLIENT_TOOL_TIMEOUT_MS);
          pendingCalls.set(callId, (out) => {
            clearTimeout(t);
            pendingCalls.delete(callId);
            resolve(out);
          });
          send(ws, { type: 'tool.call', callId, name, args });
        });
        if (output === undefined)
          return errorArtifact(
            `No answer from ${name}`,
            `the device did not answer ${name} within ${config.LIVE_CLIENT_TOOL_TIMEOUT_MS} ms`,
            { tool: name, code: 'client_tool_timeout' },
          );
        const said = typeof output === 'string' ? output : JSON.stringify(output).slice(0, 500);
        return {
          type: 'platform_action',
          title: name,
          data: { action: name, output, line: `The device answered: ${said}.`, clientTool: true },
        };
      },
    }));
    // A persona session offers only the actions its persona's tools map to (doc.tools, locked at open),
    // and any session only those the key's scopes allow now (SPEC §5; a key may have lost a scope).
    const allowed = new Set<string>(tools.allowed(key.scopes));
    const offered = new Set(doc.tools.filter((a) => allowed.has(a)));
    const allTools = [...tools.defs.filter((d) => offered.has(d.name)), ...clientDefs];
    const clientNames = new Set<string>(LIVE_CLIENT_TOOLS);

    /** Speak a reply sentence by sentence through the speech pool; skipped past the buffer bound. */
    const speak = async (text: string): Promise<number> => {
      let bytes = 0;
      for (const sentence of speakableSentences(text)) {
        if (abort.signal.aborted || ws.readyState !== ws.OPEN) break;
        const stop = new AbortController();
        let skipped = false;
        try {
          await rt.amqp.rpcStream<SpeechRpcReply>(
            'speech',
            { text: sentence, voice: voice.name },
            config.SPEECH_RPC_TIMEOUT_MS,
            (pcm) => {
              if (skipped || ws.readyState !== ws.OPEN) return;
              // A slow client: stop the audio of this reply instead of buffering it without bound.
              if (ws.bufferedAmount > config.LIVE_MAX_BUFFERED_BYTES) {
                skipped = true;
                stop.abort(new Error('backpressure'));
                return;
              }
              bytes += pcm.length;
              ws.send(pcm, { binary: true });
            },
            { signal: AbortSignal.any([abort.signal, stop.signal]) },
          );
        } catch (err) {
          if (!skipped && !abort.signal.aborted) {
            slog.warn('live speech failed', { err: err as Error });
            send(ws, {
              type: 'error',
              code: 'speech_unavailable',
              message: 'the speech pool did not answer; the rest of this reply is text only',
            });
            break;
          }
        }
        if (skipped) {
          send(ws, {
            type: 'error',
            code: 'backpressure',
            message: `the client is not reading fast enough (over ${config.LIVE_MAX_BUFFERED_BYTES} bytes unsent): the rest of this reply's audio was skipped`,
          });
          break;
        }
      }
      return bytes;
    };

    const turn = async (text: string) => {
      if (doc.ambient && doc.deviceName && !addresses(text, doc.deviceName)) {
        send(ws, { type: 'turn.ignored', reason: 'not_addressed', text });
        return;
      }
      if (!takeTurn(doc.accountId)) {
        send(ws, {
          type: 'error',
          code: 'rate_limited',
          message: `at most ${config.LIVE_TURNS_PER_MINUTE} turns a minute per account: this turn was not answered`,
        });
        return;
      }
      // The session may have been ended elsewhere, or used up its time or turns: no more turns.
      const claim = await sessions.claimTurn(doc._id);
      if (!claim.ok) {
        ended = true;
        abort.abort(new Error('ended'));
        if ('limit' in claim) ws.close(SESSION_LIMIT_CLOSE, claim.limit);
        else ws.close(1000, 'session ended');
        return;
      }
      const spoken = 'Answer in short spoken sentences, no markdown or links.';
      const system = doc.profile
        ? `${doc.profile.instructions}\n\nYou are ${doc.profile.name}, speaking aloud in a live conversation. ${spoken}`
        : `You are ${doc.deviceName ?? 'the desk robot'}, a voice assistant speaking through a desk robot. ${spoken}`;
      const messages: EngineMessage[] = [
        { role: 'system', content: system },
        ...history.map((h) => ({ role: h.role, content: h.content }) as EngineMessage),
        { role: 'user', content: text },
      ];
      const turnId = newId('lturn');
      // The user spoke before the tools ran: events list the turn, then its tool calls, then the reply.
      const userAt = new Date();
      let reply = '';
      let failed = false;
      for await (const ev of runTurn({
        engine,
        tools: allTools,
        messages,
        mode: 'fast',
        ctx: { account, key, requestId: turnId, turnId },
        signal: abort.signal,
      })) {
        if (ev.type === 'text-delta') send(ws, { type: 'assistant.text', delta: ev.delta });
        else if (ev.type === 'tool-output-available') {
          if (!clientNames.has(ev.toolName))
            send(ws, { type: 'tool.result', callId: ev.toolCallId, name: ev.toolName, artifact: ev.output });
          const call = {
            name: ev.toolName,
            callId: ev.toolCallId,
            type: ev.output.type,
            title: ev.output.title,
            ok: ev.output.type !== 'error',
            at: new Date(),
          };
          await sessions
            .recordToolCall(doc, call)
            .catch((err: unknown) => slog.warn('live tool call not recorded', { err: err as Error }));
          await sessions
            .addSpent(doc._id, tools.chargedFor(ev.output))
            .catch((err: unknown) => slog.warn('live session spend not recorded', { err: err as Error }));
          if (doc.profile)
            await personaEvents
              .toolCall(doc, call)
              .catch((err: unknown) => slog.warn('persona tool_call event not written', { err: err as Error }));
        } else if (ev.type === 'error') {
          failed = true;
          send(ws, { type: 'error', code: ev.code, message: ev.errorText });
        } else if (ev.type === 'turn-finish') reply = ev.text;
      }
      if (abort.signal.aborted || failed) return;
      send(ws, { type: 'assistant.text', text: reply });
      const audioBytes = reply ? await speak(reply) : 0;
      const entries: LiveHistoryEntry[] = [
        { role: 'user', content: text, at: userAt },
        { role: 'assistant', content: reply, at: new Date() },
      ];
      const handle = await sessions.recordTurn(doc, entries);
      if (doc.profile)
        await personaEvents
          .turns(doc, entries)
          .catch((err: unknown) => slog.warn('persona turn events not written', { err: err as Error }));
      history.push(...entries);
      if (history.length > 40) history.splice(0, history.length - 40);
      send(ws, { type: 'resumption', handle, audioBytes });
    };

    /** A persona's greeting: its first assistant turn, spoken once per session (the first connect). */
    const greet = async () => {
      const greeting = doc.profile?.greeting.trim();
      if (!greeting || doc.greeted || !(await sessions.claimGreeting(doc._id))) return;
      send(ws, { type: 'assistant.text', text: greeting, greeting: true });
      const audioBytes = await speak(greeting);
      const entry: LiveHistoryEntry = { role: 'assistant', content: greeting, at: new Date() };
      const handle = await sessions.recordTurn(doc, [entry]);
      if (doc.profile)
        await personaEvents
          .turns(doc, [entry])
          .catch((err: unknown) => slog.warn('persona greeting event not written', { err: err as Error }));
      history.push(entry);
      send(ws, { type: 'resumption', handle, audioBytes });
    };

    const enqueue = (text: string) => {
      if (queued >= MAX_QUEUED_TURNS)
        return send(ws, {
          type: 'error',
          code: 'busy',
          message: `at most ${MAX_QUEUED_TURNS} turns may wait behind the one being answered`,
        });
      queued++;
      queue = queue
        .then(() => (abort.signal.aborted ? undefined : turn(text)))
        .catch((err: unknown) => {
          if (abort.signal.aborted) return;
          slog.error('live turn failed', { err: err as Error });
          send(ws, {
            type: 'error',
            code: 'internal_error',
            message: 'the turn failed; nothing was charged for its tools that did not finish',
          });
        })
        .finally(() => queued--);
    };

    const onAudio = async (pcm: Buffer) => {
      if (!transcription) {
        const now = Date.now();
        if (now - lastAudioRefusal >= 1000) {
          lastAudioRefusal = now;
          send(ws, {
            type: 'error',
            code: 'audio_not_supported',
            message:
              'this deployment has no speech recognition (capabilities.audioIn is false): text turns only, send {"type":"input_text","text":…}',
          });
        }
        return;
      }
      for (const ev of vad.push(pcm)) {
        if (ev.type === 'speech-start') send(ws, { type: 'speech.started' });
        else {
          try {
            const text = await transcription.transcribe(ev.audio, abort.signal);
            if (!text) {
              send(ws, { type: 'transcript', role: 'user', text: '' });
              continue;
            }
            send(ws, { type: 'transcript', role: 'user', text });
            enqueue(text);
          } catch (err) {
            if (abort.signal.aborted) return;
            slog.warn('live transcription failed', { err: err as Error });
            send(ws, { type: 'error', code: 'transcription_failed', message: (err as Error).message });
          }
        }
      }
    };

    let audioChain = Promise.resolve();
    let audioWaiting = 0;
    let lastDropNotice = 0;
    ws.on('message', (data: RawData, isBinary) => {
      if (ended) return;
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
      if (isBinary) {
        // Audio waits here while a turn is transcribed: past the bound it is dropped, and said so.
        if (audioWaiting + buf.length > MAX_AUDIO_WAITING_BYTES) {
          if (Date.now() - lastDropNotice >= 1000) {
            lastDropNotice = Date.now();
            send(ws, {
              type: 'error',
              code: 'audio_dropped',
              message: `over ${MAX_AUDIO_WAITING_BYTES} bytes of audio wait for the previous turn's transcription: frames are dropped until it is done`,
            });
          }
          return;
        }
        audioWaiting += buf.length;
        audioChain = audioChain.then(() => onAudio(buf)).finally(() => (audioWaiting -= buf.length));
        return;
      }
      const e = parseEvent(buf.toString('utf8'));
      if ('error' in e) return send(ws, { type: 'error', code: 'invalid_event', message: e.error });
      if (e.type === 'input_text') enqueue(e.text);
      else if (e.type === 'tool_result') {
        const resolve = pendingCalls.get(e.callId);
        if (resolve) resolve(e.output);
        else
          send(ws, {
            type: 'error',
            code: 'unknown_call',
            message: `no tool call ${e.callId.slice(0, 64)} is waiting`,
          });
      } else if (e.type === 'end') {
        ended = true;
        abort.abort(new Error('ended'));
        void sessions.setStatus(doc._id, 'ended').finally(() => ws.close(1000, 'session ended'));
      }
    });
    const limitTimer = setTimeout(
      () => {
        ended = true;
        abort.abort(new Error('ended'));
        void sessions
          .endForLimit(doc._id)
          .finally(() =>
            ws.close(
              SESSION_LIMIT_CLOSE,
              `session limit reached: a session lasts ${Math.round(config.LIVE_SESSION_MAX_MS / 1000)} s; open a new one`,
            ),
          );
      },
      Math.min(2 ** 31 - 1, Math.max(0, doc.createdAt.getTime() + config.LIVE_SESSION_MAX_MS - Date.now())),
    );
    limitTimer.unref();
    ws.on('close', () => {
      clearTimeout(limitTimer);
      abort.abort(new Error('closed'));
      if (bySession.get(doc._id) === ws) bySession.delete(doc._id);
      for (const r of pendingCalls.values()) r(undefined);
      // Only while no newer connection took the session over (its claim moved `connections` on).
      if (!ended)
        void sessions
          .setStatus(doc._id, 'dropped', { connections: doc.connections })
          .catch((err: unknown) => slog.warn('live session not marked dropped', { err: err as Error }));
    });
    ws.on('error', () => undefined);

    queue = queue.then(greet).catch((err: unknown) => slog.warn('persona greeting failed', { err: err as Error }));
    send(ws, {
      type: 'session.started',
      sessionId: doc._id,
      persona: doc.persona,
      voice: doc.voice,
      deviceName: doc.deviceName,
      ambient: doc.ambient,
      tools: [...offered],
      clientTools: doc.clientTools,
      turnDetection: doc.turnDetection,
      capabilities,
      resumptionHandle: handle,
      historyTurns: Math.floor(history.length / 2),
    });
    for (const [data, isBinary] of early) ws.emit('message', data, isBinary);
  }

  return {
    get connections() {
      return open.size;
    },
    async close() {
      clearInterval(heartbeat);
      rt.authChanges?.off('change', onAuthChange);
      server.off('upgrade', onUpgrade);
      for (const ws of open) ws.close(1001, 'server shutting down');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      for (const ws of open) ws.terminate();
    },
  };
}
