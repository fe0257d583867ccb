import { expect } from 'chai';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, until } from '../helpers/fake-provider';
import { fromUnits } from '../../platform/credits/credits';

describe('research (OpenAI-compatible writer against a local fake)', () => {
  let stack: Stack;
  let fake: Awaited<ReturnType<typeof fakeServer>>;
  let mode: 'ok' | 'refuse' = 'ok';

  before(async () => {
    fake = await fakeServer((req, res) => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      if (mode === 'refuse') {
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: 'context length exceeded', type: 'invalid_request_error' } }));
        return;
      }
      const body = JSON.parse(req.body);
      const question = /^Question: (.*)$/m.exec(body.messages[1].content)?.[1];
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1,
          model: body.model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: `# Research: ${question}\n\n## Summary\n\nThe workspace has a kanban build [1].`,
              },
              finish_reason: 'stop',
            },
          ],
          usage: { prompt_tokens: 900, completion_tokens: 34, total_tokens: 934 },
        }),
      );
    });
    stack = await startStack({
      env: {
        RESEARCH_ENGINE: 'openai',
        OPENAI_BASE_URL: `${fake.url}/v1`,
        OPENAI_API_KEY: 'sk-test',
        OPENAI_MODEL: 'test-model',
      },
    });
  });
  after(async () => {
    await stack.stop();
    await fake.close();
  });

  const account = async () => {
    const a = await stack.createAccount({ credits: 100 });
    return { ...a, api: client(stack.baseUrl, a.key) as Client };
  };

  it('when the model writes the report, then progress shows the writing step and the report carries its token usage', async () => {
    mode = 'ok';
    const { api } = await account();
    const build = await api.post('/code-builds', { prompt: 'a kanban board for hiring' });
    await waitForJob(api, build.body.jobId);
    fake.hold();
    const r = await api.post('/research', { query: 'hiring kanban' });
    const during = await until(async () => {
      const j = (await api.get(`/jobs/${r.body.jobId}`)).body;
      return j.rawStatus === 'writing' ? j : null;
    }, 'the writing step');
    expect(during.progressMessage).to.equal('Asking the model to write the report from 1 source');
    expect((await api.get(`/research/${r.body.jobId}`)).body).to.include({ status: 'writing', isComplete: false });
    fake.open();
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status, job.error).to.equal('complete');
    expect(job.result.engine).to.equal('openai-compatible:test-model');
    expect(job.result.totalTokens).to.equal(934);
    expect(job.result.content).to.match(/^# Research: hiring kanban\n/);
    expect(job.result.content).to.contain(
      `1. [A Kanban Board For Hiring](${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${build.body.jobId})`,
    );
    const sent = JSON.parse(fake.requests.at(-1)!.body);
    expect(fake.requests.at(-1)!.headers.authorization).to.equal('Bearer sk-test');
    expect(sent.model).to.equal('test-model');
    expect(sent.messages[1].content).to.contain('[1] A Kanban Board For Hiring').and.contain('kanban board for hiring');
  });

  it('when the provider refuses, then the job fails, the legacy shape reports it and the credits come back', async () => {
    mode = 'refuse';
    const { api, accountId } = await account();
    const r = await api.post('/research', { query: 'anything at all' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('failed');
    const legacy = (await api.get(`/research/${r.body.jobId.slice(4)}`)).body;
    expect(legacy).to.include({
      status: 'failed',
      isComplete: false,
      errorMessage: 'research provider refused the request (400)',
      content: null,
    });
    await until(async () => (await api.get('/account/credits')).body.balance === 100, 'the refund');
    const refund = await stack.db.ledger.findOne({ accountId, jobId: r.body.jobId, kind: 'refund' });
    expect(fromUnits(refund!.millicredits)).to.equal(stack.config.CREDIT_PRICES.research);
  });
});
