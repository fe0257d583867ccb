import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP JSON export carries it, flattened with its resource's service.name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP numbering: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  status: { code?: number; message?: string };
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  links: { traceId: string; spanId: string }[];
  startNs: bigint;
  endNs: bigint;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const value = (v: OtlpValue): string | number | boolean =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue ?? '';
const attrs = (list: { key: string; value: OtlpValue }[] | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));

/**
 * A local OTLP/HTTP receiver (POST /v1/traces, JSON bodies as OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
 * http/json sends them) on a free port of 127.0.0.1. `keep: false` only counts the spans (the
 * benchmark's no-op collector).
 */
export async function startOtlpReceiver(opts: { keep?: boolean } = {}) {
  const keep = opts.keep ?? true;
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  let received = 0;
  let badRequests = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        badRequests++;
        res.writeHead(404).end();
        return;
      }
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans?: any[] };
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
          for (const ss of rs.scopeSpans ?? []) {
            received += ss.spans?.length ?? 0;
            if (!keep) continue;
            for (const s of ss.spans ?? []) {
              spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                attributes: attrs(s.attributes),
                status: s.status ?? {},
                events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: attrs(e.attributes) })),
                links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
                startNs: BigInt(s.startTimeUnixNano),
                endNs: BigInt(s.endTimeUnixNano),
              });
            }
          }
        }
      } catch {
        badRequests++;
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    /** OTEL_EXPORTER_OTLP_ENDPOINT for a process that should export here. */
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    /** Spans received, kept or not. */
    get received() {
      return received;
    },
    get requests() {
      return requests;
    },
    get badRequests() {
      return badRequests;
    },
    trace: (traceId: string) => spans.filter((s) => s.traceId === traceId),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
export type OtlpReceiver = Awaited<ReturnType<typeof startOtlpReceiver>>;

/** The environment of a process that exports every span here, quickly (batches every 100 ms). */
export const otlpEnv = (rcv: OtlpReceiver, extra: Record<string, string> = {}): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: rcv.endpoint,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '100',
  OTEL_TRACES_SAMPLER: 'parentbased_always_on',
  ...extra,
});
