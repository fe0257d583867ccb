import { expect } from 'chai';
import { start as startApi, type ApiServer } from '../../api/app';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { until } from '../helpers/fake-provider';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, type LiveClient } from './helpers';

/**
 * What bounds one live session: its turns and its time, the turns an account
 * may take per minute, a session ended elsewhere or a key revoked while connected, a client that
 * floods errors or stops answering pings, and a connection refused before its session runs.
 */
describe('live: session limits, heartbeat checks and dead connections', function () {
  this.timeout(60_000);
  let stack: Stack;
  let timed: ApiServer;
  let perMinute: ApiServer;
  const clients: LiveClient[] = [];
  before(async () => {
    stack = await startStack({
      scheduler: false,
      env: {
        WORKER_POOLS: 'speech',
        LIVE_HEARTBEAT_MS: '1000',
        LIVE_AUTH_RECHECK_MS: '100',
        LIVE_SESSION_MAX_TURNS: '2',
        LIVE_TURNS_PER_MINUTE: '60',
      },
    });
    // Two more API processes: sessions last 2 s on one; an account may take 2 turns a minute on the
    // other (apart, so that two slow turns on a loaded machine do not outlast the session first),
    // where a session may take more turns than that: with both limits at 2, a third turn that
    // arrives after the first two were answered meets the session's limit first and closes it.
    [timed, perMinute] = await Promise.all([
      startApi(stack.config2({ LIVE_HEARTBEAT_MS: '1000', LIVE_SESSION_MAX_MS: '2000' })),
      startApi(stack.config2({ LIVE_HEARTBEAT_MS: '1000', LIVE_TURNS_PER_MINUTE: '2', LIVE_SESSION_MAX_TURNS: '10' })),
    ]);
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => {
    await timed?.stop();
    await perMinute?.stop();
    await stack?.stop();
  });

  const account = async () => {
    const a = await stack.createAccount({ credits: 100 });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const connect = (url: string, token?: string) => {
    const c = liveConnect(url, { token });
    clients.push(c);
    return c;
  };
  const session = (id: string) => stack.db.db.collection<any>(COLLECTIONS.liveSessions).findOne({ _id: id });
  const timedUrl = () => `ws://127.0.0.1:${timed.port}/realtime`;
  const perMinuteUrl = () => `ws://127.0.0.1:${perMinute.port}/realtime`;

  it('when a session used its LIVE_SESSION_MAX_TURNS, then the next turn closes it with 4429 and resuming it answers session_ended', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(open.realtimeUrl, open.token);
    const { resumptionHandle } = await c.next('session.started');
    for (const text of ['first question', 'second question']) {
      c.send({ type: 'input_text', text });
      await c.next('resumption');
    }
    c.send({ type: 'input_text', text: 'third question' });
    const closed = await c.closed;
    expect(closed.code).to.equal(4429);
    expect(closed.reason).to.match(/^session limit reached: a session takes 2 turns/);
    expect(await session(open.sessionId)).to.include({ status: 'ended', endedReason: 'limit', turns: 2 });
    const resumed = await api.post('/live/session', { resumptionHandle });
    expect(resumed.status).to.equal(400);
    expect(resumed.body.error.code).to.equal('session_ended');
    expect(resumed.body.error.message).to.match(/time or turn limit/);
  });

  it('when a session outlives LIVE_SESSION_MAX_MS, then the connection closes with 4429 and resuming it answers session_ended', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(timedUrl(), open.token);
    const { resumptionHandle } = await c.next('session.started');
    const closed = await c.closed;
    expect(closed.code).to.equal(4429);
    expect(closed.reason).to.match(/^session limit reached: a session lasts 2 s/);
    const resumed = await api.post('/live/session', { resumptionHandle });
    expect(resumed.body.error?.code).to.equal('session_ended');
  });

  it('when an account takes more turns a minute than LIVE_TURNS_PER_MINUTE, then the extra turn answers rate_limited and is not run', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(perMinuteUrl(), open.token);
    await c.next('session.started');
    c.send({ type: 'input_text', text: 'one' });
    c.send({ type: 'input_text', text: 'two' });
    c.send({ type: 'input_text', text: 'three' });
    const err = await c.next('error', (e) => e.code === 'rate_limited');
    expect(err.message).to.match(/at most 2 turns a minute/);
    await until(async () => c.events.filter((e) => e.type === 'resumption').length === 2, 'two answered turns');
    expect(c.events.filter((e) => e.type === 'assistant.text' && typeof e.text === 'string')).to.have.length(2);
  });

  it('when the session is ended elsewhere (a persona conversation ended), then the open connection closes with 1000 "session ended" on the next heartbeat', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(open.realtimeUrl, open.token);
    await c.next('session.started');
    await stack.db.db
      .collection<any>(COLLECTIONS.liveSessions)
      .updateOne({ _id: open.sessionId }, { $set: { status: 'ended', endedAt: new Date() } });
    expect(await c.closed).to.deep.equal({ code: 1000, reason: 'session ended' });
  });

  it('when the key that opened a session is revoked, or the account loses API access, then the connection closes with 4403 within a heartbeat or two', async () => {
    const { api, accountId, keyId } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(open.realtimeUrl, open.token);
    await c.next('session.started');
    await stack.rt.accounts.forAccount(accountId).revokeKey(keyId);
    const closed = await c.closed;
    expect(closed.code).to.equal(4403);
    expect(closed.reason).to.match(/revoked/);

    const other = await account();
    const s2 = (await other.api.post('/live/session', {})).body;
    const c2 = connect(s2.realtimeUrl, s2.token);
    await c2.next('session.started');
    await stack.rt.accounts.forAccount(other.accountId).setPlan('free');
    expect((await c2.closed).code).to.equal(4403);
  });

  it('when a client floods invalid events, then at most 20 error replies a second come back', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(open.realtimeUrl, open.token);
    await c.next('session.started');
    for (let i = 0; i < 200; i++) c.ws.send('not json');
    await new Promise((r) => setTimeout(r, 400));
    const errors = c.events.filter((e) => e.type === 'error' && e.code === 'invalid_event').length;
    expect(errors).to.be.within(1, 40); // at most 20 in each of at most two seconds the burst spans
    expect(c.ws.readyState).to.equal(c.ws.OPEN);
  });

  it('when a client stops answering pings, then the server terminates the connection and the session is marked dropped', async () => {
    const { api } = await account();
    const open = (await api.post('/live/session', {})).body;
    const c = connect(open.realtimeUrl, open.token);
    await c.next('session.started');
    c.ws.pause(); // reads nothing: the pings stay unanswered
    await until(
      async () => (await session(open.sessionId))?.status === 'dropped',
      'the session marked dropped',
      15_000,
    );
    c.ws.resume();
    expect((await c.closed).code).to.equal(1006);
  });

  it('when a session is opened with a subset of tools, then only those are offered and run; an unknown tool is 400 naming it', async () => {
    const { api } = await account();
    const bad = await api.post('/live/session', { tools: ['create_notes', 'launch_rockets'] });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.match(/^tools\.1: "launch_rockets" is not a live action/);
    const open = await api.post('/live/session', { tools: ['create_notes', 'get_account'] });
    expect(open.status, open.text).to.equal(200);
    expect(open.body.tools).to.deep.equal(['create_notes', 'get_account']);
    const c = connect(open.body.realtimeUrl, open.body.token);
    expect((await c.next('session.started')).tools).to.deep.equal(['create_notes', 'get_account']);
    c.send({ type: 'input_text', text: 'make a flowchart of the hiring process' });
    await c.next('resumption');
    expect(
      c.events.filter((e) => e.type === 'tool.result' && e.name === 'create_flowchart'),
      'create_flowchart was not offered',
    ).to.have.length(0);
    expect((await api.get('/projects')).body.data ?? [], 'nothing was made').to.have.length(0);
  });

  it('when a connection is refused (no token), then the server drops the socket even if the client never answers the close', async () => {
    const before = stack.api!.realtime.connections;
    const c = connect(`${stack.baseUrl.replace('http://', 'ws://').replace('/api/v1', '')}/realtime`);
    await new Promise<void>((r) => c.ws.once('open', () => r()));
    c.ws.pause(); // never reads the close frame, so never answers it
    await until(async () => stack.api!.realtime.connections <= before, 'the refused socket dropped', 5000);
  });
});
