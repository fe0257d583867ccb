import { expect } from 'chai';
import sinon from 'sinon';
import { start as startApi, type ApiServer } from '../../api/app';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { until } from '../helpers/fake-provider';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect, type LiveClient } from './helpers';

/**
 * Live sessions across crashes and processes: a live_action hold names what its tool
 * makes, so a crash between the write and the capture keeps the charge only when something was
 * made; a connection to another API process takes a session over, and the older one is closed.
 */
describe('live: delivery records and cross-process takeover', function () {
  this.timeout(60_000);
  let stack: Stack;
  let second: ApiServer;
  const clients: LiveClient[] = [];
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'speech', LIVE_HEARTBEAT_MS: '1000' } });
    second = await startApi(stack.config2({ LIVE_HEARTBEAT_MS: '1000' }));
  });
  afterEach(() => {
    sinon.restore();
    for (const c of clients.splice(0)) c.close();
  });
  after(async () => {
    await second?.stop();
    await stack?.stop();
  });

  const account = async () => {
    const a = await stack.createAccount({ credits: 100 });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const balance = async (api: Client) => (await api.get('/account/credits')).body.balance as number;
  const connect = (url: string, token: string) => {
    const c = liveConnect(url, { token });
    clients.push(c);
    return c;
  };
  /** The process "dies" after the tool wrote and before the capture: the hold stays behind. */
  const crashBeforeCapture = () => sinon.stub(stack.rt.credits, 'capture').rejects(new Error('process died'));
  const holds = (accountId: string) =>
    stack.db.db.collection<any>(COLLECTIONS.creditHolds).find({ accountId, operation: 'live_action' }).toArray();
  const settleLater = () => stack.rt.credits.settleExpiredHolds(new Date(Date.now() + 10 * 60_000));

  it("when the process dies between a tool's write and the capture, then the settled hold is captured because the notes exist", async () => {
    const { api, accountId } = await account();
    const before = await balance(api);
    crashBeforeCapture();
    await api.post('/live/action', { action: 'create_notes', params: { title: 'Crash notes', markdown: '# Crash' } });
    const [hold] = await holds(accountId);
    expect(hold.deliveredBy.collection).to.equal(COLLECTIONS.projects);
    const made = await stack.db.db.collection<any>(COLLECTIONS.projects).findOne({ _id: hold.deliveredBy.id });
    expect(made, 'the hold names the project the tool made').to.include({ accountId, name: 'Crash notes' });
    sinon.restore();
    expect(await settleLater()).to.include({ captured: 1, released: 0 });
    expect(await balance(api)).to.equal(before - 1);
    expect(await holds(accountId)).to.have.length(0);
  });

  it('when the process dies between remember and the capture, then the memory is the delivery; a read-only tool has none and is refunded', async () => {
    const { api, accountId } = await account();
    const before = await balance(api);
    crashBeforeCapture();
    await api.post('/live/action', { action: 'remember', params: { text: 'the door code is 42' } });
    await api.post('/live/action', { action: 'get_account', params: {} });
    const left = await holds(accountId);
    expect(left.map((h) => h.deliveredBy?.collection ?? null).sort()).to.deep.equal(
      [COLLECTIONS.liveMemories, null].sort(),
    );
    sinon.restore();
    expect(await settleLater()).to.include({ captured: 1, released: 1 });
    expect(await balance(api)).to.equal(before - 1);
  });

  it('when a session is resumed on another API process, then the newer connection takes it over and the older one is closed with 4409 on its next heartbeat', async () => {
    const { api } = await account();
    const open = await api.post('/live/session', {});
    expect(open.status, open.text).to.equal(200);
    const a = connect(open.body.realtimeUrl, open.body.token);
    const handle = (await a.next('session.started')).resumptionHandle as string;
    const row = () => stack.db.db.collection<any>(COLLECTIONS.liveSessions).findOne({ _id: open.body.sessionId });
    const firstOwner = (await row()).owner;
    expect(firstOwner.instance).to.match(/^rti_/);

    const again = await api.post('/live/session', { resumptionHandle: handle });
    expect(again.status, again.text).to.equal(200);
    const b = connect(`ws://127.0.0.1:${second.port}/realtime`, again.body.token);
    await b.next('session.started');
    expect((await row()).owner.instance, 'the row names the other process now').to.not.equal(firstOwner.instance);
    expect(await a.closed).to.deep.equal({ code: 4409, reason: 'superseded by a newer connection to this session' });
    b.send({ type: 'input_text', text: 'hello' });
    await b.next('resumption');
    expect((await row()).status, "the older connection's close does not mark it dropped").to.equal('connected');
    const seen = (await row()).lastSeenAt.getTime();
    await until(async () => (await row()).lastSeenAt.getTime() > seen, 'the new owner heart-beats', 10_000);
  });
});
