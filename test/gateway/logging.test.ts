import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import sinon from 'sinon';
import { client, waitForJob, type Client } from '../../scripts/harness/http';
import { findLeaks } from '../helpers/log-hygiene';
import { startStack, type Stack } from '../../scripts/harness/stack';

/**
 * What an SRE reads when something fails: one access line per request, an error logged once
 * with its stack and request id, worker lines that name the request and the job, no secret.
 * The stack logs into a file of its own, read back line by line.
 */
describe('logs through the API', () => {
  let stack: Stack;
  let api: Client;
  let key: string;
  let keyId: string;
  let accountId: string;
  let dir: string;
  const lines = () =>
    readFileSync(path.join(dir, 'run.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'logging-test-'));
    stack = await startStack({ env: { LOG_LEVEL: 'debug', LOG_FILE: path.join(dir, 'run.log') } });
    ({ key, keyId, accountId } = await stack.createAccount());
    api = client(stack.baseUrl, key);
  });
  afterEach(() => sinon.restore());
  after(async () => {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('when a request succeeds, then one access line names method, route template, status, duration, request, account and key id, never the key', async () => {
    const r = await api.get('/jobs/code_doesnotexist', { 'x-request-id': 'req-access-1' });
    expect(r.status).to.equal(404);
    const access = lines().filter((l) => l.msg === 'request' && l.requestId === 'req-access-1');
    expect(access).to.have.length(1);
    expect(access[0]).to.include({
      level: 'info',
      service: 'api',
      method: 'GET',
      route: '/api/v1/jobs/:id',
      status: 404,
      accountId,
      keyId,
    });
    expect(access[0]!.durationMs).to.be.a('number').at.least(0);
    expect(JSON.stringify(access[0])).not.to.include('doesnotexist'); // the template, not the path
    expect(findLeaks(readFileSync(path.join(dir, 'run.log'), 'utf8'))).to.deep.equal([]);
  });

  it('when a request has no valid key, then its access line has no account and the presented key is nowhere in the log', async () => {
    const bogus = `svc_${'Z'.repeat(43)}`;
    const r = await client(stack.baseUrl, bogus).get('/account', { 'x-request-id': 'req-access-2' });
    expect(r.status).to.equal(401);
    const [line] = lines().filter((l) => l.msg === 'request' && l.requestId === 'req-access-2');
    expect(line).to.include({ status: 401, method: 'GET' });
    expect(line).not.to.have.property('accountId');
    expect(readFileSync(path.join(dir, 'run.log'), 'utf8')).not.to.include(bogus);
  });

  it('when a handler fails unexpectedly (5xx), then the error is logged once, at error, with its stack and the request id', async () => {
    sinon.stub(stack.rt.credits, 'balance').rejects(new Error('the database fell over'));
    const r = await api.get('/account/credits', { 'x-request-id': 'req-boom-1' });
    expect(r.status).to.equal(500);
    expect(r.body.error.code).to.equal('internal_error');
    expect(r.text).not.to.include('fell over'); // the client sees no internals
    const errors = lines().filter((l) => l.level === 'error' && l.requestId === 'req-boom-1');
    expect(errors).to.have.length(1);
    expect(errors[0]!.err.message).to.equal('the database fell over');
    expect(errors[0]!.err.stack).to.match(/Error: the database fell over\n\s+at /);
    expect(errors[0]).to.include({ route: '/api/v1/account/credits', code: 'internal_error' });
  });

  it('when a job runs, then every worker line about it names its job and the request that created it', async () => {
    const r = await api.post('/code-builds', { prompt: 'a todo list' }, { 'x-request-id': 'req-job-1' });
    expect(r.status).to.equal(202);
    const jobId = r.body.jobId as string;
    await waitForJob(api, jobId, ['complete']);
    // The completion line is written before the job's state is read back as complete.
    const about = lines().filter((l) => l.jobId === jobId);
    const workers = about.filter((l) => l.service === 'workers');
    expect(workers.map((l) => l.msg)).to.include.members(['job started', 'job completed']);
    for (const l of about) expect(l.requestId, JSON.stringify(l)).to.equal('req-job-1');
  });
});
