import diagnostics_channel from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';
import { runMain } from '../platform/main';
import { start } from './app';

runMain('api', (config) => {
  // Tests and benchmarks see which of the API_PROCESSES answered. The channel publishes before the
  // app runs, so even a response the app sends synchronously carries the header.
  if (config.SERVED_BY_HEADER) {
    diagnostics_channel.subscribe('http.server.request.start', (message) => {
      (message as { response: ServerResponse }).response.setHeader('X-Served-By', String(process.pid));
    });
  }
  return start(config);
});
