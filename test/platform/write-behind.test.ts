import { expect } from 'chai';
import sinon from 'sinon';
import { createLogger } from '../../platform/infra/log';
import { createWriteBehind } from '../../platform/infra/write-behind';

/**
 * The accept path's batches (platform/jobs/accept.ts): a lone write follows within `delayMs`; under a
 * steady stream the window widens to `maxDelayMs`, so the database gets fewer, larger batches.
 * Timers are faked: what is checked is when each batch leaves and what it holds.
 */
describe('write-behind batches', () => {
  let clock: sinon.SinonFakeTimers;
  let batches: { at: number; items: number[] }[];
  const log = createLogger('silent');
  const make = (maxDelayMs?: number) =>
    createWriteBehind<number>(
      async (items) => {
        batches.push({ at: clock.now, items });
      },
      { maxItems: 50, delayMs: 20, maxDelayMs, log, name: 'test' },
    );

  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    batches = [];
  });
  afterEach(() => clock.restore());

  it('when one item waits, then it is written 20 ms later, not before', async () => {
    const wb = make(100);
    wb.add(1);
    await clock.tickAsync(19);
    expect(batches).to.deep.equal([]);
    await clock.tickAsync(1);
    expect(batches).to.deep.equal([{ at: 20, items: [1] }]);
  });

  it('when a batch held several items, then the next window is that many times 20 ms, at most 100 ms; a lone item brings it back to 20 ms', async () => {
    const wb = make(100);
    for (const i of [1, 2, 3]) wb.add(i);
    await clock.tickAsync(20);
    expect(batches.at(-1)).to.deep.equal({ at: 20, items: [1, 2, 3] });
    expect(wb.windowMs).to.equal(60);

    // A stream of one item every 10 ms: the next batch collects 60 ms of it.
    for (let i = 0; i < 6; i++) {
      wb.add(10 + i);
      await clock.tickAsync(10);
    }
    expect(batches.at(-1)).to.deep.equal({ at: 80, items: [10, 11, 12, 13, 14, 15] });
    expect(wb.windowMs).to.equal(100); // 6 × 20 ms, capped

    wb.add(99);
    await clock.tickAsync(99);
    expect(batches).to.have.length(2);
    await clock.tickAsync(1);
    expect(batches.at(-1)).to.deep.equal({ at: 180, items: [99] });
    expect(wb.windowMs).to.equal(20);
  });

  it('when a burst is followed by a quiet spell, then the next lone write waits 20 ms again, not the widened window', async () => {
    const wb = make(100);
    for (let i = 0; i < 6; i++) wb.add(i);
    await clock.tickAsync(20);
    expect(wb.windowMs).to.equal(100);
    await clock.tickAsync(1000);
    wb.add(42);
    await clock.tickAsync(20);
    expect(batches.at(-1)).to.deep.equal({ at: 1040, items: [42] });
  });

  it('when the maximum is below delayMs, then the window never drops under delayMs', async () => {
    const wb = make(5);
    for (let i = 0; i < 3; i++) wb.add(i);
    await clock.tickAsync(20);
    expect(wb.windowMs).to.equal(20);
  });

  it('when no maximum is given, then the window stays fixed; a full batch leaves at once; close writes what waits', async () => {
    const wb = make();
    for (let i = 0; i < 10; i++) wb.add(i);
    await clock.tickAsync(20);
    expect(wb.windowMs).to.equal(20);
    for (let i = 0; i < 50; i++) wb.add(i);
    await clock.tickAsync(0);
    expect(batches.at(-1)?.items).to.have.length(50);
    expect(batches.at(-1)?.at).to.equal(20);
    wb.add(7);
    await wb.close();
    expect(batches.at(-1)).to.deep.equal({ at: 20, items: [7] });
  });
});
