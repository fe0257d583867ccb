import { expect } from 'chai';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { listenToEvents } from '../helpers/events';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('POST /code-builds end to end', () => {
  let stack: Stack;
  let api: Client;
  let accountId: string;
  before(async () => {
    stack = await startStack();
    const a = await stack.createAccount({ credits: 100 });
    api = client(stack.baseUrl, a.key);
    accountId = a.accountId;
  });
  after(() => stack.stop());

  it('when a build is posted, then 202 with a queued code_ job envelope and its poll URL', async () => {
    const r = await api.post('/code-builds', { prompt: 'a todo list for groceries' });
    expect(r.status).to.equal(202);
    expect(r.body.jobId).to.match(/^code_[0-9a-z]{20}$/);
    expect(r.body).to.include({ type: 'code', status: 'queued', pollUrl: `/api/v1/jobs/${r.body.jobId}` });
    expect(r.body.result).to.equal(null);
  });

  it('when the job completes, then the app is a runnable HTML page at an absolute public URL', async () => {
    const r = await api.post('/code-builds', { prompt: 'a todo list for groceries', name: 'Groceries' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.status).to.equal('complete');
    expect(job.rawStatus).to.equal('complete');
    expect(job.result).to.include({ name: 'Groceries', framework: 'html', engine: 'local-template-v1', plan: null });
    expect(job.result.appUrl).to.match(
      /^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/assets\/blob_\w+\/index\.html\?exp=\d+&sig=/,
    );
    const page = await fetch(job.result.appUrl); // no key: the signature is the credential
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).to.match(/^sandbox allow-scripts/);
    expect(page.headers.get('x-content-type-options')).to.equal('nosniff');
    const html = await page.text();
    expect(html).to.match(/^<!doctype html>/);
    expect(html).to.include('<title>Groceries</title>');
    expect(html).to.include('store.getItem(KEY)');
    expect(html).not.to.match(/<script[^>]+src=/); // self-contained: runs offline
    expect(job.result.files[0].sizeBytes).to.equal(Buffer.byteLength(html));
  });

  it('when the HTML is run, then its script parses and builds the app', async () => {
    const r = await api.post('/code-builds', { prompt: 'a click counter' });
    const job = await waitForJob(api, r.body.jobId);
    const html = await (await fetch(job.result.appUrl)).text();
    const script = /<script>([\s\S]*?)<\/script>/.exec(html)![1]!;
    // A tiny DOM stand-in is enough to execute the vanilla app once.
    const el = () => ({
      append() {},
      setAttribute() {},
      set innerHTML(_v: string) {},
      style: {},
      textContent: '',
      focus() {},
    });
    const app = el();
    const document = { getElementById: () => app, createElement: el };
    const store: Record<string, string> = {};
    const localStorage = {
      getItem: (k: string) => store[k] ?? null,
      setItem: (k: string, v: string) => (store[k] = v),
    };
    expect(() => new Function('document', 'localStorage', script)(document, localStorage)).not.to.throw();
    expect(store['app.counter']).to.equal(undefined); // nothing clicked yet
    // In the sandbox the asset route sets, localStorage throws: the app still runs, from memory.
    const sandboxed = {
      getItem: () => {
        throw new Error('SecurityError');
      },
      setItem: () => {
        throw new Error('SecurityError');
      },
    };
    expect(() => new Function('document', 'localStorage', script)(document, sandboxed)).not.to.throw();
  });

  it('when framework is react, then the page inlines React and mounts a component', async () => {
    const r = await api.post('/code-builds', { prompt: 'pomodoro timer', framework: 'react' });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.result.framework).to.equal('react');
    const html = await (await fetch(job.result.appUrl)).text();
    expect(html).to.include('ReactDOM.createRoot');
    expect(html).to.match(/React v?18|react\.production\.min/i);
  });

  it('when planFirst is set, then the result carries a written plan, also stored as PLAN.md', async () => {
    const r = await api.post('/code-builds', { prompt: 'a chore checklist', planFirst: true });
    const job = await waitForJob(api, r.body.jobId);
    expect(job.result.plan).to.match(/^# Plan: /);
    expect(job.result.plan).to.include('## Steps');
    const planFile = job.result.files.find((f: any) => f.path === 'PLAN.md');
    expect(await (await fetch(planFile.url)).text()).to.equal(job.result.plan);
  });

  it('when the same prompt is built twice, then the app is byte-identical (deterministic engine)', async () => {
    const [a, b] = await Promise.all([
      api.post('/code-builds', { prompt: 'stopwatch' }),
      api.post('/code-builds', { prompt: 'stopwatch' }),
    ]);
    const [ja, jb] = await Promise.all([waitForJob(api, a.body.jobId), waitForJob(api, b.body.jobId)]);
    expect(ja.result.files[0].sha256).to.equal(jb.result.files[0].sha256);
  });

  it('when the job completes, then code_build.completed is published with an absolute pollUrl', async () => {
    const listener = await listenToEvents(stack.config, 'code_build.*');
    try {
      const r = await api.post('/code-builds', { prompt: 'notes' });
      const e = await listener.waitFor((x) => x.body.data.jobId === r.body.jobId);
      expect(e.routingKey).to.equal('code_build.completed');
      expect(e.body.event).to.equal('code_build.completed');
      expect(e.body.data).to.include({
        status: 'complete',
        pollUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/jobs/${r.body.jobId}`,
      });
      expect(e.body.data.appUrl).to.match(/^http/);
    } finally {
      await listener.close();
    }
  });

  it('when another account polls the job, then 404, as for an unknown id', async () => {
    const r = await api.post('/code-builds', { prompt: 'x' });
    const other = client(stack.baseUrl, (await stack.createAccount()).key);
    const theirs = await other.get(`/jobs/${r.body.jobId}`);
    expect(theirs.status).to.equal(404);
    expect(theirs.body.error.code).to.equal('not_found');
    expect((await api.get('/jobs/code_nosuchjob')).status).to.equal(404);
  });

  it('when a signed asset link is tampered with or expired, then it is refused', async () => {
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    const bad = job.result.appUrl.replace(/sig=[^&]+/, 'sig=AAAA');
    expect((await fetch(bad)).status).to.equal(404);
    const blobId = /assets\/(blob_\w+)/.exec(job.result.appUrl)![1]!;
    const expired = stack.rt.blobs.url(blobId, 'index.html', -10);
    expect((await fetch(expired)).status).to.equal(403);
  });

  it('when a range is requested, then 206 with exactly those bytes', async () => {
    const r = await api.post('/code-builds', { prompt: 'x' });
    const job = await waitForJob(api, r.body.jobId);
    const res = await fetch(job.result.appUrl, { headers: { range: 'bytes=0-14' } });
    expect(res.status).to.equal(206);
    expect(res.headers.get('content-range')).to.match(/^bytes 0-14\/\d+$/);
    expect(await res.text()).to.equal('<!doctype html>');
  });

  it('when the build ran, then the audit log has the call with credits charged and no argument values', async () => {
    const r = await api.post('/code-builds', { prompt: 'SECRET-PROMPT-VALUE' });
    const requestId = r.headers.get('x-request-id')!;
    const entry = await (async () => {
      for (let i = 0; i < 100; i++) {
        const e = await stack.db.audit.findOne({ requestId });
        if (e) return e;
        await new Promise((res) => setTimeout(res, 20));
      }
      return null;
    })();
    expect(entry).to.include({
      accountId,
      method: 'POST',
      route: '/api/v1/code-builds',
      status: 202,
      millicreditsCharged: 5000,
    });
    expect(entry!.keyId).to.match(/^key_/);
    expect(entry!.durationMs).to.be.a('number');
    expect(JSON.stringify(entry)).not.to.include('SECRET-PROMPT-VALUE');
  });
});
