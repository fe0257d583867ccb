import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from './metrics';

export interface Probe {
  name: string;
  check(): Promise<void> | void;
}

/**
 * Seconds a 503 from /readyz asks a caller to wait before asking again (RFC 9110 §10.2.3): about
 * how often the probes are worth repeating while MongoDB or RabbitMQ is away.
 */
export const READY_RETRY_AFTER_S = 5;

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
      if (failures.length) res.setHeader('Retry-After', String(READY_RETRY_AFTER_S));
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(failures.length ? { status: 'unavailable', failures } : { status: 'ready' }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  // A port in use (or not ours to take) rejects: the process's start fails with the reason.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
