import { expect } from 'chai';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { until } from '../helpers/fake-provider';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect } from '../live/helpers';

/**
 * Stale live sessions: while a connection is open its API process heart-beats
 * (lastSeenAt); a session left `connected` by a process that stopped heart-beating (it died) is
 * marked `dropped` by the scheduler task, and then resumes by handle like any dropped session.
 */
describe('scheduler: stale live sessions', function () {
  this.timeout(30_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { WORKER_POOLS: 'speech', LIVE_HEARTBEAT_MS: '100', LIVE_STALE_AFTER_MS: '800' } });
  });
  after(async () => stack?.stop());
  const sessions = () => stack.db.db.collection<any>(COLLECTIONS.liveSessions);

  it('when a connection stays open, then its heartbeat keeps the session connected past the stale limit; when its process stops heart-beating, then the scheduler marks it dropped and its handle resumes it', async () => {
    const { key } = await stack.createAccount({ credits: 100 });
    const api = client(stack.baseUrl, key);
    const open = await api.post('/live/session', {});
    expect(open.status, open.text).to.equal(200);
    const c = liveConnect(open.body.realtimeUrl, { token: open.body.token });
    const started = await c.next('session.started');
    await new Promise((r) => setTimeout(r, 2000));
    const live = await sessions().findOne({ _id: open.body.sessionId });
    expect(live.status, 'the scheduler ran twice over the stale limit meanwhile').to.equal('connected');
    expect(Date.now() - live.lastSeenAt.getTime()).to.be.below(800);

    // What a process that died leaves behind: a row still `connected`, no heartbeat since.
    c.close();
    await c.closed;
    await until(
      async () => (await sessions().findOne({ _id: open.body.sessionId })).status === 'dropped',
      'the closed connection marks it dropped',
    );
    await sessions().updateOne(
      { _id: open.body.sessionId },
      {
        $set: {
          status: 'connected',
          lastSeenAt: new Date(Date.now() - 5000),
          owner: { instance: 'rti_gone', conn: 'rtc_gone' },
        },
      },
    );
    await until(
      async () => (await sessions().findOne({ _id: open.body.sessionId })).status === 'dropped',
      'the scheduler marks the silent session dropped',
      5000,
    );
    expect((await sessions().findOne({ _id: open.body.sessionId })).owner).to.equal(null);

    const again = await api.post('/live/session', { resumptionHandle: started.resumptionHandle });
    expect(again.status, again.text).to.equal(200);
    expect(again.body).to.include({ resumed: true, charged: 0 });
  });

  it('when the task runs directly, then only connected sessions older than the limit are dropped', async () => {
    const now = new Date();
    const old = new Date(now.getTime() - 5000);
    const base = { accountId: 'acc_x', status: 'connected', updatedAt: old };
    await sessions().insertMany([
      { _id: 'live_stale_a', ...base, lastSeenAt: old },
      { _id: 'live_stale_b', ...base, lastSeenAt: new Date(now.getTime() + 60_000) },
      { _id: 'live_stale_c', ...base, status: 'ended', lastSeenAt: old },
    ]);
    expect(await stack.scheduler!.tasks.dropStaleLiveSessions(now)).to.be.at.most(1);
    const by = Object.fromEntries(
      (
        await sessions()
          .find({ _id: { $in: ['live_stale_a', 'live_stale_b', 'live_stale_c'] } })
          .toArray()
      ).map((d) => [d._id, d.status]),
    );
    expect(by).to.deep.equal({ live_stale_a: 'dropped', live_stale_b: 'connected', live_stale_c: 'ended' });
  });
});
