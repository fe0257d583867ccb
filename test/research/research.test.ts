import { expect } from 'chai';
import sinon from 'sinon';
import { countTokens } from '../../workers/engines/research/research.engine';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { listenEvents } from '../helpers/fake-provider';
import { toUnits } from '../../platform/credits/credits';

describe('research (local workspace engine)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.stop());

  const account = async () => {
    const a = await stack.createAccount({ credits: 1000 });
    return { ...a, api: client(stack.baseUrl, a.key) };
  };
  const research = async (api: Client, body: Record<string, unknown>) => {
    const r = await api.post('/research', body);
    expect(r.status, r.text).to.equal(202);
    return waitForJob(api, r.body.jobId);
  };
  const codeBuild = async (api: Client, body: Record<string, unknown>) => {
    const r = await api.post('/code-builds', body);
    return waitForJob(api, r.body.jobId);
  };

  it("when research is posted with extra members (SPEC 2.16 allows them), then 202 returns a res_ job and only the query (and the key's Drive access) is stored", async () => {
    const { api, accountId } = await account();
    const r = await api.post('/research', { query: 'market size', depth: 'deep', options: { region: 'EU' } });
    expect(r.status).to.equal(202);
    expect(r.body.jobId).to.match(/^res_/);
    expect(r.body).to.include({ type: 'research', status: 'queued' });
    const doc = await stack.db.jobs.findOne({ _id: r.body.jobId, accountId });
    expect(doc?.input).to.deep.equal({ query: 'market size', drive: { pins: [] } }); // a full key: the whole drive
    expect(doc?.credits).to.include({
      operation: 'research',
      millicredits: toUnits(stack.config.CREDIT_PRICES.research),
    });
  });

  it('when query is missing or empty, then 400 names it', async () => {
    const { api } = await account();
    const a = await api.post('/research', { topic: 'x' });
    expect(a.status).to.equal(400);
    expect(a.body.error.message).to.equal('query: is required');
    const b = await api.post('/research', { query: '   ' });
    expect(b.body.error.message).to.equal('query: must not be empty');
  });

  it('when the workspace holds matching work, then the report cites it with counts and a token total', async () => {
    const { api } = await account();
    await codeBuild(api, {
      prompt: 'a checklist for gardening chores and watering plants',
      planFirst: true,
      name: 'Garden Chores',
    });
    await codeBuild(api, { prompt: 'a stopwatch for sprints' });
    const song = await api.post('/songs', { style: 'gardening folk', lyrics: 'water the plants in the morning sun' });
    await waitForJob(api, song.body.jobId);
    const job = await research(api, { query: 'gardening chores and watering' });
    expect(job.status).to.equal('complete');
    const r = job.result;
    expect(r.engine).to.equal('local-extractive-v1');
    expect(r.content).to.match(/^# Research: gardening chores and watering\n/);
    expect(r.content).to.contain('## Summary').and.contain('## Sources').and.contain('[1]');
    expect(r.searchCount).to.equal(2); // jobs and projects (no notes or Drive collections yet)
    expect(r.readCount).to.equal(2); // the garden build and the song; the stopwatch does not match
    expect(r.sources).to.have.length(2);
    expect(r.sources[0]).to.deep.equal({
      url: `${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${r.sources[0].url.split('/').pop()}`,
      title: 'Garden Chores',
      domain: new URL(stack.config.PUBLIC_BASE_URL).host,
    });
    expect(r.sources.map((s: any) => s.title)).to.include('Gardening Folk');
    expect(r.partial).to.equal(false);
    // Tokens read (the build's prompt, plan and HTML; the song) plus the report: more than the report alone.
    expect(r.totalTokens).to.be.greaterThan(countTokens(r.content) + 100);
  });

  it('when the legacy endpoint is polled with the raw or the res_ id, then both give the legacy shape', async () => {
    const { api } = await account();
    await codeBuild(api, { prompt: 'a pomodoro timer for studying' });
    const job = await research(api, { query: 'pomodoro timer' });
    const raw = job.jobId.slice('res_'.length);
    const a = await api.get(`/research/${raw}`);
    const b = await api.get(`/research/${job.jobId}`);
    expect(a.status).to.equal(200);
    expect(a.body).to.deep.equal(b.body);
    expect(Object.keys(a.body).sort()).to.deep.equal([
      'completedAt',
      'content',
      'errorMessage',
      'isComplete',
      'jobId',
      'readCount',
      'searchCount',
      'sources',
      'startedAt',
      'status',
      'totalTokens',
    ]);
    expect(a.body).to.include({
      jobId: raw,
      status: 'complete',
      isComplete: true,
      errorMessage: null,
      content: job.result.content,
      readCount: 1,
      searchCount: 2,
      totalTokens: job.result.totalTokens,
    });
    expect(a.body.sources).to.deep.equal(job.result.sources);
    expect(Date.parse(a.body.startedAt)).to.be.at.most(Date.parse(a.body.completedAt));
  });

  it('when a job is still running or has failed, then isComplete is false', async () => {
    const { api, accountId } = await account();
    const now = new Date();
    const base = {
      accountId,
      type: 'research' as const,
      input: { query: 'q' },
      result: null,
      notes: [],
      credits: { operation: 'research' as const, millicredits: 0, refunded: false },
      dispatchedAt: now,
      attempts: 1,
      sweptAt: null,
      createdAt: now,
      updatedAt: now,
    };
    await stack.db.jobs.insertMany([
      {
        ...base,
        _id: 'res_runningjob',
        status: 'processing',
        rawStatus: 'reading',
        progressMessage: 'Reading source 1 of 3',
        error: null,
        lease: { owner: 'elsewhere', until: new Date(Date.now() + 3_600_000) },
        startedAt: now,
        completedAt: null,
      },
      {
        ...base,
        _id: 'res_failedjob',
        status: 'failed',
        rawStatus: 'failed',
        progressMessage: 'Failed',
        error: 'research provider refused the request (400)',
        lease: null,
        startedAt: now,
        completedAt: now,
      },
    ]);
    const running = (await api.get('/research/runningjob')).body;
    expect(running).to.include({
      jobId: 'runningjob',
      status: 'reading',
      isComplete: false,
      content: null,
      completedAt: null,
      errorMessage: null,
    });
    const failed = (await api.get('/research/res_failedjob')).body;
    expect(failed).to.include({
      jobId: 'failedjob',
      status: 'failed',
      isComplete: false,
      content: null,
      errorMessage: 'research provider refused the request (400)',
    });
  });

  it('when a source cannot be read, then the report is partial and the legacy status says partial', async () => {
    const { api } = await account();
    const build = await codeBuild(api, { prompt: 'a recipe notes board for baking bread', planFirst: true });
    await codeBuild(api, { prompt: 'a counter for baking bread loaves' });
    // The plan file of the first build is gone from the blob store.
    const plan = build.result.files.find((f: any) => f.path === 'PLAN.md');
    const blobId = /assets\/(blob_\w+)/.exec(plan.url)![1]!;
    await stack.db.db.collection('blobs.files').deleteOne({ _id: blobId as never });
    const job = await research(api, { query: 'baking bread' });
    expect(job.status).to.equal('complete');
    expect(job.result).to.include({ partial: true, readCount: 1, failedReads: 1 });
    expect(job.result.content).to.contain('## Not read').and.contain('PLAN.md is no longer stored');
    const legacy = (await api.get(`/research/${job.jobId}`)).body;
    expect(legacy).to.include({ status: 'partial', isComplete: true });
  });

  it('when the workspace has nothing on the query, then the report says so with no sources', async () => {
    const { api } = await account();
    const job = await research(api, { query: 'quantum chromodynamics' });
    expect(job.result).to.include({ readCount: 0, partial: false });
    expect(job.result.sources).to.deep.equal([]);
    expect(job.result.content).to.contain('Nothing in this workspace matches "quantum chromodynamics"');
  });

  it('when another account, an unknown id or a non-research job is asked for, then 404', async () => {
    const mine = await account();
    const theirs = await account();
    const job = await research(mine.api, { query: 'anything' });
    expect((await theirs.api.get(`/research/${job.jobId}`)).status).to.equal(404);
    expect((await theirs.api.get(`/research/${job.jobId.slice(4)}`)).status).to.equal(404);
    expect((await mine.api.get('/research/nosuchjob')).status).to.equal(404);
    const build = await mine.api.post('/code-builds', { prompt: 'x' });
    const r = await mine.api.get(`/research/${build.body.jobId}`);
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal('not_found');
  });

  it('when research runs, then the job records each search, each read and the writing', async () => {
    const { api } = await account();
    await codeBuild(api, { prompt: 'a reading list tracker', name: 'Reading List' });
    const spy = sinon.spy(stack.workers!.runtime.jobs, 'progress');
    try {
      const job = await research(api, { query: 'reading list' });
      const steps = spy
        .getCalls()
        .filter((c) => c.args[0] === job.jobId)
        .map((c) => `${c.args[2].rawStatus}: ${c.args[2].progressMessage}`);
      expect(steps).to.deep.equal([
        'searching: Searching jobs for "reading list"',
        'searching: Searching projects for "reading list"',
        'reading: Reading source 1 of 1: Reading List',
        'writing: Writing the report from 1 source',
      ]);
    } finally {
      sinon.restore();
    }
  });

  it('when research completes, then research.completed is published', async () => {
    const { api } = await account();
    const listener = await listenEvents(stack.config, 'research.*');
    try {
      const r = await api.post('/research', { query: 'roadmap' });
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.jobId);
      expect(e.routingKey).to.equal('research.completed');
      expect(e.body.data).to.include({ status: 'complete', partial: false, readCount: 0 });
    } finally {
      await listener.close();
    }
  });

  // Last: once a notes collection exists, every later search in this database also covers it.
  it('when notes or Drive collections exist, then they are searched and read too, for this account only', async () => {
    const { api, accountId } = await account();
    const other = await account();
    await stack.db.db.collection('notes').insertMany([
      {
        _id: 'note_mine',
        accountId,
        title: 'Standup notes',
        content: 'The onboarding checklist ships in May. Design review is on Friday.',
        createdAt: new Date(),
      },
      {
        _id: 'note_theirs',
        accountId: other.accountId,
        title: 'Secret onboarding checklist',
        content: 'Not yours to read.',
        createdAt: new Date(),
      },
    ] as never[]);
    const job = await research(api, { query: 'onboarding checklist' });
    expect(job.result.searchCount).to.equal(3);
    expect(job.result.sources).to.deep.equal([
      {
        url: `${stack.config.PUBLIC_BASE_URL}/api/v1/projects/note_mine`,
        title: 'Standup notes',
        domain: new URL(stack.config.PUBLIC_BASE_URL).host,
      },
    ]);
    expect(job.result.content).to.contain('The onboarding checklist ships in May.').and.not.contain('Not yours');
  });
});
