import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Prometheus text and its content type. */
interface MetricsText {
  text: string;
  contentType: string;
}

/**
 * The API's metrics listener (METRICS_PORT on METRICS_HOST): GET /metrics only, answered by
 * `metrics` (the supervisor's gathering of every API process, or the lone API process's own
 * registry); anything else is 404 in the Error shape. Kept off the API port so that whoever can
 * reach the API cannot read the metrics.
 */
export async function startMetricsServer(opts: { port: number; host: string; metrics: () => Promise<MetricsText> }) {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      opts.metrics().then(
        ({ text, contentType }) => {
          res.setHeader('Content-Type', contentType);
          res.end(req.method === 'HEAD' ? undefined : text);
        },
        () => {
          res.statusCode = 500;
          res.setHeader('Content-Type', 'application/json; charset=utf-8');
          res.end(errorBody('internal_error', 'the metrics could not be gathered'));
        },
      );
      return;
    }
    res.statusCode = 404;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(errorBody('not_found', 'this port serves GET /metrics only'));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const errorBody = (code: string, message: string) =>
  JSON.stringify({ error: { code, message, requestId: `req_${randomUUID().replaceAll('-', '')}` } });
