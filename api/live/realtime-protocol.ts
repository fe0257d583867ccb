import { secondSentenceAt, SPEECH_TEXT_MAX_CHARS } from '../../contracts/speech';

/**
 * The realtime protocol's bounds and the parsing of what a client sends (protocol in the README,
 * "Realtime protocol"); the server is in realtime.ts.
 */

/** Largest WebSocket message accepted (a JSON event or an audio frame). */
export const REALTIME_MAX_MESSAGE_BYTES = 256 * 1024;
/** How long a connection without ?token= may take to send {type:"auth", token}. */
export const AUTH_WAIT_MS = 5000;
/** Turns waiting behind the running one; more answer error `busy`. */
export const MAX_QUEUED_TURNS = 4;
/** Audio received but not yet through turn detection (it waits while a turn is transcribed): 10 s. */
export const MAX_AUDIO_WAITING_BYTES = 480_000;
/** Text of one input_text turn. */
export const MAX_TEXT_CHARS = 2000;
/** Bytes kept of what a connection sends before it is authenticated and its session runs. */
export const MAX_EARLY_BYTES = 64 * 1024;
/** After a refusal (4401/4403) the client has this long to finish the close handshake. */
export const REFUSED_TERMINATE_MS = 1000;
/** Headroom above LIVE_MAX_BUFFERED_BYTES for the events that tell a slow client its audio was cut. */
export const EVENT_HEADROOM_BYTES = 256 * 1024;
/** Error events per second per connection; more are dropped (a client sending garbage gets no flood back). */
export const MAX_ERRORS_PER_SECOND = 20;

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

export type ClientEvent =
  | { type: 'auth'; token: string }
  | { type: 'input_text'; text: string }
  | { type: 'tool_result'; callId: string; output: unknown }
  | { type: 'end' };

export function parseEvent(raw: string): ClientEvent | { error: string } {
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
