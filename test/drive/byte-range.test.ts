import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import express from 'express';
import { sendBytes } from '../../api/http/byte-range';
import { eventually } from '../../scripts/harness/http';

describe('sendBytes (api/http/byte-range.ts)', () => {
  let server: Server;
  let base: string;
  const opened: Readable[] = [];
  const SIZE = 64 * 1024 * 1024;

  before(async () => {
    const app = express();
    app.get('/big', (req, res) => {
      sendBytes(req, res, {
        size: SIZE,
        contentType: 'application/octet-stream',
        open: () => {
          // A large, endless-feeling source (a GridFS download stand-in), read on demand.
          let sent = 0;
          const s = new Readable({
            read() {
              if (sent >= SIZE) return this.push(null);
              const n = Math.min(64 * 1024, SIZE - sent);
              sent += n;
              setImmediate(() => this.push(Buffer.alloc(n, 7)));
            },
          });
          opened.push(s);
          return s;
        },
      });
    });
    app.get('/small', (req, res) =>
      sendBytes(req, res, { size: 5, contentType: 'text/plain', open: () => Readable.from([Buffer.from('hello')]) }),
    );
    server = app.listen(0);
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise((r) => server.close(r)));

  it('when the client aborts a download mid-way, then the source stream is destroyed and the server keeps serving', async () => {
    const ac = new AbortController();
    const res = await fetch(`${base}/big`, { signal: ac.signal });
    expect(res.status).to.equal(200);
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await reader.cancel().catch(() => undefined);
    await eventually(async () => (opened[0]?.destroyed ? true : null), 5000, 'the source destroyed');
    const small = await fetch(`${base}/small`);
    expect(await small.text()).to.equal('hello');
  });
});
