import { expect } from 'chai';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** The ProcessNotReady alert reads process_ready: it must say what /readyz says. */
describe('process_ready metric (ProcessNotReady alert)', () => {
  let stack: Stack | undefined;
  after(async () => {
    // Close the runtime first: it unregisters its readiness check even if stopping the API then
    // stumbles over the closed database, so later suites in this process see process_ready 1.
    await stack?.rt.close().catch(() => {});
    await stack?.stop().catch(() => {});
  });

  it('when MongoDB stops answering a process, then its /metrics says process_ready 0, as /readyz answers 503', async () => {
    stack = await startStack({ workers: false, scheduler: false });
    const origin = stack.baseUrl.replace('/api/v1', '');
    const ready = async () => /^process_ready (\S+)$/m.exec(await (await fetch(`${origin}/metrics`)).text())?.[1];
    expect(await ready()).to.equal('1');
    await stack.rt.db.client.close(true);
    expect((await fetch(`${origin}/readyz`)).status).to.equal(503);
    expect(await ready()).to.equal('0');
  });
});
