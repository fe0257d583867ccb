import type { RawData, WebSocket } from 'ws';
import { LIVE_CLIENT_TOOLS, type LiveClientTool } from '../../contracts/live';
import type { SpeechRpcReply } from '../../contracts/speech';
import type { AuthAccount } from '../../platform/accounts/accounts';
import type { ChatEngine, EngineMessage } from '../../platform/assistant/engine';
import { errorArtifact } from '../../platform/assistant/execute';
import type { ToolDefinition } from '../../platform/assistant/tool';
import { runTurn } from '../../platform/assistant/turn';
import { newId } from '../../platform/infra/ids';
import type { Logger } from '../../platform/infra/log';
import type { ApiKeyDoc } from '../../platform/infra/mongo';
import type { createPersonaEventsHook } from '../../platform/personas/events';
import { type createLiveSessions, SESSION_LIMIT_CLOSE } from '../../platform/live/sessions';
import type { LiveHistoryEntry, LiveSessionDoc } from '../../platform/live/sessions.repository';
import { CLIENT_TOOL_SPECS, type LiveTools } from '../../platform/live/tools';
import type { TranscriptionEngine } from '../../platform/live/transcription';
import { EnergyVad } from '../../platform/live/vad';
import type { Runtime } from '../../platform/runtime';
import type { VoiceCatalogue } from '../../platform/speech/voices';
import {
  addresses,
  MAX_AUDIO_WAITING_BYTES,
  MAX_QUEUED_TURNS,
  parseEvent,
  speakableSentences,
} from './realtime-protocol';

/**
 * One live session on its WebSocket, split by step: the tools it offers (the client's own among
 * them), speaking a reply, a turn, and what the client sends (audio frames and JSON events).
 * The connection is accepted and authenticated in realtime.ts.
 */

/** What every session of this process shares (built once by attachRealtime). */
export interface RealtimeShared {
  rt: Runtime;
  sessions: ReturnType<typeof createLiveSessions>;
  engine: ChatEngine;
  transcription: TranscriptionEngine | null;
  catalogue: VoiceCatalogue;
  /** The platform tools a session may offer (built on the first session). */
  liveTools(): LiveTools;
  personaEvents: ReturnType<typeof createPersonaEventsHook>;
  /** Send a JSON event, unless the socket is closed, the client does not read, or errors flood. */
  send(ws: WebSocket, event: Record<string, unknown>): void;
  /** Whether the account may take one more turn now (the per-account bucket). */
  takeTurn(accountId: string): boolean;
  /** The connection carrying each session in this process: a newer one closes the older. */
  bySession: Map<string, WebSocket>;
  capabilities: Record<string, unknown>;
  log: Logger;
}

/** One running session: its socket, its document and what its steps share. */
interface Session {
  shared: RealtimeShared;
  ws: WebSocket;
  doc: LiveSessionDoc;
  account: AuthAccount;
  key: ApiKeyDoc;
  tools: LiveTools;
  slog: Logger;
  abort: AbortController;
  /** Client tool calls waiting for the device's tool_result, by call id. */
  pendingCalls: Map<string, (output: unknown) => void>;
  history: LiveHistoryEntry[];
  /** The session ended (the client's end, a limit, or ended elsewhere): what comes later is ignored. */
  ended: boolean;
}

/** Run session `doc` on `ws` (authenticated and claimed); `early` is what the client sent meanwhile. */
export function runSession(
  shared: RealtimeShared,
  ws: WebSocket,
  doc: LiveSessionDoc,
  account: AuthAccount,
  key: ApiKeyDoc,
  handle: string,
  early: [RawData, boolean][],
) {
  const { rt, sessions, send, bySession, capabilities, personaEvents } = shared;
  const { config } = rt;
  const s: Session = {
    shared,
    ws,
    doc,
    account,
    key,
    tools: shared.liveTools(),
    slog: shared.log.child({ component: 'realtime', sessionId: doc._id }),
    abort: new AbortController(),
    pendingCalls: new Map(),
    history: [...doc.history],
    ended: false,
  };
  const { tools, slog, abort, pendingCalls, history } = s;
  let queue = Promise.resolve();
  let queued = 0;
  // A persona session offers only the actions its persona's tools map to (doc.tools, locked at open),
  // and any session only those the key's scopes allow now (SPEC §5; a key may have lost a scope).
  const allowed = new Set<string>(tools.allowed(key.scopes));
  const offered = new Set(doc.tools.filter((a) => allowed.has(a)));
  const allTools = [...tools.defs.filter((d) => offered.has(d.name)), ...clientToolDefs(s)];
  const clientNames = new Set<string>(LIVE_CLIENT_TOOLS);

  const speak = speaker(s);

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
      .then(() => (abort.signal.aborted ? undefined : liveTurn(s, allTools, clientNames, speak, text)))
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

  onMessages(s, enqueue);
  const limitTimer = setTimeout(
    () => {
      s.ended = true;
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
    if (!s.ended)
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

/** The tools of the device (doc.clientTools): a call is sent to the client, which answers with a tool_result. */
function clientToolDefs(s: Session): ToolDefinition[] {
  const { ws, doc, pendingCalls } = s;
  const { send } = s.shared;
  const { config } = s.shared.rt;
  return doc.clientTools.map((name: LiveClientTool) => ({
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
}

/** Speak a reply sentence by sentence through the speech pool; skipped past the buffer bound. */
function speaker(s: Session): (text: string) => Promise<number> {
  const { ws, abort, slog } = s;
  const { rt, send, catalogue } = s.shared;
  const { config } = rt;
  const voice = catalogue.resolve(s.doc.voice);
  return async (text: string): Promise<number> => {
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
}

/**
 * One turn of the conversation: refused when the device is not addressed (ambient), the account
 * is over its turns, or the session cannot take a turn; otherwise the model's answer is streamed,
 * its tool calls recorded and charged, the reply spoken and the turn saved to the history.
 */
async function liveTurn(
  s: Session,
  allTools: ToolDefinition[],
  clientNames: Set<string>,
  speak: (text: string) => Promise<number>,
  text: string,
) {
  const { ws, doc, account, key, abort, slog, tools, history } = s;
  const { rt, send, takeTurn, sessions, engine, personaEvents } = s.shared;
  const { config } = rt;
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
    s.ended = true;
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
}

/** What the client sends once the session runs: audio frames (through turn detection) and JSON events. */
function onMessages(s: Session, enqueue: (text: string) => void) {
  const { ws, doc, abort, slog, pendingCalls } = s;
  const { send, sessions, transcription } = s.shared;
  const vad = new EnergyVad(doc.turnDetection);
  let lastAudioRefusal = 0;
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
    if (s.ended) return;
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
      s.ended = true;
      abort.abort(new Error('ended'));
      void sessions.setStatus(doc._id, 'ended').finally(() => ws.close(1000, 'session ended'));
    }
  });
}
