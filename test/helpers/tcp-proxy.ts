import net from 'node:net';

/**
 * A TCP proxy in front of a real server, so a test can cut the connection of the processes under
 * test (as a broker outage looks to them) without disturbing anyone else using that server, or
 * stall it: `pause()` stops forwarding in both directions with every connection left open (a
 * hung node, or a network path that drops packets silently), `resume()` forwards again.
 */
export async function startTcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  let paused = false;
  /** Closes that happened while paused, delivered to the other side on resume. */
  const held: (() => void)[] = [];
  /** `from`'s bytes to `to`, with back-pressure; nothing is read from `from` while paused. */
  const forward = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (!paused) from.resume();
        });
      }
    });
  };
  const listen = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => s.destroy());
          // Not even the FIN of a peer that gave up is read while paused (readStop).
          if (paused) s.pause();
        }
        forward(client, upstream);
        forward(upstream, client);
        // A stalled path does not carry a close either: while paused, one side going away (the
        // broker's own heartbeat timeout closing its end) reaches the other side only on resume,
        // so the process under test notices the stall by itself, as it would on a real network.
        const propagate = (to: net.Socket) => () => (paused ? held.push(() => to.destroy()) : to.destroy());
        client.on('close', propagate(upstream));
        upstream.on('close', propagate(client));
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await listen();
  return {
    get port() {
      return port;
    },
    /** Drop every connection and refuse new ones. */
    async cut() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
    /** Accept connections again on the same port. */
    restore: listen,
    /** Stop forwarding bytes, both ways, on every connection, new ones included; all stay open. */
    pause() {
      paused = true;
      for (const s of sockets) s.pause();
    },
    /** Forward again (what was sent meanwhile waits in the socket buffers and goes through). */
    resume() {
      paused = false;
      for (const s of sockets) s.resume();
      for (const close of held.splice(0)) close();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => (server?.listening ? server.close(() => resolve()) : resolve()));
    },
  };
}
