import diagnostics_channel from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';
import { startMetricsServer } from '../monitoring/metrics-server';
import { runMain } from '../platform/infra/main';
import { ownMetrics, start } from './app';
import { joinsSupervisor } from './supervised';

runMain('api', async (config) => {
  // Tests and benchmarks see which of the API_PROCESSES answered. The channel publishes before the
  // app runs, so even a response the app sends synchronously carries the header.
  if (config.SERVED_BY_HEADER) {
    diagnostics_channel.subscribe('http.server.request.start', (message) => {
      (message as { response: ServerResponse }).response.setHeader('X-Served-By', String(process.pid));
    });
  }
  const api = await start(config);
  // Run alone (a container, `node dist/api/main.js`), this process serves its own metrics on
  // METRICS_PORT; under the supervisor, the supervisor does, for every API process.
  if (joinsSupervisor() || config.METRICS_PORT === 0) return api;
  const metrics = await startMetricsServer({
    port: config.METRICS_PORT,
    host: config.METRICS_HOST,
    metrics: ownMetrics,
  }).catch(async (err: unknown) => {
    await api.stop();
    throw err;
  });
  api.runtime.log.info('metrics listening', { port: metrics.port, host: config.METRICS_HOST });
  return {
    ...api,
    async stop() {
      await metrics.close();
      await api.stop();
    },
  };
});
