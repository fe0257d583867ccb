/**
 * For scripts that start the supervisor (benches, chaos runs): wait until `n` API processes take
 * connections, read from the supervisor's own gauge on GET /metrics of its metrics listener
 * (`metricsPort`: METRICS_PORT, which it opens together with the API port, from the first moment).
 */
export async function waitForApiProcesses(
  metricsPort: number,
  n: number,
  timeoutMs: number,
  alive: () => boolean = () => true,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) }).then(
      (r) => (r.ok ? r.text() : ''),
      () => '',
    );
    const ready = Number(/^supervisor_api_processes_ready (\d+)/m.exec(text)?.[1] ?? 0);
    if (ready >= n) return;
    if (!alive()) throw new Error('the supervisor exited before its API processes were ready');
    if (Date.now() > deadline) throw new Error(`${ready} of ${n} API processes ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
