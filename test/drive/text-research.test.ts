import { expect } from 'chai';
import { SCOPES } from '../../contracts/registry';
import { ResearchJobInput } from '../../contracts/research';
import { client, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
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
    const doc = await upload(api, {
      name: 'onboarding.docx',
      contentBase64: b64(
        await makeDocx(['Welcome aboard.', 'The onboarding checklist ships in May with the new laptop policy.']),
      ),
    });
    const trashed = await upload(api, {
      name: 'old-onboarding.md',
      content: 'The onboarding checklist was cancelled last year entirely.',
    });
    for (const id of [doc, trashed]) await waitForText(api, id);
    await api.post('/drive/files/bulk', { fileIds: [trashed], action: 'trash' });
    const other = await stack.createAccount({ credits: 1000 });
    const oc = client(stack.baseUrl, other.key);
    await waitForText(
      oc,
      await upload(oc, { name: 'theirs.md', content: 'Their onboarding checklist is secret and private.' }),
    );

    const r = await api.post('/research', { query: 'onboarding checklist' });
    expect(r.status).to.equal(202);
    const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
    expect(job.status).to.equal('complete');
    expect(job.result.sources).to.deep.equal([
      {
        url: `${stack.config.PUBLIC_BASE_URL}/api/v1/drive/files/${doc}`,
        title: 'onboarding.docx',
        domain: new URL(stack.config.PUBLIC_BASE_URL).host,
      },
    ]);
    expect(job.result.content).to.contain('The onboarding checklist ships in May with the new laptop policy.');
    expect(job.result.content).to.not.contain('cancelled').and.not.contain('secret');
  });

  it('when the key lacks drive:read, or is pinned to a folder, then research reads no Drive, or only files inside its folders; a full key reads them all', async () => {
    const a = await stack.createAccount({ credits: 1000 });
    const full = client(stack.baseUrl, a.key);
    const mk = async (name: string, parentFolderId?: string) =>
      (await full.post('/drive/folders', { name, ...(parentFolderId ? { parentFolderId } : {}) })).body.id as string;
    const shared = await mk('shared');
    const inner = await mk('inner', shared);
    const secret = await mk('secret');
    const inPinned = await upload(full, {
      name: 'pinned-notes.md',
      folderId: shared,
      content: 'The zephyr budget review is due in June.',
    });
    const inInner = await upload(full, {
      name: 'inner-notes.md',
      folderId: inner,
      content: 'The zephyr budget review needs two signatures.',
    });
    const inSecret = await upload(full, {
      name: 'secret-notes.md',
      folderId: secret,
      content: 'The zephyr budget review hides a layoff plan.',
    });
    const atRoot = await upload(full, {
      name: 'root-notes.md',
      content: 'The zephyr budget review was moved to Friday.',
    });
    for (const id of [inPinned, inInner, inSecret, atRoot]) await waitForText(full, id);

    const research = async (key: string) => {
      const api = client(stack.baseUrl, key);
      const r = await api.post('/research', { query: 'zephyr budget review' });
      expect(r.status, r.text).to.equal(202);
      const job = await waitForJob(api, r.body.jobId, ['complete', 'failed'], 30_000);
      expect(job.status).to.equal('complete');
      // Drive sources only (the account's earlier research jobs are sources too).
      const ids = (job.result.sources as { url: string }[])
        .map((s) => s.url.split('/').pop()!)
        .filter((id) => id.startsWith('dfl_'));
      return { ids: ids.sort(), content: job.result.content as string };
    };

    const aiOnly = await stack.rt.accounts
      .forAccount(a.accountId)
      .createKey({ name: 'ai only', scopes: ['read', 'ai'] });
    const noDrive = await research(aiOnly.key);
    expect(noDrive.ids).to.deep.equal([]);
    expect(noDrive.content).to.not.contain('zephyr budget review is due').and.not.contain('layoff');

    const pinned = await stack.rt.accounts.forAccount(a.accountId).createKey({
      name: 'pinned',
      scopes: [...SCOPES],
      folderPins: [shared],
    });
    const inPins = await research(pinned.key);
    expect(inPins.ids).to.deep.equal([inPinned, inInner].sort());
    expect(inPins.content)
      .to.contain('due in June')
      .and.contain('two signatures')
      .and.not.contain('layoff')
      .and.not.contain('Friday');

    const all = await research(a.key);
    expect(all.ids).to.deep.equal([inPinned, inInner, inSecret, atRoot].sort());
  });

  it('when a research job was recorded before Drive access was (no `drive` in its input), then it reads as no Drive', () => {
    expect(ResearchJobInput.parse({ query: 'old job' })).to.deep.equal({ query: 'old job', drive: null });
    expect(ResearchJobInput.parse({ query: 'pinned', drive: { pins: ['dfo_1'] } })).to.deep.equal({
      query: 'pinned',
      drive: { pins: ['dfo_1'] },
    });
  });
});
