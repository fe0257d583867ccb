import { expect } from 'chai';
import { startMonitoringServer } from '../../monitoring/server';
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
    await stack.db.client.close(true);
    const readyz = await fetch(`${origin}/readyz`);
    expect(readyz.status).to.equal(503);
    expect(readyz.headers.get('retry-after'), 'a 503 says when to ask again').to.equal('5');
    expect(await ready()).to.equal('0');
  });

  it('when a probe of a worker or scheduler process fails, then its monitoring server answers /readyz 503 with Retry-After, and 200 without it once the probe passes', async () => {
    let down = true;
    const server = await startMonitoringServer(0, [
      {
        name: 'mongodb',
        check: () => {
          if (down) throw new Error('no answer');
        },
      },
    ]);
    try {
      const url = `http://127.0.0.1:${server.port}/readyz`;
      const r = await fetch(url);
      expect(r.status).to.equal(503);
      expect(r.headers.get('retry-after')).to.equal('5');
      expect(await r.json()).to.deep.equal({ status: 'unavailable', failures: ['mongodb: no answer'] });
      down = false;
      const ok = await fetch(url);
      expect(ok.status).to.equal(200);
      expect(ok.headers.get('retry-after')).to.equal(null);
    } finally {
      await server.close();
    }
  });
});
