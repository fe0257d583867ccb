import type { Response } from 'express';
import type { TurnEvent } from '../../platform/assistant/turn-events';

/**
 * The Vercel AI SDK v5 UI-message stream over SSE (protocol v1), as ai@5.0.0's clients read it:
 * `data: <json>` per chunk, no `event:` lines, `data: [DONE]` at the end. Its chunk schema is
 * strict (unknown members fail the whole chunk), so only the members 5.0.0 knew are sent: for
 * example `finish` carries no finishReason and `start` carries the conversation in
 * messageMetadata.
 */
export const UI_STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
} as const;

/** The UI-message chunk a turn event becomes; null for events the protocol has no chunk for. */
export function toUiChunk(ev: TurnEvent): Record<string, unknown> | null {
  switch (ev.type) {
    case 'step-start':
      return { type: 'start-step' };
    case 'step-finish':
      return { type: 'finish-step' };
    case 'text-start':
    case 'text-end':
      return { type: ev.type, id: ev.id };
    case 'text-delta':
      return { type: 'text-delta', id: ev.id, delta: ev.delta };
    case 'tool-input-start':
      return { type: 'tool-input-start', toolCallId: ev.toolCallId, toolName: ev.toolName };
    case 'tool-input-available':
      return { type: 'tool-input-available', toolCallId: ev.toolCallId, toolName: ev.toolName, input: ev.input };
    case 'tool-output-available':
      return { type: 'tool-output-available', toolCallId: ev.toolCallId, output: ev.output };
    case 'tool-output-error':
      return { type: 'tool-output-error', toolCallId: ev.toolCallId, errorText: ev.errorText };
    case 'error':
      return { type: 'error', errorText: ev.errorText };
    case 'turn-finish':
      return null;
  }
}

/**
 * Writes one SSE response: headers at once (the first byte leaves before the engine starts),
 * chunks as they come (waiting for `drain` when the socket is full), `: keepalive` comments every
 * `keepaliveMs` until `end`. `closed` resolves when the client went away before the end.
 */
export function openUiStream(res: Response, opts: { keepaliveMs: number; headers?: Record<string, string> }) {
  let ended = false;
  let onGone!: () => void;
  const closed = new Promise<void>((resolve) => (onGone = resolve));
  res.on('close', () => {
    if (!res.writableFinished) onGone();
  });
  res.writeHead(200, { ...UI_STREAM_HEADERS, ...opts.headers });
  res.flushHeaders();
  const raw = async (s: string) => {
    if (ended || res.destroyed) return;
    if (!res.write(s)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
  };
  const keepalive = setInterval(() => {
    if (!ended && !res.destroyed && res.writableLength === 0) res.write(': keepalive\n\n');
  }, opts.keepaliveMs);
  keepalive.unref();
  return {
    closed,
    /** Whether the client is gone. */
    get gone() {
      return res.destroyed || (res.writableEnded && !res.writableFinished);
    },
    send: (chunk: Record<string, unknown>) => raw(`data: ${JSON.stringify(chunk)}\n\n`),
    /** `data: [DONE]` and the end of the response. */
    async end() {
      clearInterval(keepalive);
      await raw('data: [DONE]\n\n');
      ended = true;
      if (!res.destroyed) res.end();
    },
    /** Stop writing (the client left). */
    abandon() {
      clearInterval(keepalive);
      ended = true;
    },
  };
}
