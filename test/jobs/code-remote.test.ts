import { expect } from 'chai';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { fakeServer } from '../helpers/fake-provider';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** A local OpenAI-compatible chat-completions server: the protocol the openai code engine speaks. */
const chatAnswer = (model: string, content: string) =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 },
  });

const APP =
  '<!doctype html>\n<html><head><title>Remote app</title></head><body><script>document.body.append("hi")</script></body></html>';

describe('code builds with the OpenAI-compatible engine', () => {
  let stack: Stack;
  let fake: Awaited<ReturnType<typeof fakeServer>>;
  let mode: 'ok' | 'busy-once' | 'refuse' = 'ok';
  let busy = 0;
  let api: Client;

  before(async () => {
    fake = await fakeServer((req, res) => {
      const body = JSON.parse(req.body);
      res.setHeader('content-type', 'application/json');
      if (req.url !== '/v1/chat/completions' || req.headers.authorization !== 'Bearer sk-test') {
        res.statusCode = 404;
        res.end('{}');
        return;
      }
      if (mode === 'refuse') {
        res.statusCode = 400;
        res.end(JSON.stringify({ error: { message: 'bad request' } }));
        return;
      }
      if (mode === 'busy-once' && busy++ === 0) {
        res.statusCode = 503;
        res.setHeader('retry-after', '0');
        res.end(JSON.stringify({ error: { message: 'overloaded' } }));
        return;
      }
      const system: string = body.messages[0].content;
      const content = system.startsWith('You plan')
        ? '# Plan\n\n1. Build it.'
        : `Here it is:\n\`\`\`html\n${APP}\n\`\`\``;
      res.end(chatAnswer(body.model, content));
    });
    stack = await startStack({
      env: {
        CODE_ENGINE: 'openai',
        OPENAI_BASE_URL: `${fake.url}/v1`,
        OPENAI_API_KEY: 'sk-test',
        OPENAI_MODEL: 'test-coder',
        CREDIT_PRICES: '{"code_build":5}',
      },
    });
    api = client(stack.baseUrl, (await stack.createAccount({ credits: 100 })).key);
  });
  after(async () => {
    await stack.stop();
    await fake.close();
  });

  it('when the provider answers, then the app it wrote is stored and served, with the plan first when asked', async () => {
    mode = 'ok';
    const before = fake.requests.length;
    const r = await api.post('/code-builds', { prompt: 'greeting page', planFirst: true, framework: 'react' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
    expect(job.result).to.include({
      engine: 'openai-compatible:test-coder',
      framework: 'react',
      plan: '# Plan\n\n1. Build it.',
    });
    const calls = fake.requests.slice(before).map((x) => JSON.parse(x.body));
    expect(calls).to.have.length(2);
    expect(calls[1].model).to.equal('test-coder');
    expect(calls[1].messages[0].content).to.include('React 18');
    expect(calls[1].messages.at(-1)).to.deep.equal({ role: 'user', content: 'greeting page' });
    expect(await (await fetch(job.result.appUrl)).text()).to.equal(`${APP}\n`);
  });

  it('when the provider is briefly overloaded, then the job is retried and completes', async () => {
    mode = 'busy-once';
    busy = 0;
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
    expect((await stack.db.jobs.findOne({ _id: r.body.jobId }))!.attempts).to.equal(2);
  });

  it('when the provider refuses the request, then the job fails without retry and the credits come back', async () => {
    mode = 'refuse';
    const balance = async () => (await api.get('/account/credits')).body.balance;
    const start = await balance();
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job).to.include({ status: 'failed', error: 'code provider refused the request (400)' });
    expect((await stack.db.jobs.findOne({ _id: r.body.jobId }))!.attempts).to.equal(1);
    for (let i = 0; i < 100 && (await balance()) !== start; i++) await new Promise((res) => setTimeout(res, 20));
    expect(await balance()).to.equal(start);
  });
});
