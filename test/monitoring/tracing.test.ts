import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import amqplib from 'amqplib';
import { expect } from 'chai';
import sinon from 'sinon';
import * as semconv from '@opentelemetry/semantic-conventions';
import * as incubating from '@opentelemetry/semantic-conventions/incubating';
import { broker } from '../../contracts/registry';
import { ATTR, initTracing, shutdownTracing, tracingOn } from '../../platform/infra/tracing';
import { spawnApiProcess, type ApiProcess } from '../helpers/api-process';
import { client, eventually, waitForJob } from '../../scripts/harness/http';
import {
  SPAN_KIND,
  otlpEnv,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../../scripts/harness/otlp-receiver';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { testLogFile } from '../../scripts/harness/test-log';
import { projectRoot, spawnWorkerProcess, stackEnv } from '../../scripts/harness/worker-process';
import { createWebhook, startReceiver, type Receiver } from '../webhooks/helpers';

const PROMPT = 'a tracing probe counter 7f3a';

/** Every span's parent is in the trace, except one root. */
function assertConnected(trace: ReceivedSpan[]) {
  const ids = new Set(trace.map((s) => s.spanId));
  const roots = trace.filter((s) => !s.parentSpanId);
  expect(
    roots.map((s) => s.name),
    'one root',
  ).to.have.length(1);
  for (const s of trace)
    if (s.parentSpanId) expect(ids.has(s.parentSpanId), `parent of ${s.service} ${s.name}`).to.equal(true);
  return roots[0]!;
}

/** True when `span` has `ancestor` on its chain of parents. */
function descendsFrom(trace: ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(trace.map((s) => [s.spanId, s]));
  for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId))
    if (p.spanId === ancestor.spanId) return true;
  return false;
}

/**
 * One POST /code-builds followed across real processes: an API process and a worker process
 * (code and webhook pools) export to a local OTLP/HTTP receiver, and the trace must reach from
 * the HTTP request through RabbitMQ, the engine call and the completion event to the webhook
 * delivery.
 */
