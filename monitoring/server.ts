import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from './metrics';

export interface Probe {
  name: string;
  check(): Promise<void> | void;
}

/** Answer /healthz (alive), /readyz (every probe passes) and /metrics. */
export async function probeHandler(probes: readonly Probe[]) {
  const failures: string[] = [];
  await Promise.all(
    probes.map(async (p) => {
      try {
        await Promise.race([
          p.check(),
          new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), 2000).unref()),
        ]);
      } catch (err) {
        failures.push(`${p.name}: ${(err as Error).message}`);
      }
    }),
  );
  return failures;
}

/** A small HTTP server for processes without the API: /metrics, /healthz, /readyz. */
export async function startMonitoringServer(port: number, probes: readonly Probe[]) {
  const server = http.createServer(async (req, res) => {
    if (req.url === '/metrics') {
      res.setHeader('Content-Type', registry.contentType);
      res.end(await registry.metrics());
    } else if (req.url === '/healthz') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ status: 'ok' }));
    } else if (req.url === '/readyz') {
      const failures = await probeHandler(probes);
      res.statusCode = failures.length ? 503 : 200;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(failures.length ? { status: 'unavailable', failures } : { status: 'ready' }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '0.0.0.0', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
