import { expect } from 'chai';
import { start as startApi } from '../../api/app';
import { client } from '../helpers/http';
import { freePort, startStack, type Stack } from '../helpers/stack';

describe('rate limit', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '3600' } });
  });
  after(() => stack.stop());

  it('when a key stays under the limit, then every response carries the three headers', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const r = await api.get('/account');
    expect(r.headers.get('x-ratelimit-limit')).to.equal('5');
    expect(r.headers.get('x-ratelimit-remaining')).to.equal('4');
    const reset = Number(r.headers.get('x-ratelimit-reset'));
    expect(reset).to.be.within(1, 3600);
  });

  it('when a key exceeds the limit, then 429 rate_limited with Retry-After, and other keys are unaffected', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    for (let i = 0; i < 5; i++) expect((await api.get('/account')).status).to.equal(200);
    const r = await api.get('/account');
    expect(r.status).to.equal(429);
    expect(r.body.error.code).to.equal('rate_limited');
    expect(Number(r.headers.get('retry-after'))).to.be.within(1, 3600);
    expect(r.headers.get('x-ratelimit-remaining')).to.equal('0');
    const other = client(stack.baseUrl, (await stack.createAccount()).key);
    expect((await other.get('/account')).status).to.equal(200);
  });

  it('when 20 requests of one key race, then exactly the limit passes', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const statuses = (await Promise.all(Array.from({ length: 20 }, () => api.get('/account')))).map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).to.have.length(5);
    expect(statuses.filter((s) => s === 429)).to.have.length(15);
  });

  it('when two API processes serve one key, then they share one count (kept in MongoDB)', async () => {
    const port = await freePort();
    const second = await startApi(stack.config2({ PORT: String(port) }));
    try {
      const { key } = await stack.createAccount();
      const a = client(stack.baseUrl, key);
      const b = client(`http://127.0.0.1:${port}/api/v1`, key);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await (i % 2 ? b : a).get('/account')).status);
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429]);
    } finally {
      await second.stop();
    }
  });
});