describe('tracing across processes (OpenTelemetry, OTLP/HTTP)', () => {
  let stack: Stack;
  let otlp: OtlpReceiver;
  let hooks: Receiver;
  let apiProcess: ApiProcess | undefined;
  let worker: ChildProcess | undefined;

  before(async function () {
    this.timeout(60_000);
    // The in-process API is untraced: it only creates the account and the webhook.
    stack = await startStack({ workers: false, scheduler: false, env: { ALLOW_LOOPBACK_URLS: 'true' } });
    otlp = await startOtlpReceiver();
    hooks = await startReceiver();
  });
  after(async () => {
    await apiProcess?.kill();
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
    await hooks?.close();
    await otlp?.close();
    await stack?.stop();
  });

  it('when one code build is posted, then one trace spans the API and the worker, from the HTTP request to the code_build.completed delivery', async function () {
    this.timeout(90_000);
    const { key } = await stack.createAccount();
    await createWebhook(client(stack.baseUrl, key), { url: hooks.url, events: ['code_build.completed'] });
    worker = spawnWorkerProcess(stack, { ...otlpEnv(otlp), WORKER_POOLS: 'code,webhook', ALLOW_LOOPBACK_URLS: 'true' });
    apiProcess = await spawnApiProcess(stack, otlpEnv(otlp));
    const api = client(apiProcess.baseUrl, key);

    const r = await api.post('/code-builds', { prompt: PROMPT });
    expect(r.status).to.equal(202);
    const jobId = r.body.jobId as string;
    await waitForJob(api, jobId, ['complete'], 40_000);
    const [delivered] = await hooks.waitFor(1, (x) => x.body?.data?.jobId === jobId, 30_000);
    // The customer's endpoint gets no trace context of ours.
    expect(delivered!.headers).not.to.have.property('traceparent');
    expect(delivered!.headers).not.to.have.property('tracestate');

    const server = await eventually(
      async () => otlp.spans.find((s) => s.kind === SPAN_KIND.server && s.name === 'POST /api/v1/code-builds'),
      15_000,
      'the API server span',
    );
    await eventually(
      async () => {
        const t = otlp.trace(server.traceId);
        return t.some((s) => s.name === 'POST webhook') && t.some((s) => s.name === 'engine code') ? t : undefined;
      },
      20_000,
      'the worker spans of the trace',
    );
    // Late spans of the trace (the delivery's record, the stamp) come within a batch or two.
    await new Promise((r) => setTimeout(r, 500));
    const all = otlp.trace(server.traceId);
    const summary = all.map((s) => `${s.service} ${s.kind} ${s.name}`).join('\n');

    // One trace, rooted at the API's server span, every parent inside it.
    expect(assertConnected(all).spanId, summary).to.equal(server.spanId);
    expect(server.service).to.equal('svc-api');
    expect(server.attributes).to.include({
      [ATTR.httpRequestMethod]: 'POST',
      [ATTR.httpRoute]: '/api/v1/code-builds',
      [ATTR.httpResponseStatusCode]: 202,
    });
    expect(new Set(all.map((s) => s.service))).to.deep.equal(new Set(['svc-api', 'svc-workers']));

    const prefix = stack.config.QUEUE_PREFIX;
    const find = (pred: (s: ReceivedSpan) => boolean, what: string) => {
      const hit = all.filter(pred);
      expect(hit, `${what} in\n${summary}`).to.not.be.empty;
      return hit;
    };
    // API: MongoDB commands under the request, the publish to the code pool.
    const apiDb = find(
      (s) => s.service === 'svc-api' && s.attributes[ATTR.dbSystemName] === 'mongodb',
      'API MongoDB spans',
    );
    for (const s of apiDb) expect(s.kind).to.equal(SPAN_KIND.client);
    expect(
      apiDb.some(
        (s) =>
          s.attributes[ATTR.dbOperationName] === 'insert' &&
          s.attributes[ATTR.dbCollectionName] === 'jobs' &&
          s.parentSpanId === server.spanId,
      ),
      'the job insert is a child of the request span',
    ).to.equal(true);
    const poolQueue = broker.poolQueue(prefix, 'code');
    const [publish] = find(
      (s) =>
        s.service === 'svc-api' &&
        s.kind === SPAN_KIND.producer &&
        s.attributes[ATTR.messagingDestinationName] === poolQueue,
      'the publish to the code pool',
    );
    expect(publish!.attributes).to.include({
      [ATTR.messagingSystem]: 'rabbitmq',
      [ATTR.messagingOperationType]: 'send',
      [ATTR.messagingMessageId]: jobId,
    });
    expect(descendsFrom(all, publish!, server)).to.equal(true);

    // Worker: the delivery's consumer span continues the publish, the engine call runs inside it.
    const [consume] = find(
      (s) =>
        s.service === 'svc-workers' &&
        s.kind === SPAN_KIND.consumer &&
        s.attributes[ATTR.messagingDestinationName] === poolQueue,
      'the code pool consume',
    );
    expect(consume!.parentSpanId).to.equal(publish!.spanId);
    expect(consume!.attributes).to.include({
      [ATTR.messagingOperationType]: 'process',
      [ATTR.messagingMessageId]: jobId,
    });
    const [engine] = find((s) => s.name === 'engine code', 'the engine span');
    expect(engine!.service).to.equal('svc-workers');
    expect(engine!.kind).to.equal(SPAN_KIND.internal);
    expect(engine!.attributes).to.include({ 'svc.job.id': jobId, 'svc.job.type': 'code' });
    expect(descendsFrom(all, engine!, consume!)).to.equal(true);
    const workerDb = find(
      (s) => s.service === 'svc-workers' && s.attributes[ATTR.dbSystemName] === 'mongodb',
      'worker MongoDB spans',
    );
    for (const s of workerDb)
      expect(descendsFrom(all, s, consume!) || s.links.length > 0, `${s.name} nests under the job`).to.equal(true);
    expect(
      workerDb.some(
        (s) => s.attributes[ATTR.dbOperationName] === 'findAndModify' && s.parentSpanId === consume!.spanId,
      ),
      'the claim is a child of the consume span',
    ).to.equal(true);

    // The completion event, its fan-out and the delivery, in the same trace.
    const events = broker.eventsExchange(prefix);
    const [eventPublish] = find(
      (s) => s.kind === SPAN_KIND.producer && s.attributes[ATTR.messagingDestinationName] === events,
      'the events publish',
    );
    expect(eventPublish!.attributes).to.include({ [ATTR.rabbitmqRoutingKey]: 'code_build.completed' });
    expect(descendsFrom(all, eventPublish!, consume!)).to.equal(true);
    const [fanOut] = find(
      (s) => s.kind === SPAN_KIND.consumer && s.parentSpanId === eventPublish!.spanId,
      'the webhook fan-out consume',
    );
    expect(fanOut!.attributes[ATTR.messagingDestinationName]).to.equal(broker.poolQueue(prefix, 'webhook'));
    const [deliveryPublish] = find(
      (s) =>
        s.kind === SPAN_KIND.producer &&
        s.parentSpanId === fanOut!.spanId &&
        s.attributes[ATTR.messagingDestinationName] === broker.webhookDeliveryQueue(prefix),
      'the delivery publish',
    );
    const [deliveryConsume] = find(
      (s) => s.kind === SPAN_KIND.consumer && s.parentSpanId === deliveryPublish!.spanId,
      'the delivery consume',
    );
    const [post] = find((s) => s.name === 'POST webhook', 'the webhook delivery span');
    expect(post!.kind).to.equal(SPAN_KIND.client);
    expect(descendsFrom(all, post!, deliveryConsume!)).to.equal(true);
    expect(post!.attributes).to.include({
      [ATTR.httpRequestMethod]: 'POST',
      [ATTR.httpResponseStatusCode]: 200,
      [ATTR.serverAddress]: '127.0.0.1',
      'svc.webhook.outcome': 'delivered',
      'svc.webhook.event': 'code_build.completed',
    });

    // Nothing of the request's content, the key or the receiver's path in any span.
    const text = JSON.stringify(all, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    expect(text).not.to.include(PROMPT);
    expect(text).not.to.include(key);
    expect(text).not.to.include('/hook');
    expect(otlp.badRequests).to.equal(0);

    // The worker's log lines about the job carry the trace id.
    const lines = readFileSync(testLogFile(), 'utf8')
      .split('\n')
      .filter((l) => l.includes(jobId))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const workerLines = lines.filter((l) => l.service === 'workers' && l.jobId === jobId);
    expect(workerLines.map((l) => l.msg)).to.include('job completed');
    for (const l of workerLines) expect(l.traceId, JSON.stringify(l)).to.equal(server.traceId);
  });

  it("when a request carries a W3C traceparent, then its server span starts a trace of our own that links the caller's span (a client cannot choose our trace ids or force sampling)", async function () {
    this.timeout(30_000);
    expect(apiProcess, 'the API process of the first test').to.not.equal(undefined);
    const { key } = await stack.createAccount();
    const traceId = `${'a'.repeat(31)}1`;
    const parent = `${'b'.repeat(15)}2`;
    const r = await client(apiProcess!.baseUrl, key).get('/jobs/code_doesnotexist', {
      traceparent: `00-${traceId}-${parent}-01`,
      'x-request-id': 'req-linked-1',
    });
    expect(r.status).to.equal(404);
    const span = await eventually(
      async () =>
        otlp.spans.find(
          (s) =>
            s.kind === SPAN_KIND.server &&
            s.name === 'GET /api/v1/jobs/:id' &&
            (s.links ?? []).some((l) => l.traceId === traceId),
        ),
      10_000,
      'the linked server span',
    );
    expect(span.traceId).not.to.equal(traceId);
    expect(span.parentSpanId ?? '').to.equal('');
    expect(span.links!.find((l) => l.traceId === traceId)!.spanId).to.equal(parent);
    expect(otlp.trace(traceId)).to.deep.equal([]);
  });

  it("when TRACE_INCOMING=parent, then a request's server span continues the caller's trace", async function () {
    this.timeout(30_000);
    const proc = await spawnApiProcess(stack, otlpEnv(otlp, { TRACE_INCOMING: 'parent' }));
    try {
      const { key } = await stack.createAccount();
      const traceId = `${'e'.repeat(31)}1`;
      const parent = `${'f'.repeat(15)}2`;
      const r = await client(proc.baseUrl, key).get('/jobs/code_doesnotexist', {
        traceparent: `00-${traceId}-${parent}-01`,
      });
      expect(r.status).to.equal(404);
      const span = await eventually(
        async () => otlp.spans.find((s) => s.traceId === traceId && s.kind === SPAN_KIND.server),
        10_000,
        'the server span',
      );
      expect(span.parentSpanId).to.equal(parent);
      expect(span.name).to.equal('GET /api/v1/jobs/:id');
      expect(span.attributes[ATTR.httpResponseStatusCode]).to.equal(404);
    } finally {
      await proc.kill();
    }
  });

  it('when the process is stopped with SIGTERM, then the spans it still held are exported before it exits', async function () {
    this.timeout(30_000);
    // A 60 s batch delay: only the flush on stop can send these spans in time.
    const proc = await spawnApiProcess(
      stack,
      otlpEnv(otlp, { OTEL_BSP_SCHEDULE_DELAY: '60000', TRACE_INCOMING: 'parent' }),
    );
    const { key } = await stack.createAccount();
    const traceId = `${'c'.repeat(31)}3`;
    await client(proc.baseUrl, key).get('/account', { traceparent: `00-${traceId}-${'d'.repeat(15)}4-01` });
    const exited = once(proc.child, 'exit');
    proc.child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code).to.equal(0);
    expect(otlp.trace(traceId).map((s) => s.name)).to.include('GET /api/v1/account');
  });
});

