import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodePng } from '../../platform/media/png';

export interface FakeServer {
  url: string;
  /** Requests received: method, path, parsed JSON body. */
  requests: { method: string; path: string; body: any; headers: http.IncomingHttpHeaders }[];
  close(): Promise<void>;
}

/** A tiny HTTP server from a route table; each handler gets the parsed JSON body. */
export async function fakeServer(routes: (req: { method: string; path: string; body: any; headers: http.IncomingHttpHeaders }, res: http.ServerResponse) => void | Promise<void>): Promise<FakeServer> {
  const requests: FakeServer['requests'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = raw;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        // not JSON
      }
      const entry = { method: req.method ?? 'GET', path: req.url ?? '/', body, headers: req.headers };
      requests.push(entry);
      Promise.resolve(routes(entry, res)).catch((err) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** A solid-colour PNG. */
export const solidPng = (w: number, h: number, rgb: [number, number, number]) => {
  const px = new Uint8Array(w * h * 3);
  for (let i = 0; i < w * h; i++) px.set(rgb, i * 3);
  return encodePng(w, h, px, 3);
};

/** Reference images: /red.png, /blue.png, /photo.jpg (not a PNG), anything else 404. */
export const referenceImages = () =>
  fakeServer((req, res) => {
    if (req.path === '/red.png' || req.path === '/blue.png') {
      res.setHeader('content-type', 'image/png');
      return void res.end(solidPng(16, 16, req.path === '/red.png' ? [220, 20, 20] : [20, 40, 220]));
    }
    if (req.path === '/photo.jpg') {
      res.setHeader('content-type', 'image/jpeg');
      return void res.end(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xd9]));
    }
    res.statusCode = 404;
    res.end('not found');
  });
