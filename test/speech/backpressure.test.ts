import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { writeAudio } from '../../api/speech/speech.routes';
import { SPEECH_UNREAD_MAX_BYTES } from '../../platform/speech/limits';

/**
 * How POST /speech writes audio to a client that does not read, over real sockets. Through the
 * whole stack this cannot be shown on loopback: the kernel there absorbs about 4 MB per
 * connection, more than the longest audio a call makes (30 s, 1.44 MB). So the server here
 * writes 8 MB, 64 KiB at a time as the speech pool sends it.
 */
describe('speech: audio written to a client that stops reading', function () {
  this.timeout(20_000);
  const PIECE = 64 * 1024;
  const TOTAL = 8 * 1024 * 1024;

  async function serve(client: (port: number) => Promise<unknown>) {
    let maxUnsent = 0;
    let written = 0;
    let abortReason: string | undefined;
    const server = http.createServer(async (_req, res) => {
      const abort = new AbortController();
      abort.signal.addEventListener('abort', () => (abortReason = (abort.signal.reason as Error).message));
      res.writeHead(200, { 'content-type': 'audio/L16; rate=24000; channels=1' });
      for (let sent = 0; sent < TOTAL && !abort.signal.aborted; sent += PIECE) {
        writeAudio(res, Buffer.alloc(PIECE, 1), abort);
        if (!abort.signal.aborted) written += PIECE;
        maxUnsent = Math.max(maxUnsent, res.writableLength);
        await new Promise((r) => setImmediate(r));
      }
      if (abort.signal.aborted) res.destroy();
      else res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const got = await client((server.address() as AddressInfo).port);
      return { got, maxUnsent, written, abortReason };
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }

  it('when the client never reads, then at most 1 MiB (plus one piece) waits in the API and the call is stopped', async () => {
    const r = await serve(
      (port) =>
        new Promise<void>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => {
            s.pause(); // never reads the answer
            s.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
            setTimeout(() => {
              s.destroy();
              resolve();
            }, 3000);
          });
        }),
    );
    expect(r.abortReason).to.equal(`the client left more than ${SPEECH_UNREAD_MAX_BYTES} bytes unread`);
    expect(r.maxUnsent).to.be.at.most(SPEECH_UNREAD_MAX_BYTES + PIECE);
    expect(r.written).to.be.below(TOTAL);
  });

  it('when the client reads as the audio comes, then all of it arrives and nothing is stopped', async () => {
    const r = await serve(async (port) => {
      const res = await fetch(`http://127.0.0.1:${port}/`);
      let n = 0;
      for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) n += c.length;
      return n;
    });
    expect(r.abortReason).to.equal(undefined);
    expect(r.got).to.equal(TOTAL);
  });
});
