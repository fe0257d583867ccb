import { expect } from 'chai';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { fakeServer, listenEvents, until } from '../helpers/fake-provider';
import { toUnits } from '../../platform/credits/credits';

describe('POST /presentations (OpenAI-compatible outline author against a local fake)', () => {
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
        res.writeHead(401, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' },
          }),
        );
        return;
      }
      const outline = {
        slides: [
          { title: 'Launch plan', bullets: ['Why now'] },
          { title: 'Market', bullets: ['Size', 'Growth'] },
          { title: 'Broken slide' }, // no bullets: the model slipped
          { title: 'Next steps', bullets: ['Hire', 'Ship'] },
        ],
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-2',
          object: 'chat.completion',
          created: 1,
          model: 'deck-model',
          choices: [
            { index: 0, message: { role: 'assistant', content: JSON.stringify(outline) }, finish_reason: 'stop' },
          ],
          usage: { prompt_tokens: 50, completion_tokens: 60, total_tokens: 110 },
        }),
      );
    });
    stack = await startStack({
      env: {
        DECK_ENGINE: 'openai',
        OPENAI_BASE_URL: `${fake.url}/v1`,
        OPENAI_API_KEY: 'sk-deck',
        OPENAI_MODEL: 'deck-model',
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

  it('when the model writes the outline, then GET /jobs shows the outlining step while it works, and a malformed item makes the deck partial', async () => {
    mode = 'ok';
    const { api } = await account();
    fake.hold();
    const r = await api.post('/presentations', {
      name: 'Launch',
      brief: 'Launch the product in spring.',
      slideCount: 4,
      visualStyle: 'geometric',
    });
    expect(r.status).to.equal(201);
    const during = await until(async () => {
      const j = (await api.get(`/jobs/${r.body.job.jobId}`)).body;
      return j.rawStatus === 'outlining' ? j : null;
    }, 'the outlining step');
    expect(during).to.include({ status: 'processing', progressMessage: 'Asking the model for a 4-slide outline' });
    fake.open();
    const job = await waitForJob(api, r.body.job.jobId);
    expect(job.status, job.error).to.equal('complete');
    expect(job.rawStatus).to.equal('complete');
    expect(job.result).to.include({
      engine: 'openai-compatible:deck-model',
      slideCount: 3,
      requestedSlides: 4,
      partial: true,
      projectId: r.body.id,
      name: 'Launch',
    });
    const broken = job.result.slides[2];
    expect(broken).to.include({ status: 'failed', title: 'Broken slide', imageUrl: null });
    expect(broken.error).to.match(/no usable title and bullets/);
    expect(job.result.slides.filter((s: any) => s.status === 'built').map((s: any) => s.index)).to.deep.equal([
      0, 1, 3,
    ]);

    const sent = JSON.parse(fake.requests.at(-1)!.body);
    expect(fake.requests.at(-1)!.headers.authorization).to.equal('Bearer sk-deck');
    expect(sent).to.deep.include({ model: 'deck-model', response_format: { type: 'json_object' } });
    expect(sent.messages[0].content).to.contain('exactly 4 slides').and.contain('geometric');
    expect(sent.messages[1].content).to.contain('Launch the product in spring.');
    const stored = await stack.db.db.collection('projects').findOne({ _id: r.body.id } as never);
    expect(stored?.presentation.build.status).to.equal('partial');
  });

  it('when the provider refuses, then the deck job fails, presentation.failed is sent and the credits come back', async () => {
    mode = 'refuse';
    const { api, accountId } = await account();
    const listener = await listenEvents(stack.config, 'presentation.*');
    try {
      const r = await api.post('/presentations', { name: 'Nope', brief: 'This will not be outlined.' });
      // Charged at dispatch (the refund may already follow, the failure is fast).
      await stack.rt.jobs.flushAccepted(); // the charge's ledger entry follows the answer in a batch
      expect(
        await stack.db.ledger.countDocuments({
          accountId,
          jobId: r.body.job.jobId,
          kind: 'charge',
          millicredits: toUnits(stack.config.CREDIT_PRICES.deck),
        }),
      ).to.equal(1);
      const job = await waitForJob(api, r.body.job.jobId);
      expect(job.status).to.equal('failed');
      expect(job.error).to.equal('deck provider refused the request (401)');
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.job.jobId);
      expect(e.routingKey).to.equal('presentation.failed');
      await until(async () => (await api.get('/account/credits')).body.balance === 100, 'the refund');
      const kinds = (await stack.db.ledger.find({ accountId, jobId: r.body.job.jobId }).toArray())
        .map((l) => l.kind)
        .sort();
      expect(kinds).to.deep.equal(['charge', 'refund']);
    } finally {
      await listener.close();
    }
  });
});
