import { expect } from 'chai';
import { startStack, type Stack } from '../helpers/stack';
import { client, waitForJob } from '../helpers/http';

describe('smoke', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.stop());

  it('when a code build is posted, then it completes', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const r = await api.post('/code-builds', { prompt: 'a counter' });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
  });
});
