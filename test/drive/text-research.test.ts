import { expect } from 'chai';
import { client, waitForJob } from '../helpers/http';
import { startStack, type Stack } from '../helpers/stack';
import { b64, makeDocx, upload, waitForText } from './text-documents';

describe('Drive text in research: the research engine reads Drive text through platform/drive/text.ts', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { WORKER_POOLS: 'drive,research' }, scheduler: false });
  });
  after(() => stack.stop());

  it('when a Drive document holds the words of a research query, then the report cites it and quotes its extracted text; trashed files and other accounts are not read', async () => {
    const a = await stack.createAccount({ credits: 1000 });
    const api = client(stack.baseUrl, a.key);
    const doc = await upload(api, { name: 'onboarding.docx', contentBase64: b64(await makeDocx(['Welcome aboard.', 'The onboarding checklist ships in May with the new laptop policy.'])) });
    const trashed = await upload(api, { name: 'old-onboarding.md', content: 'The onboarding checklist was cancelled last year entirely.' });
    for (const id of [doc, trashed]) await waitForText(api, id);
    await api.post('/drive/files/bulk', { fileIds: [trashed], action: 'trash' });
    const other = await stack.createAccount({ credits: 1000 });
    const oc = client(stack.baseUrl, other.key);
    await waitForText(oc, await upload(oc, { name: 'theirs.md', content: 'Their onboarding checklist is secret and private.' }));

    const r = await api.post('/research', { query: 'onboarding checklist' });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status).to.equal('complete');
    expect(job.result.sources).to.deep.equal([{ url: `${stack.config.PUBLIC_BASE_URL}/api/v1/drive/files/${doc}`, title: 'onboarding.docx', domain: new URL(stack.config.PUBLIC_BASE_URL).host }]);
    expect(job.result.content).to.contain('The onboarding checklist ships in May with the new laptop policy.');
    expect(job.result.content).to.not.contain('cancelled').and.not.contain('secret');
  });
});
