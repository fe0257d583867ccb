import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One open Server-Sent Events stream, read with eventsource-parser over fetch. */
export interface SseStream {
  status: number;
  headers: Headers;
  /** Events so far, in order. */
  events: EventSourceMessage[];
  /** Comments so far (`: heartbeat` arrives as ' heartbeat'). */
  comments: string[];
  /** The `retry:` the server asked for, if any. */
  retry?: number;
  /** Resolves when the server ended the stream (or the body of a non-stream answer was read). */
  ended: Promise<void>;
  /** The body of a non-stream answer (an error, a 204). */
  text?: string;
  /** Resolves once an event satisfies `pred` (already received or still to come). */
  next(pred?: (e: EventSourceMessage) => boolean, timeoutMs?: number): Promise<EventSourceMessage>;
  close(): void;
}

/** Opens `url` as an event stream with `headers` (the key, Last-Event-ID). */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal });
  const listeners = new Set<() => void>();
  const stream: SseStream = {
    status: res.status,
    headers: res.headers,
    events: [],
    comments: [],
    ended: Promise.resolve(),
    next(pred = () => true, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = stream.events.find(pred);
          if (!hit) return false;
          cleanup();
          resolve(hit);
          return true;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(`no such event within ${timeoutMs} ms; got ${stream.events.map((e) => e.event).join(', ')}`),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(listener);
        };
        const listener = () => void check();
        if (!check()) listeners.add(listener);
      });
    },
    close: () => ac.abort(),
  };
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    stream.text = await res.text();
    return stream;
  }
  const parser = createParser({
    onEvent(e) {
      stream.events.push(e);
      for (const l of [...listeners]) l();
    },
    onComment: (c) => stream.comments.push(c),
    onRetry: (ms) => {
      stream.retry = ms;
    },
  });
  stream.ended = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        parser.feed(decoder.decode(chunk, { stream: true }));
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    }
  })();
  return stream;
}
