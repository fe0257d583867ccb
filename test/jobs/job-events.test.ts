import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import type { JobEnvelope } from '../../contracts/common';
import { start as startApi, type ApiServer } from '../../api/app';
import { AppError } from '../../platform/infra/errors';
import { answerJob, createJobWatch, preferredWait, streamJob } from '../../api/jobs/job-watch';
import { registry } from '../../monitoring/metrics';
import { client } from '../../scripts/harness/http';
import { openSse, type SseStream } from '../../scripts/harness/sse';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { within } from '../helpers/within';

/**
 * GET /jobs/{id}/events (Server-Sent Events) and GET /jobs/{id} with Prefer: wait, fed by the
 * job-changes fanout: the jobs are moved by the functions the worker pools call, on the real
 * RabbitMQ and FerretDB, and watched through a second API process as well.
 */
describe('live job progress (GET /jobs/{id}/events, Prefer: wait)', function () {
  this.timeout(60_000);
  let stack: Stack;
  let second: ApiServer;
  const streams: SseStream[] = [];
  const base2 = () => `http://127.0.0.1:${second.port}/api/v1`;

  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { JOB_EVENTS_HEARTBEAT_MS: '300' } });
    second = await startApi(stack.config2({ JOB_EVENTS_HEARTBEAT_MS: '300' }));
  });
  afterEach(() => {
    for (const s of streams.splice(0)) s.close();
  });
  after(async () => {
    await second?.stop();
    await stack.stop();
  });

  const newJob = async () => {
    const account = await stack.createAccount();
    const api = client(stack.baseUrl, account.key);
    const { body } = await api.post('/code-builds', { prompt: 'a todo app' });
    return { ...account, api, jobId: body.jobId as string };
  };
  const open = async (baseUrl: string, key: string, jobId: string, headers: Record<string, string> = {}) => {
    const s = await openSse(`${baseUrl}/jobs/${jobId}/events`, { authorization: `Bearer ${key}`, ...headers });
    streams.push(s);
    return s;
  };
  const data = (e: { data: string }) => JSON.parse(e.data) as Record<string, unknown>;

  it('when a job is queued, claimed, reports progress and completes, then a stream on another API process shows each state in order, then the final envelope, and ends', async () => {
    const { key, api, jobId } = await newJob();
    const s = await open(base2(), key, jobId);
    expect(s.status).to.equal(200);
    expect(s.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(s.headers.get('x-ratelimit-limit')).to.be.a('string');
    expect(s.retry).to.equal(undefined); // set once the first bytes are parsed
    const queued = await s.next();
    expect(queued.event).to.equal('progress');
    expect(data(queued)).to.include({ jobId, status: 'queued' });
    expect(s.retry).to.equal(2000);

    const jobs = stack.rt.jobs;
    await jobs.claim(jobId, 'worker-a', 30_000);
    await s.next((e) => data(e).status === 'processing');
    await jobs.progress(jobId, 'worker-a', { rawStatus: 'building', progressMessage: 'Building the app' });
    await s.next((e) => data(e).progressMessage === 'Building the app');
    await jobs.complete(jobId, 'worker-a', { ok: true });
    const done = await s.next((e) => e.event === 'complete');
    await s.ended;

    expect(s.events.map((e) => e.event)).to.deep.equal(['progress', 'progress', 'progress', 'complete']);
    expect(s.events.map((e) => data(e).status)).to.deep.equal(['queued', 'processing', 'processing', 'complete']);
    const ids = s.events.map((e) => e.id);
    expect(new Set(ids).size).to.equal(4);
    // The last event is what GET /jobs/{id} answers, and its id is that answer's ETag.
    const read = await api.get(`/jobs/${jobId}`);
    expect(data(done)).to.deep.equal(read.body);
    expect(read.headers.get('etag')).to.equal(`"${done.id}"`);
  });

  it('when a stream is resumed with Last-Event-ID, then the state it names is not sent again; when it names the final state, then 204', async () => {
    const { key, jobId } = await newJob();
    const first = await open(stack.baseUrl, key, jobId);
    const queued = await first.next();
    first.close();
    const resumed = await open(stack.baseUrl, key, jobId, { 'last-event-id': queued.id! });
    await stack.rt.jobs.fail(jobId, 'boom');
    const failed = await resumed.next((e) => e.event === 'failed');
    await resumed.ended;
    expect(resumed.events).to.have.length(1); // not the queued state it already had
    expect(data(failed)).to.include({ status: 'failed', error: 'boom' });

    const again = await open(stack.baseUrl, key, jobId, { 'last-event-id': failed.id! });
    expect(again.status).to.equal(204);
    const fresh = await open(stack.baseUrl, key, jobId);
    await fresh.ended;
    expect(fresh.events.map((e) => e.event)).to.deep.equal(['failed']); // a finished job: one event, then the end
  });

  it('when nothing changes, then the stream carries heartbeat comments and stays open', async () => {
    const { key, jobId } = await newJob();
    const s = await open(stack.baseUrl, key, jobId);
    await s.next();
    await within(5_000, async () => s.comments.filter((c) => c.trim() === 'heartbeat').length >= 2);
    expect(s.events).to.have.length(1);
  });

  it("when another account asks for a job's stream, or names no job, then 404 in the Error shape; a key without read or ai, then 403", async () => {
    const { jobId } = await newJob();
    const other = await stack.createAccount();
    const theirs = await open(stack.baseUrl, other.key, jobId);
    expect(theirs.status).to.equal(404);
    expect(JSON.parse(theirs.text!).error.code).to.equal('not_found');
    const none = await open(stack.baseUrl, other.key, 'code_doesnotexist');
    expect(none.status).to.equal(404);
    const driveOnly = await stack.createAccount({ scopes: ['drive:read'] });
    const forbidden = await open(stack.baseUrl, driveOnly.key, jobId);
    expect(forbidden.status).to.equal(403);
    const noKey = await openSse(`${stack.baseUrl}/jobs/${jobId}/events`);
    expect(noKey.status).to.equal(401);
  });

  it('when Prefer: wait=N asks for a job that does not change, then the answer comes after N seconds with Preference-Applied, and with If-None-Match, 304', async () => {
    const { api, jobId } = await newJob();
    const first = await api.get(`/jobs/${jobId}`);
    const etag = first.headers.get('etag') as string;
    expect(etag).to.match(/^"[A-Za-z0-9_-]+"$/);
    expect((await api.get(`/jobs/${jobId}`, { 'if-none-match': etag })).status).to.equal(304);

    const t0 = Date.now();
    const waited = await api.get(`/jobs/${jobId}`, { prefer: 'wait=1' });
    expect(Date.now() - t0).to.be.at.least(900);
    expect(waited.status).to.equal(200);
    expect(waited.headers.get('preference-applied')).to.equal('wait=1');
    expect(waited.body).to.include({ status: 'queued' });
    const unchanged = await api.get(`/jobs/${jobId}`, { prefer: 'wait=1', 'if-none-match': etag });
    expect(unchanged.status).to.equal(304);
    expect(unchanged.headers.get('etag')).to.equal(etag);
    // More than 60 counts as 60.
    await stack.rt.jobs.fail(jobId, 'x');
    const capped = await api.get(`/jobs/${jobId}`, { prefer: 'respond-async, wait=3600' });
    expect(capped.headers.get('preference-applied')).to.equal('wait=60');
    expect(capped.body.status).to.equal('failed'); // finished: answered at once
  });

  it('when a job changes during a Prefer: wait on another API process, then the answer comes with the new state at once; a stale If-None-Match answers at once', async () => {
    const { key, api, jobId } = await newJob();
    const etag = (await api.get(`/jobs/${jobId}`)).headers.get('etag') as string;
    const two = client(base2(), key);
    const t0 = Date.now();
    const waiting = two.get(`/jobs/${jobId}`, { prefer: 'wait=30' });
    await within(5_000, async () => (await watchersOf('wait')) >= 1);
    await stack.rt.jobs.claim(jobId, 'worker-a', 30_000);
    const answer = await waiting;
    expect(answer.status).to.equal(200);
    expect(answer.body.status).to.equal('processing');
    expect(Date.now() - t0).to.be.below(25_000);
    expect(answer.headers.get('etag')).to.not.equal(etag);

    const stale = await two.get(`/jobs/${jobId}`, { prefer: 'wait=30', 'if-none-match': etag });
    expect(stale.status).to.equal(200);
    expect(stale.body.status).to.equal('processing');
  });

  it('when the API process shuts down, then its streams end and its waits answer at once (clients resume elsewhere)', async () => {
    const extra = await startApi(stack.config2());
    const { key, jobId } = await newJob();
    const base = `http://127.0.0.1:${extra.port}/api/v1`;
    const s = await open(base, key, jobId);
    await s.next();
    const waiting = client(base, key).get(`/jobs/${jobId}`, { prefer: 'wait=30' });
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    const stopping = extra.stop();
    await s.ended;
    const answer = await waiting;
    await stopping;
    expect(answer.status).to.equal(200);
    expect(Date.now() - t0).to.be.below(10_000);
  });

  it('when the client left while its request was still in the middleware, then the stream and the wait hold no place and a shutdown does not wait for them', async () => {
    const watch = createJobWatch({ maxWatchers: 10 });
    const queued = { jobId: 'code_gone', status: 'queued' } as unknown as JobEnvelope;
    const handled: Promise<unknown>[] = [];
    // The handlers run only once the client's socket is closed: the middleware was slower than the client.
    const app = express();
    app.use(async (req, _res, next) => {
      if (!req.socket.destroyed) await once(req.socket, 'close');
      next();
    });
    app.get(
      '/stream',
      (req, res) => void handled.push(streamJob(req, res, 'code_gone', async () => queued, watch, 60_000)),
    );
    app.get('/wait', (req, res) => void handled.push(answerJob(req, res, 'code_gone', async () => queued, watch)));
    const server = app.listen(0);
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      for (const [path, headers] of [
        ['/stream', ''],
        ['/wait', 'Prefer: wait=60\r\n'],
      ] as const) {
        const socket = net.connect(port, '127.0.0.1');
        await once(socket, 'connect');
        socket.end(`GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
        socket.destroy();
      }
      await within(20_000, async () => handled.length === 2);
      // Before, each held its place until its 60 s ran out, and close() waited for them.
      const done = (p: Promise<unknown>) =>
        Promise.race([p.then(() => true), new Promise((r) => setTimeout(r, 20_000, false))]);
      expect(await done(Promise.all(handled))).to.equal(true);
      expect(watch.held).to.deep.equal({ stream: 0, wait: 0 });
      expect(await done(watch.close())).to.equal(true);
    } finally {
      server.close();
    }
  });

  it('when the fanout is lost or comes back, then every waiter reads again; one client over JOB_EVENT_STREAMS_MAX gets 503 with Retry-After; close waits for the last', async () => {
    const watch = createJobWatch({ maxWatchers: 2 });
    const ac = new AbortController();
    const a = watch.next('code_a', 60_000, ac.signal);
    const b = watch.next('code_b', 60_000, ac.signal);
    watch.changed('code_a');
    expect(await a).to.equal('changed');
    watch.changedAll(); // an announcement of code_b may have been missed
    expect(await b).to.equal('changed');
    expect(await watch.next('code_c', 20, ac.signal)).to.equal('timeout');

    const one = watch.admit('stream');
    const two = watch.admit('wait');
    let refused: unknown;
    try {
      watch.admit('stream');
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(AppError);
    expect((refused as AppError).status).to.equal(503);
    expect((refused as AppError).headers['Retry-After']).to.equal('1');
    let closed = false;
    const closing = watch.close().then(() => {
      closed = true;
    });
    expect(await watch.next('code_d', 60_000, ac.signal)).to.equal('closed');
    one();
    await new Promise((r) => setTimeout(r, 10));
    expect(closed).to.equal(false);
    two();
    await closing;
    expect(watch.held).to.deep.equal({ stream: 0, wait: 0 });
  });

  it('when Prefer carries wait among other preferences, then the wait is read (capped at 60 s) and anything else is ignored', () => {
    expect(preferredWait('wait=5')).to.equal(5);
    expect(preferredWait('respond-async, wait=10')).to.equal(10);
    expect(preferredWait('handling=lenient; wait=100')).to.equal(60);
    expect(preferredWait('wait="7"')).to.equal(7);
    expect(preferredWait('wait=0')).to.equal(undefined);
    expect(preferredWait('wait=soon')).to.equal(undefined);
    expect(preferredWait('waiting=5')).to.equal(undefined);
    expect(preferredWait(undefined)).to.equal(undefined);
  });

  /** What this test process's API processes report holding, by kind (one registry for both). */
  const watchersOf = async (kind: string) =>
    (await registry.getSingleMetric('job_watchers')!.get()).values.find((v) => v.labels.kind === kind)?.value ?? 0;
});
