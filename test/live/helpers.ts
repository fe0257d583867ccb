import WebSocket from 'ws';

export type ServerEvent = Record<string, any> & { type: string };

/** A realtime client: every JSON event and every binary frame, and a wait for an event. */
export interface LiveClient {
  ws: WebSocket;
  events: ServerEvent[];
  audio: Buffer[];
  audioBytes(): number;
  closed: Promise<{ code: number; reason: string }>;
  send(e: Record<string, unknown>): void;
  next(type: string, pred?: (e: ServerEvent) => boolean, timeoutMs?: number): Promise<ServerEvent>;
  close(): void;
}

export function liveConnect(url: string, opts: { token?: string; origin?: string } = {}): LiveClient {
  const ws = new WebSocket(
    opts.token ? `${url}?token=${encodeURIComponent(opts.token)}` : url,
    opts.origin ? { origin: opts.origin } : {},
  );
  const events: ServerEvent[] = [];
  const audio: Buffer[] = [];
  let seen = 0;
  const waiters = new Set<() => void>();
  ws.on('message', (data, isBinary) => {
    if (isBinary) audio.push(Buffer.from(data as Buffer));
    else events.push(JSON.parse(data.toString()));
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const w of waiters) w();
    }),
  );
  ws.on('error', () => undefined);
  return {
    ws,
    events,
    audio,
    audioBytes: () => audio.reduce((n, b) => n + b.length, 0),
    closed,
    send: (e) => {
      const go = () => ws.send(JSON.stringify(e));
      if (ws.readyState === ws.OPEN) go();
      else ws.once('open', go);
    },
    next(type, pred = () => true, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (let i = seen; i < events.length; i++) {
            const e = events[i]!;
            if (e.type === type && pred(e)) {
              seen = i + 1;
              waiters.delete(check);
              clearTimeout(t);
              resolve(e);
              return;
            }
          }
          if (ws.readyState === ws.CLOSED) {
            waiters.delete(check);
            clearTimeout(t);
            reject(new Error(`closed while waiting for ${type}; events: ${JSON.stringify(events).slice(0, 600)}`));
          }
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${type} within ${timeoutMs} ms; events: ${JSON.stringify(events).slice(0, 800)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => ws.close(),
  };
}

/** s16le PCM of a sine tone (amplitude 0..32767) or silence (amplitude 0), 24 kHz mono. */
export function tone(ms: number, amplitude = 8000, hz = 440): Buffer {
  const n = Math.round((24_000 * ms) / 1000);
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / 24_000)), i * 2);
  return b;
}
