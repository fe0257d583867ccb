import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { ApiError, createClient, must, verifyWebhook, WebhookVerificationError } from '../../clients/typescript';
import { clientSchema, SCHEMA_FILE } from '../../scripts/client-gen';
import { eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { startReceiver, type Receiver } from '../webhooks/helpers';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What a fetch saw: method, URL and headers of every request it sent. */
function recordingFetch() {
  const seen: { method: string; url: string; headers: Headers }[] = [];
  const fetch = (async (input: Request) => {
    seen.push({ method: input.method, url: input.url, headers: new Headers(input.headers) });
    return globalThis.fetch(input);
  }) as typeof globalThis.fetch;
  return { seen, fetch };
}

/** A stand-in for the API: `answer` decides each request's reply (n counts from 0). */
async function fakeApi(answer: (n: number, req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const requests: {
    method: string;
    url: string;
    headers: http.IncomingHttpHeaders;
    body: string;
    at: number;
    /** Whether the exchange is over (answered, or the client went away). */
    closed: boolean;
  }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const n = requests.length;
      const entry = {
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
        closed: false,
      };
      requests.push(entry);
      res.on('close', () => {
        entry.closed = true;
      });
      answer(n, req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    requests,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
const errorJson = (res: http.ServerResponse, status: number, code: string, headers: Record<string, string> = {}) =>
  res
    .writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req_${status}`, ...headers })
    .end(JSON.stringify({ error: { code, message: `${code} here`, requestId: `req_${status}` } }));
const job = { jobId: 'code_00000000000000000001', type: 'code', status: 'queued', pollUrl: '/api/v1/jobs/code_1' };

describe('typed TypeScript client (clients/typescript)', function () {
  this.timeout(60_000);

  describe('against the real stack', () => {
    let stack: Stack;
    let apiKey: string;
    let receiver: Receiver;
    const api = (extra: Parameters<typeof createClient>[0] extends infer O ? Partial<O> : never = {}) =>
      createClient({ baseUrl: stack.baseUrl, apiKey, ...extra });

    before(async () => {
      stack = await startStack({
        env: { ALLOW_LOOPBACK_URLS: 'true', WEBHOOK_ATTEMPT_TIMEOUT_MS: '1500', WEBHOOK_RETRY_DELAYS_MS: '100,200' },
      });
      apiKey = (await stack.createAccount({ credits: 1000 })).key;
      receiver = await startReceiver();
    });
    after(async () => {
      await receiver?.close();
      await stack?.stop();
    });

    it('when the schema is generated from the live GET /openapi, then it is the committed clients/typescript/schema.d.ts', async () => {
      const doc = (await (await fetch(`${stack.baseUrl}/openapi`)).json()) as object;
      const live = await clientSchema(doc);
      const committed = readFileSync(SCHEMA_FILE, 'utf8');
      const a = live.split('\n');
      const b = committed.split('\n');
      const at = a.findIndex((line, i) => line !== b[i]);
      expect(
        live === committed,
        `clients/typescript/schema.d.ts is out of date with GET /openapi: run \`npm run client:gen\` and commit it (first difference at line ${at + 1}: ${JSON.stringify(a[at])} vs ${JSON.stringify(b[at])})`,
      ).to.equal(true);
    });

    it('when a code build is posted through the client, then it carries a fresh Idempotency-Key and waitForJob answers the completed envelope', async () => {
      const { seen, fetch } = recordingFetch();
      const c = api({ fetch });
      const accepted = await must(c.POST('/code-builds', { body: { prompt: 'a click counter', name: 'Counter' } }));
      expect(accepted.status).to.equal('queued');
      const post = seen.find((s) => s.method === 'POST')!;
      expect(post.headers.get('idempotency-key')).to.match(UUID);
      expect(post.headers.get('authorization')).to.equal(`Bearer ${apiKey}`);

      const other = await must(c.POST('/code-builds', { body: { prompt: 'a todo list', name: 'Todo' } }));
      expect(seen.filter((s) => s.method === 'POST')[1]!.headers.get('idempotency-key')).to.not.equal(
        post.headers.get('idempotency-key'),
      );

      // Two waits on one client at once: each follows its own job.
      const progress: string[] = [];
      const [done, otherDone] = await Promise.all([
        c.waitForJob(accepted.jobId, { timeoutMs: 30_000, onProgress: (j) => progress.push(j.status) }),
        c.waitForJob(other.jobId, { timeoutMs: 30_000 }),
      ]);
      expect(done.status).to.equal('complete');
      expect(done.jobId).to.equal(accepted.jobId);
      expect(done.result).to.include({ name: 'Counter', framework: 'html' });
      expect(progress.at(-1)).to.equal('complete');
      expect(otherDone).to.deep.include({ jobId: other.jobId, status: 'complete' });
      expect(otherDone.result).to.include({ name: 'Todo' });
    });

    it('when waitForJob follows a build over the event stream and its connection drops after the first event, then it resumes with Last-Event-ID and never polls', async () => {
      const { seen, fetch: recording } = recordingFetch();
      let cut = false;
      // The first stream is cut right after its first event, as a proxy dropping the connection would.
      const fetch = (async (input: Request) => {
        const res = await recording(input);
        if (cut || !input.url.endsWith('/events') || !res.body) return res;
        cut = true;
        let text = '';
        const reader = res.body.getReader();
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const { value, done } = await reader.read();
            if (done) return controller.close();
            controller.enqueue(value);
            text += new TextDecoder().decode(value);
            if (/\nevent: \w+\ndata: .*\n\n/.test(text)) {
              controller.error(new TypeError('terminated'));
              // The real connection is read to its end unseen: torn down, the in-process API's stop
              // would wait for the spare connection undici opens after an abort (its headers timeout).
              void (async () => {
                while (!(await reader.read()).done) {}
              })().catch(() => {});
            }
          },
        });
        return new Response(body, { status: res.status, headers: res.headers });
      }) as typeof globalThis.fetch;
      const c = api({ fetch });
      const accepted = await must(c.POST('/code-builds', { body: { prompt: 'a click counter' } }));
      const states: string[] = [];
      const done = await c.waitForJob(accepted.jobId, { timeoutMs: 30_000, onProgress: (j) => states.push(j.status) });
      expect(done.status).to.equal('complete');
      const streams = seen.filter((s) => s.url.endsWith(`/jobs/${accepted.jobId}/events`));
      expect(streams.length).to.be.at.least(2);
      expect(streams[0]!.headers.get('last-event-id')).to.equal(null);
      expect(streams[1]!.headers.get('last-event-id')).to.be.a('string').and.not.equal('');
      expect(seen.filter((s) => s.url.endsWith(`/jobs/${accepted.jobId}`))).to.deep.equal([]);
      expect(states[0]).to.be.oneOf(['queued', 'processing']);
      expect(states.at(-1)).to.equal('complete');
    });

    it('when the event stream is not there (an older server: 404), then waitForJob long-polls the real GET /jobs/{id} with Prefer: wait and If-None-Match', async () => {
      const { seen, fetch: recording } = recordingFetch();
      const fetch = (async (input: Request) =>
        input.url.endsWith('/events')
          ? Response.json({ error: { code: 'not_found', message: 'no such route', requestId: 'r' } }, { status: 404 })
          : recording(input)) as typeof globalThis.fetch;
      const c = api({ fetch });
      const accepted = await must(c.POST('/code-builds', { body: { prompt: 'a click counter' } }));
      const done = await c.waitForJob(accepted.jobId, { timeoutMs: 30_000 });
      expect(done).to.include({ jobId: accepted.jobId, status: 'complete' });
      const polls = seen.filter((s) => s.url.endsWith(`/jobs/${accepted.jobId}`));
      // Held answers: one per change (queued → processing → complete), not one a second.
      expect(polls.length).to.be.within(1, 4);
      expect(polls.every((p) => p.headers.get('prefer') === 'wait=30')).to.equal(true);
      expect(polls.slice(1).every((p) => /^"[^"]+"$/.test(p.headers.get('if-none-match') ?? ''))).to.equal(true);
    });

    it('when the same Idempotency-Key is sent twice, then the same job answers (charged once)', async () => {
      const c = api();
      const credits = async () => (await must(c.GET('/account/credits'))).balance;
      const before = await credits();
      const key = `client-test-${Date.now()}`;
      const body = { prompt: 'a todo list' };
      const first = await must(c.POST('/code-builds', { body, headers: { 'Idempotency-Key': key } }));
      const second = await must(c.POST('/code-builds', { body, headers: { 'Idempotency-Key': key } }));
      expect(second.jobId).to.equal(first.jobId);
      await c.waitForJob(first.jobId, { timeoutMs: 30_000 });
      const price = (await must(c.GET('/account/credits'))).prices.code_build;
      // Lease batches settle within 100 ms of an answer.
      await new Promise((r) => setTimeout(r, 300));
      expect(await credits()).to.equal(before - price);
    });

    it('when a Drive file is uploaded through the client, then its bytes come back through the content redirect', async () => {
      const c = api();
      const text = `# Notes\n\nfrom the typed client ✓ ${Date.now()}`;
      const file = await must(c.POST('/drive/files', { body: { name: 'client-notes.md', content: text } }));
      expect(file).to.include({ name: 'client-notes.md', kind: 'text', mimeType: 'text/markdown' });
      const handle = await must(c.GET('/drive/files/{id}', { params: { path: { id: file.id } } }));
      expect(handle.id).to.equal(file.id);
      const { data } = await c.GET('/drive/files/{id}/content', { params: { path: { id: file.id } }, parseAs: 'text' });
      expect(data).to.equal(text);
    });

    it('when a sheet change is proposed and merged through the client, then the sheet shows it at version 2', async () => {
      const c = api();
      const sheet = await must(
        c.POST('/sheets', {
          body: {
            name: 'Fruit',
            columns: [
              { name: 'Item', type: 'string' },
              { name: 'Price', type: 'number' },
            ],
            rows: [
              ['Apple', 1.1],
              ['Pear', 2],
            ],
          },
        }),
      );
      const proposed = await must(
        c.POST('/sheets/{id}/ops', {
          params: { path: { id: sheet.id } },
          body: { ops: [{ op: 'set', cell: 'B1', value: 9 }], propose: true },
        }),
      );
      expect(proposed.commit.status).to.equal('proposed');
      const merged = await must(
        c.POST('/sheets/{id}/commits/{commitId}/resolve', {
          params: { path: { id: sheet.id, commitId: proposed.commit.id } },
          body: { action: 'merge' },
        }),
      );
      expect(merged.version).to.equal(2);
      expect(merged.commit.status).to.equal('merged');
      const read = await must(c.GET('/sheets/{id}', { params: { path: { id: sheet.id } } }));
      expect(read.rows[0]).to.deep.equal(['Apple', 9]);
      expect(read.headCommitId).to.equal(proposed.commit.id);
    });

    it('when a chat turn is sent through the client (local engine), then the assistant answers in a stored conversation', async () => {
      const c = api();
      const turn = await must(c.POST('/chat', { body: { message: 'hello, what can you do?', stream: false } }));
      expect(turn.message.role).to.equal('assistant');
      expect(turn.message.content).to.be.a('string').and.not.equal('');
      const messages = await must(
        c.GET('/conversations/{id}/messages', { params: { path: { id: turn.conversationId } } }),
      );
      expect(messages.data.map((m) => m.role)).to.deep.equal(['user', 'assistant']);
    });

    it('when the server refuses a request, then an ApiError carries status, code, requestId and the validation details', async () => {
      const c = api();
      const err = await c.POST('/drive/files', { body: { name: 'x.md', content: 'a', contentBase64: 'YQ==' } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(ApiError);
      const e = err as ApiError;
      expect(e).to.include({ status: 400, code: 'validation_error' });
      expect(e.requestId).to.be.a('string').and.not.equal('');
      expect(e.details.length).to.be.greaterThan(0);
      expect(e.message).to.match(/content/);

      const missing = await c
        .GET('/jobs/{id}', { params: { path: { id: 'code_00000000000000000000' } } })
        .catch((x) => x);
      expect(missing).to.be.instanceOf(ApiError).and.include({ status: 404, code: 'not_found' });
      const waited = await c.waitForJob('code_00000000000000000000', { timeoutMs: 10_000 }).catch((x) => x);
      expect(waited).to.be.instanceOf(ApiError).and.include({ status: 404, code: 'not_found' });

      const anonymous = createClient({ baseUrl: stack.baseUrl, apiKey: 'svc_not_a_key' });
      const unauthorized = await anonymous.GET('/account').catch((x) => x);
      expect(unauthorized).to.be.instanceOf(ApiError).and.include({ status: 401, code: 'unauthorized' });
    });

    it('when a webhook delivery of a finished build arrives, then verifyWebhook accepts it and refuses it tampered, re-signed with another secret, or replayed late', async () => {
      const c = api();
      const hook = await must(
        c.POST('/webhooks', { body: { name: 'client test', url: receiver.url, events: ['code_build.completed'] } }),
      );
      const accepted = await must(c.POST('/code-builds', { body: { prompt: 'a stopwatch' } }));
      await c.waitForJob(accepted.jobId, { timeoutMs: 30_000 });
      const [delivery] = await receiver.waitFor(1, (r) => r.body?.data?.jobId === accepted.jobId);
      const { raw, headers } = delivery!;

      const payload = await verifyWebhook(raw, headers, hook.secret);
      expect(payload).to.include({ event: 'code_build.completed', eventId: headers['x-service-event-id'] });
      expect(payload.data).to.include({ jobId: accepted.jobId, status: 'complete' });
      // Bytes and a Headers object are read the same way.
      await verifyWebhook(Buffer.from(raw), new Headers(headers as Record<string, string>), hook.secret);

      const refused = async (p: Promise<unknown>) => {
        const e = await p.then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e).to.be.instanceOf(WebhookVerificationError);
        return (e as WebhookVerificationError).reason;
      };
      const tampered = raw.replace('"complete"', '"failed"');
      expect(tampered).to.not.equal(raw);
      expect(await refused(verifyWebhook(tampered, headers, hook.secret))).to.equal('signature_mismatch');
      expect(await refused(verifyWebhook(raw, headers, `${hook.secret}x`))).to.equal('signature_mismatch');
      expect(await refused(verifyWebhook(raw, { ...headers, 'x-service-signature': undefined }, hook.secret))).to.equal(
        'missing_signature',
      );
      expect(
        await refused(verifyWebhook(raw, { ...headers, 'x-service-event': 'code_build.failed' }, hook.secret)),
      ).to.equal('header_mismatch');
      expect(await refused(verifyWebhook(raw, headers, hook.secret, { now: Date.now() + 301_000 }))).to.equal('stale');
      await verifyWebhook(raw, headers, hook.secret, { now: Date.now() + 301_000, toleranceSeconds: null });
    });
  });

  describe('retries and errors (against a stand-in server)', () => {
    it('when the API answers 503 with Retry-After: 1 once, then the POST is sent again after a second with the same Idempotency-Key and body', async () => {
      const fake = await fakeApi((n, _req, res) =>
        n === 0
          ? errorJson(res, 503, 'service_unavailable', { 'retry-after': '1' })
          : res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify(job)),
      );
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        const data = await must(c.POST('/code-builds', { body: { prompt: 'a counter' } }));
        expect(data.jobId).to.equal(job.jobId);
        expect(fake.requests).to.have.length(2);
        const [a, b] = fake.requests;
        expect(a!.headers['idempotency-key']).to.match(UUID);
        expect(b!.headers['idempotency-key']).to.equal(a!.headers['idempotency-key']);
        expect(b!.body)
          .to.equal(a!.body)
          .and.equal(JSON.stringify({ prompt: 'a counter' }));
        expect(b!.headers.authorization).to.equal('Bearer svc_test');
        expect(b!.at - a!.at).to.be.at.least(950);
      } finally {
        await fake.close();
      }
    });

    it('when the API keeps answering 429, then the client gives up after `retries` more attempts with an ApiError carrying retryAfter', async () => {
      const fake = await fakeApi((_n, _req, res) => errorJson(res, 429, 'rate_limited', { 'retry-after': '0' }));
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test', retries: 2 });
        const e = await c.GET('/account').catch((x: unknown) => x);
        expect(e).to.be.instanceOf(ApiError);
        expect(e).to.include({
          status: 429,
          code: 'rate_limited',
          requestId: 'req_429',
          retryAfter: 0,
          message: 'rate_limited here',
        });
        expect(fake.requests).to.have.length(3);
      } finally {
        await fake.close();
      }
    });

    it('when Retry-After is longer than maxRetryDelayMs, or the answer is another error, then it is thrown at once', async () => {
      const fake = await fakeApi((n, _req, res) =>
        n === 0 ? errorJson(res, 503, 'service_unavailable', { 'retry-after': '120' }) : errorJson(res, 500, 'boom'),
      );
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        expect(await c.GET('/account').catch((x) => x)).to.include({ status: 503, retryAfter: 120 });
        expect(await c.GET('/account').catch((x) => x)).to.include({ status: 500, code: 'boom', retryAfter: null });
        expect(fake.requests).to.have.length(2);
      } finally {
        await fake.close();
      }
    });

    it('when the connection drops, then a POST (it has an Idempotency-Key) is sent again, a PATCH without one is not', async () => {
      const fake = await fakeApi((n, req, res) => {
        if (n === 0 || req.method === 'PATCH') return req.socket.destroy();
        res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify(job));
      });
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        await must(c.POST('/code-builds', { body: { prompt: 'a counter' } }));
        expect(fake.requests).to.have.length(2);
        expect(fake.requests[1]!.headers['idempotency-key']).to.equal(fake.requests[0]!.headers['idempotency-key']);
        const e = await c
          .PATCH('/projects/{id}', { params: { path: { id: 'prj_1' } }, body: { name: 'x' } })
          .catch((x: unknown) => x);
        expect(e).to.be.instanceOf(TypeError);
        expect(fake.requests).to.have.length(3);
      } finally {
        await fake.close();
      }
    });

    const sse = (res: http.ServerResponse) =>
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const event = (id: string, name: string, status: string, extra: Record<string, unknown> = {}) =>
      `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify({ ...job, status, ...extra })}\n\n`;

    it('when the job event stream drops after an event, then waitForJob reconnects with Last-Event-ID and resolves with the terminal envelope', async () => {
      const fake = await fakeApi((n, req, res) => {
        sse(res);
        if (n === 0) {
          res.write(`retry: 20\n\n${event('e1', 'progress', 'queued')}`);
          setTimeout(() => req.socket.destroy(), 50);
        } else {
          res.write(': heartbeat\n\n');
          res.write(event('e2', 'progress', 'processing', { progressMessage: 'Writing files' }));
          res.end(event('e3', 'complete', 'complete', { result: { name: 'Counter' } }));
        }
      });
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        const seen: string[] = [];
        const done = await c.waitForJob(job.jobId, { timeoutMs: 5000, onProgress: (j) => seen.push(j.status) });
        expect(done).to.deep.include({ status: 'complete', result: { name: 'Counter' } });
        expect(seen).to.deep.equal(['queued', 'processing', 'complete']);
        expect(fake.requests.map((r) => r.url)).to.deep.equal([
          `/api/v1/jobs/${job.jobId}/events`,
          `/api/v1/jobs/${job.jobId}/events`,
        ]);
        expect(fake.requests[0]!.headers['last-event-id']).to.equal(undefined);
        expect(fake.requests[1]!.headers['last-event-id']).to.equal('e1');
        expect(fake.requests[1]!.headers.accept).to.equal('text/event-stream');
      } finally {
        await fake.close();
      }
    });

    it('when the stream fails three times in a row, then waitForJob long-polls GET /jobs/{id} with Prefer: wait and If-None-Match', async () => {
      const fake = await fakeApi((n, req, res) => {
        if (req.url!.endsWith('/events')) return sse(res).end('retry: 10\n\n'); // closes with no event
        const headers = { 'content-type': 'application/json', 'preference-applied': 'wait=30' };
        if (n === 3) return res.writeHead(200, { ...headers, etag: '"e9"' }).end(JSON.stringify(job));
        if (n === 4) return res.writeHead(304, { 'preference-applied': 'wait=30', etag: '"e9"' }).end();
        res
          .writeHead(200, { ...headers, etag: '"e10"' })
          .end(JSON.stringify({ ...job, status: 'failed', error: 'engine failed' }));
      });
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        const done = await c.waitForJob(job.jobId, { timeoutMs: 5000 });
        // A failed job resolves too: the envelope says why.
        expect(done).to.include({ status: 'failed', error: 'engine failed' });
        const polls = fake.requests.slice(3);
        expect(fake.requests.slice(0, 3).every((r) => r.url.endsWith('/events'))).to.equal(true);
        expect(polls.map((r) => [r.url, r.headers.prefer, r.headers['if-none-match']])).to.deep.equal([
          [`/api/v1/jobs/${job.jobId}`, 'wait=30', undefined],
          [`/api/v1/jobs/${job.jobId}`, 'wait=30', '"e9"'],
          [`/api/v1/jobs/${job.jobId}`, 'wait=30', '"e9"'],
        ]);
      } finally {
        await fake.close();
      }
    });

    it('when the resumed stream answers 204 (the last id was the final state), then one plain GET answers the job; an onProgress that throws rejects the wait', async () => {
      const fake = await fakeApi((n, req, res) => {
        if (n === 0) return sse(res).end(`retry: 10\n\n${event('e1', 'progress', 'processing')}`);
        if (req.url!.endsWith('/events')) return res.writeHead(204).end();
        res
          .writeHead(200, { 'content-type': 'application/json', etag: '"e2"' })
          .end(JSON.stringify({ ...job, status: 'complete' }));
      });
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        expect(await c.waitForJob(job.jobId, { timeoutMs: 5000 })).to.include({ status: 'complete' });
        expect(fake.requests.map((r) => [r.url, r.headers['last-event-id'], r.headers['if-none-match']])).to.deep.equal(
          [
            [`/api/v1/jobs/${job.jobId}/events`, undefined, undefined],
            [`/api/v1/jobs/${job.jobId}/events`, 'e1', undefined],
            [`/api/v1/jobs/${job.jobId}`, undefined, undefined],
          ],
        );
        const thrown = await c
          .waitForJob(job.jobId, {
            onProgress: () => {
              throw new Error('handler failed');
            },
          })
          .catch((x) => x);
        expect(thrown).to.have.property('message', 'handler failed');
        expect(fake.requests).to.have.length(5);
      } finally {
        await fake.close();
      }
    });

    it('when the job does not finish within timeoutMs, or the signal aborts, then waitForJob rejects and closes its stream', async () => {
      const fake = await fakeApi((_n, _req, res) =>
        sse(res).write(`${event('e1', 'progress', 'processing')}: heartbeat\n\n`),
      );
      try {
        const c = createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' });
        const timedOut = await c.waitForJob(job.jobId, { timeoutMs: 300 }).catch((x) => x);
        expect(timedOut).to.have.property('name', 'TimeoutError');
        const ac = new AbortController();
        setTimeout(() => ac.abort(new Error('stopped by the caller')), 100);
        const aborted = await c.waitForJob(job.jobId, { signal: ac.signal }).catch((x) => x);
        expect(aborted).to.have.property('message', 'stopped by the caller');
        expect(fake.requests).to.have.length(2);
        await eventually(async () => fake.requests.every((r) => r.closed), 2000, 'both streams closed');
      } finally {
        await fake.close();
      }
    });

    it('when the body is not the Error shape, then ApiError still says the status, with code http_<status>', async () => {
      const fake = await fakeApi((_n, _req, res) =>
        res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>bad gateway</h1>'),
      );
      try {
        const e = await createClient({ baseUrl: fake.baseUrl, apiKey: 'svc_test' })
          .GET('/account')
          .catch((x) => x);
        expect(e).to.include({ status: 502, code: 'http_502', requestId: null });
        expect(e.message).to.match(/GET http:\/\/127\.0\.0\.1:\d+\/api\/v1\/account answered 502: <h1>bad gateway/);
      } finally {
        await fake.close();
      }
    });
  });
});
