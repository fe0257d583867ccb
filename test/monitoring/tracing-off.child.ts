/**
 * Child process of tracing.test.ts ("no exporter configured"): records every module the process
 * resolves (an ESM resolve hook chained after tsx's, plus the CommonJS cache), then does what
 * runMain does with no OTEL_* in its environment (initTracing, then the API's start), posts one
 * code build to itself, and prints one JSON line: whether tracing is on, the answer's status,
 * how many modules it saw, and those of OpenTelemetry (only the API package, which prom-client loads).
 */
import { MessageChannel } from 'node:worker_threads';
import { createRequire, register } from 'node:module';

const seen = new Set<string>();
const { port1, port2 } = new MessageChannel();
port1.on('message', (url: string) => seen.add(url));
port1.unref();
const hook = `let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) { const r = await next(specifier, context); port.postMessage(r.url); return r; }`;
register(`data:text/javascript,${encodeURIComponent(hook)}`, { data: { port: port2 }, transferList: [port2] });

const { initTracing, tracingOn } = await import('../../platform/infra/tracing');
const { loadConfig } = await import('../../platform/infra/config');
const { start } = await import('../../api/app');
const { SCOPES } = await import('../../contracts/registry');

const on = await initTracing({ serviceName: 'svc-api' });
const server = await start(loadConfig());
let status = 0;
let jobId = '';
try {
  const rt = server.runtime;
  const account = await rt.accounts.createAccount({ name: 'tracing off', plan: 'pro', credits: 100 });
  const { key } = await rt.accounts.forAccount(account._id).createKey({ scopes: [...SCOPES] });
  const r = await fetch(`http://127.0.0.1:${server.port}/api/v1/code-builds`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'a counter' }),
  });
  status = r.status;
  jobId = ((await r.json()) as { jobId: string }).jobId;
} finally {
  await server.stop();
}
// The hook posts from the loader thread: let the last messages arrive.
await new Promise((r) => setTimeout(r, 200));
const cjs = Object.keys(createRequire(import.meta.url).cache);
const all = [...seen, ...cjs];
const otel = all.filter((u) => u.includes('@opentelemetry'));
console.log(JSON.stringify({ tracingOn: on || tracingOn, status, jobId, modules: all.length, otel }));
process.exit(0);