describe('tracing in-process (initTracing, shutdownTracing)', () => {
  let stack: Stack | undefined;
  let otlp: OtlpReceiver;
  after(async () => {
    await shutdownTracing(2000);
    await stack?.stop();
    await otlp?.close();
  });

  it('when a test turns tracing on for an in-process scheduler, then each task run is a trace holding its MongoDB commands, and shutdown turns tracing off again', async function () {
    this.timeout(60_000);
    otlp = await startOtlpReceiver();
    expect(tracingOn).to.equal(false); // in-process stacks run untraced unless a test asks
    expect(await initTracing({ serviceName: 'svc-scheduler', env: otlpEnv(otlp) })).to.equal(true);
    expect(tracingOn).to.equal(true);
    stack = await startStack({ api: false, workers: false });
    const task = await eventually(
      async () => otlp.spans.find((s) => s.name === 'task jobs.sweep'),
      20_000,
      'a sweep span',
    );
    expect(task.service).to.equal('svc-scheduler');
    expect(task.parentSpanId).to.equal('');
    expect(task.attributes).to.include({ 'svc.task': 'jobs.sweep' });
    const db = await eventually(
      async () => {
        const t = otlp.trace(task.traceId).filter((s) => s.attributes[ATTR.dbSystemName] === 'mongodb');
        return t.length ? t : undefined;
      },
      5000,
      "the sweep's MongoDB spans",
    );
    for (const s of db) expect(s.parentSpanId, s.name).to.equal(task.spanId);
    // Agenda's own polling runs outside any span: no trace of its own per command.
    expect(otlp.spans.filter((s) => !s.parentSpanId && s.attributes[ATTR.dbSystemName] === 'mongodb')).to.deep.equal(
      [],
    );

    await shutdownTracing(2000);
    expect(tracingOn).to.equal(false);
    const seen = otlp.spans.length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(otlp.spans.length, 'no span after shutdown').to.equal(seen);
    await stack.stop();
    stack = undefined;
  });

  it('when a request fails with a 5xx, then its server span is an error that records the exception, redacted', async function () {
    this.timeout(60_000);
    otlp ??= await startOtlpReceiver();
    expect(await initTracing({ serviceName: 'svc-api', env: otlpEnv(otlp) })).to.equal(true);
    stack = await startStack({ workers: false, scheduler: false });
    const { key } = await stack.createAccount();
    const leaked = `svc_${'Q'.repeat(40)}`;
    sinon.stub(stack.rt.credits, 'balance').rejects(new Error(`the database fell over near ${leaked}`));
    const r = await client(stack.baseUrl, key).get('/account/credits');
    sinon.restore();
    expect(r.status).to.equal(500);
    const span = await eventually(
      async () => otlp.spans.find((s) => s.name === 'GET /api/v1/account/credits'),
      10_000,
      'the server span',
    );
    expect(span.status.code).to.equal(2); // ERROR
    expect(span.attributes).to.include({ [ATTR.httpResponseStatusCode]: 500, [ATTR.errorType]: 'Error' });
    const exception = span.events.find((e) => e.name === 'exception');
    expect(exception?.attributes['exception.message']).to.equal('the database fell over near svc_[redacted]');
    expect(String(exception?.attributes['exception.stacktrace'])).to.match(/at /);
    expect(JSON.stringify(otlp.spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.to.include(leaked);
    // Authentication's database reads run inside the request's span.
    const db = otlp.trace(span.traceId).filter((s) => s.attributes[ATTR.dbSystemName] === 'mongodb');
    for (const s of db) expect(s.parentSpanId, s.name).to.equal(span.spanId);
  });
});

describe('tracing when no exporter is configured', () => {
  let stack: Stack;
  before(async function () {
    this.timeout(60_000);
    stack = await startStack({ api: false, workers: false, scheduler: false });
  });
  after(async () => {
    await stack?.stop();
  });

  it('when no exporter is configured, then tracing is off, no OpenTelemetry SDK module is imported and messages carry no traceparent', async function () {
    this.timeout(60_000);
    // A child process runs the API as runMain does (initTracing, then start) with no OTEL_* set,
    // records every module it resolves, posts one code build to itself and reports.
    const env = stackEnv(stack, { PORT: '0' });
    for (const k of Object.keys(env)) if (k.startsWith('OTEL_')) delete env[k];
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/monitoring/tracing-off.child.ts'], {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code, out).to.equal(0);
    const report = JSON.parse(out.trim().split('\n').pop()!) as {
      tracingOn: boolean;
      status: number;
      modules: number;
      otel: string[];
      jobId: string;
    };
    expect(report.status).to.equal(202);
    expect(report.tracingOn).to.equal(false);
    expect(report.modules, 'the recorder saw the app load').to.be.above(100);
    // prom-client's default metrics require @opentelemetry/api (for exemplars) in every process;
    // the SDK (sdk-trace, the exporter, resources, core, the context manager) must not load.
    expect(report.otel.filter((u) => !u.includes('/@opentelemetry/api/'))).to.deep.equal([]);

    // The job's message went out without trace context.
    const conn = await amqplib.connect(stack.config.AMQP_URL);
    try {
      const ch = await conn.createChannel();
      const msg = await eventually(
        async () => (await ch.get(broker.poolQueue(stack.config.QUEUE_PREFIX, 'code'), { noAck: true })) || undefined,
        5000,
        'the job message',
      );
      expect(JSON.parse(msg.content.toString()).jobId).to.equal(report.jobId);
      expect(msg.properties.headers).to.have.property('x-request-id');
      expect(msg.properties.headers).not.to.have.property('traceparent');
      await ch.close();
    } finally {
      await conn.close();
    }
  });
});

describe('tracing attribute names', () => {
  it('when spans are written, then their attribute names are the semantic conventions', () => {
    const expected: Record<keyof typeof ATTR, string> = {
      httpRequestMethod: semconv.ATTR_HTTP_REQUEST_METHOD,
      httpRoute: semconv.ATTR_HTTP_ROUTE,
      httpResponseStatusCode: semconv.ATTR_HTTP_RESPONSE_STATUS_CODE,
      urlScheme: semconv.ATTR_URL_SCHEME,
      serverAddress: semconv.ATTR_SERVER_ADDRESS,
      serverPort: semconv.ATTR_SERVER_PORT,
      errorType: semconv.ATTR_ERROR_TYPE,
      dbSystemName: semconv.ATTR_DB_SYSTEM_NAME,
      dbOperationName: semconv.ATTR_DB_OPERATION_NAME,
      dbCollectionName: semconv.ATTR_DB_COLLECTION_NAME,
      dbNamespace: semconv.ATTR_DB_NAMESPACE,
      messagingSystem: incubating.ATTR_MESSAGING_SYSTEM,
      messagingDestinationName: incubating.ATTR_MESSAGING_DESTINATION_NAME,
      messagingOperationType: incubating.ATTR_MESSAGING_OPERATION_TYPE,
      messagingOperationName: incubating.ATTR_MESSAGING_OPERATION_NAME,
      messagingMessageId: incubating.ATTR_MESSAGING_MESSAGE_ID,
      messagingBodySize: incubating.ATTR_MESSAGING_MESSAGE_BODY_SIZE,
      rabbitmqRoutingKey: incubating.ATTR_MESSAGING_RABBITMQ_DESTINATION_ROUTING_KEY,
      serviceName: semconv.ATTR_SERVICE_NAME,
    };
    expect(ATTR).to.deep.equal(expected);
    expect(incubating.MESSAGING_OPERATION_TYPE_VALUE_SEND).to.equal('send');
    expect(incubating.MESSAGING_OPERATION_TYPE_VALUE_PROCESS).to.equal('process');
    expect(incubating.MESSAGING_SYSTEM_VALUE_RABBITMQ).to.equal('rabbitmq');
    expect(incubating.DB_SYSTEM_NAME_VALUE_MONGODB).to.equal('mongodb');
  });
});
