import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A local HTTP server standing in for a provider. `handle` answers each request; `requests`
 * records them. `gate()` returns a promise the handler can await, released by `open()`, so a
 * test can watch a job while the provider "works".
 */
export async function fakeServer(handle: (req: Recorded, res: http.ServerResponse) => void | Promise<void>) {
  const requests: Recorded[] = [];
  let release!: () => void;
  let gate = new Promise<void>((r) => (release = r));
  let gated = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const rec = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(rec);
      try {
        if (gated) await gate;
        await handle(rec, res);
      } catch (err) {
        res.statusCode = 500;
        res.end(String(err));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Hold every answer until open() is called. */
    hold() {
      gated = true;
      gate = new Promise<void>((r) => (release = r));
    },
    open() {
      gated = false;
      release();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Poll until `check` is truthy (eventually() with the message first). */
export async function until<T>(
  check: () => Promise<T | undefined | null | false>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export { listenToEvents as listenEvents } from './events';
