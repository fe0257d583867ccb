import { expect } from 'chai';
import sinon from 'sinon';
import { Drain } from '../../platform/infra/drain';
import type { Logger } from '../../platform/infra/log';

/**
 * The drain-on-close shared by the job, consumer, request/reply and webhook pools
 * (platform/infra/drain.ts): stop the intake, wait for the work in flight up to the grace period,
 * abort what is left and say how many. Timers are faked: the grace period is the subject.
 */
describe('drain on close', () => {
  let clock: sinon.SinonFakeTimers;
  let lines: { level: string; msg: string; fields?: Record<string, unknown> }[];
  const log: Logger = {
    debug: () => {},
    info: (msg, fields) => lines.push({ level: 'info', msg, fields }),
    warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }),
    error: () => {},
    fatal: () => {},
    child: () => log,
  };
  const settle = () => clock.tickAsync(0);

  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    lines = [];
  });
  afterEach(() => clock.restore());

  it('when the work ends within the grace period, then close stops the intake first, waits for it, and reports none abandoned', async () => {
    const drain = new Drain();
    const order: string[] = [];
    const work = drain.begin();
    const closed = drain
      .close({ graceMs: 1000, stop: [async () => void order.push('stopped')], log, stoppedMessage: 'pool stopped' })
      .then((r) => {
        order.push('closed');
        return r;
      });
    expect(drain.accepting).to.equal(false);
    await clock.tickAsync(500);
    expect(order).to.deep.equal(['stopped']);
    work.end();
    expect(await closed).to.deep.equal({ abandoned: 0 });
    expect(order).to.deep.equal(['stopped', 'closed']);
    expect(work.abort.signal.aborted).to.equal(false);
    expect(clock.now).to.equal(500);
    expect(lines).to.deep.equal([{ level: 'info', msg: 'pool stopped', fields: { abandoned: 0 } }]);
  });

  it('when work outlasts the grace period, then it is aborted at the deadline and close reports how many were abandoned, without waiting for them', async () => {
    const drain = new Drain();
    const [a, b, c] = [drain.begin(), drain.begin(), drain.begin()];
    let report: unknown;
    void drain.close({ graceMs: 1000, log, stoppedMessage: 'pool stopped' }).then((r) => (report = r));
    c.end();
    await clock.tickAsync(999);
    expect(report).to.equal(undefined);
    expect(a.abort.signal.aborted).to.equal(false);
    await clock.tickAsync(1);
    expect(report).to.deep.equal({ abandoned: 2 });
    expect([a.abort.signal.aborted, b.abort.signal.aborted, c.abort.signal.aborted]).to.deep.equal([true, true, false]);
    expect((a.abort.signal.reason as Error).message).to.equal('worker stopping');
    expect(drain.size).to.equal(2);
    expect(lines.at(-1)).to.deep.equal({ level: 'info', msg: 'pool stopped', fields: { abandoned: 2 } });
  });

  it('when awaitAborted is set, then close returns only once the aborted work has ended (it hands its work back)', async () => {
    const drain = new Drain();
    const work = drain.begin('job_1');
    work.abort.signal.addEventListener('abort', () => setTimeout(() => work.end(), 300));
    let report: unknown;
    void drain
      .close({ graceMs: 1000, log, stoppedMessage: 'pool stopped', awaitAborted: true })
      .then((r) => (report = r));
    await clock.tickAsync(1000);
    expect(work.abort.signal.aborted).to.equal(true);
    expect(report).to.equal(undefined);
    expect(drain.has('job_1')).to.equal(true);
    await clock.tickAsync(300);
    expect(report).to.deep.equal({ abandoned: 1 });
    expect(drain.has('job_1')).to.equal(false);
  });

  it('when a stop fails, then it is a warning, the other stops still run, and the drain goes on', async () => {
    const drain = new Drain();
    const stopped: string[] = [];
    const report = await drain.close({
      graceMs: 1000,
      stop: [() => Promise.reject(new Error('channel closed')), undefined, async () => void stopped.push('second')],
      log,
      stoppedMessage: 'webhook pool stopped',
    });
    expect(report).to.deep.equal({ abandoned: 0 });
    expect(stopped).to.deep.equal(['second']);
    expect(lines.map((l) => [l.level, l.msg])).to.deep.equal([
      ['warn', 'consumer cancel failed'],
      ['info', 'webhook pool stopped'],
    ]);
  });

  it('when close is called twice, then both calls get the same drain and it runs once', async () => {
    const drain = new Drain();
    let stops = 0;
    const o = { graceMs: 10, stop: [async () => void stops++], log, stoppedMessage: 'pool stopped' };
    const first = drain.close(o);
    expect(drain.close(o)).to.equal(first);
    await first;
    expect(stops).to.equal(1);
  });

  it('when promises are tracked, then they count as work in flight until they settle, a rejection included, and the gauge follows', async () => {
    const gauge = { n: 0, inc: () => gauge.n++, dec: () => gauge.n-- };
    const drain = new Drain({ gauge });
    let resolve!: () => void;
    const ok = drain.track(new Promise<void>((r) => (resolve = r)), 'a');
    const failed = drain.track(Promise.reject(new Error('boom')), 'b');
    expect([drain.size, gauge.n, drain.has('a'), drain.has('b')]).to.deep.equal([2, 2, true, true]);
    await failed.catch(() => {});
    expect([drain.size, gauge.n, drain.has('b')]).to.deep.equal([1, 1, false]);
    resolve();
    await ok;
    expect([drain.size, gauge.n]).to.deep.equal([0, 0]);
  });

  it('when work begins after the drain is over, then it starts aborted; a second end() changes nothing', async () => {
    const gauge = { n: 0, inc: () => gauge.n++, dec: () => gauge.n-- };
    const drain = new Drain({ gauge });
    await drain.close({ graceMs: 10, log, stoppedMessage: 'pool stopped' });
    await settle();
    const late = drain.begin();
    expect(late.abort.signal.aborted).to.equal(true);
    late.end();
    late.end();
    expect([drain.size, gauge.n]).to.deep.equal([0, 0]);
  });
});
