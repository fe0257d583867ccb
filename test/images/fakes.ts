import type http from 'node:http';
import { encodePng } from '../../platform/media/codec';
import { fakeServer as providerServer, type Recorded } from '../helpers/fake-provider';

export interface FakeServer {
  url: string;
  /** Requests received: method, path, parsed JSON body. */
  requests: { method: string; path: string; body: any; headers: http.IncomingHttpHeaders }[];
  close(): Promise<void>;
}

const parsed = (raw: string): any => {
  try {
    return raw ? JSON.parse(raw) : undefined;
  } catch {
    return raw; // not JSON
  }
};

/** A tiny HTTP server from a route table; each handler gets the parsed JSON body (on helpers/fake-provider). */
export async function fakeServer(
  routes: (
    req: { method: string; path: string; body: any; headers: http.IncomingHttpHeaders },
    res: http.ServerResponse,
  ) => void | Promise<void>,
): Promise<FakeServer> {
  const toEntry = (r: Recorded) => ({ method: r.method, path: r.url, body: parsed(r.body), headers: r.headers });
  const inner = await providerServer((r, res) => routes(toEntry(r), res));
  return {
    url: inner.url,
    get requests() {
      return inner.requests.map(toEntry);
    },
    close: inner.close,
  };
}

/** A solid-colour PNG. */
export const solidPng = (w: number, h: number, rgb: [number, number, number]) => {
  const data = Buffer.alloc(w * h * 3);
  for (let i = 0; i < w * h; i++) data.set(rgb, i * 3);
  return encodePng({ width: w, height: h, channels: 3, data });
};

/** Reference images: /red.png, /blue.png, /photo.jpg (not a PNG), anything else 404. */
export const referenceImages = () =>
  fakeServer(async (req, res) => {
    if (req.path === '/red.png' || req.path === '/blue.png') {
      res.setHeader('content-type', 'image/png');
      return void res.end(await solidPng(16, 16, req.path === '/red.png' ? [220, 20, 20] : [20, 40, 220]));
    }
    if (req.path === '/photo.jpg') {
      res.setHeader('content-type', 'image/jpeg');
      return void res.end(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xd9]));
    }
    res.statusCode = 404;
    res.end('not found');
  });
