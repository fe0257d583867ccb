import { expect } from 'chai';
import sinon from 'sinon';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('gateway', () => {
  let stack: Stack;
  let api: Client;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { BODY_LIMIT_BYTES: '4096' } });
    api = client(stack.baseUrl, (await stack.createAccount()).key);
  });
  afterEach(() => sinon.restore());
  after(() => stack.stop());

  const expectError = (r: { status: number; headers: Headers; body: any }, status: number, code: string) => {
    expect(r.status).to.equal(status);
    expect(r.body.error.code).to.equal(code);
    expect(r.body.error.message).to.be.a('string').and.not.empty;
    expect(r.body.error.requestId).to.equal(r.headers.get('x-request-id'));
    expect(JSON.stringify(r.body)).not.to.match(/\n\s+at /); // no stack traces
  };

  it('when a request succeeds, then it carries X-Request-Id', async () => {
    const r = await api.get('/account');
    expect(r.status).to.equal(200);
    expect(r.headers.get('x-request-id')).to.match(/^req_[0-9a-f]{32}$/);
  });

  it('when the caller sends a sane X-Request-Id, then the same id comes back, also inside errors', async () => {
    const r = await api.get('/jobs/code_unknown', { 'x-request-id': 'trace-123.abc' });
    expect(r.headers.get('x-request-id')).to.equal('trace-123.abc');
    expectError(r, 404, 'not_found');
  });

  it('when the caller sends an unsafe X-Request-Id, then a fresh one replaces it', async () => {
    const r = await api.get('/account', { 'x-request-id': 'bad id with spaces <script>' });
    expect(r.headers.get('x-request-id')).to.match(/^req_/);
  });

  it('when a route is unknown, then 404 not_found in the Error shape', async () => {
    expectError(await api.get('/no-such-thing'), 404, 'not_found');
    expectError(await client(stack.baseUrl.replace('/api/v1', '')).get('/elsewhere'), 404, 'not_found');
  });

  it('when the JSON is malformed, then 400 invalid_json', async () => {
    expectError(await api.post('/code-builds', '{"prompt": "x",'), 400, 'invalid_json');
  });

  it('when the content type is not JSON, then 415 unsupported_media_type', async () => {
    expectError(
      await api.post('/code-builds', 'prompt=x', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'unsupported_media_type',
    );
  });

  it('when the body is larger than the limit, then 413 payload_too_large', async () => {
    expectError(await api.post('/code-builds', { prompt: 'x'.repeat(10_000) }), 413, 'payload_too_large');
  });

  it('when validation fails, then 400 validation_error names each field', async () => {
    const r = await api.post('/code-builds', { framework: 'vue', planFirst: 'yes' });
    expectError(r, 400, 'validation_error');
    expect(r.body.error.message).to.include('prompt: is required');
    expect(r.body.error.message).to.include('framework: must be one of html, react, auto');
    expect(r.body.error.message).to.include('planFirst: must be a boolean');
  });

  it('when the body is not an object, then 400 names the body', async () => {
    const r = await api.post('/code-builds', [1, 2]);
    expectError(r, 400, 'validation_error');
    expect(r.body.error.message).to.equal('body: must be a JSON object');
  });

  it('when a handler throws something unexpected, then 500 internal_error without internals', async () => {
    sinon.stub(stack.rt.credits, 'balance').rejects(new Error('secret internal detail at db.ts:42'));
    const r = await api.get('/account/credits');
    expectError(r, 500, 'internal_error');
    expect(r.text).not.to.include('secret internal detail');
  });

  it('when /openapi is read, then every operation of the catalogue is served (none answers 501 not_implemented)', async () => {
    // Every SPEC endpoint is served; the 501 fallback in api/app.ts stays for
    // catalogue entries added before their route.
    const doc = (await client(stack.baseUrl).get('/openapi')).body as {
      paths: Record<string, Record<string, { 'x-implemented'?: boolean; responses: Record<string, unknown> }>>;
    };
    const ops = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ at: `${method.toUpperCase()} ${path}`, op })),
    );
    expect(ops.length).to.be.greaterThan(90);
    expect(ops.filter((o) => o.op['x-implemented'] !== true || '501' in o.op.responses).map((o) => o.at)).to.deep.equal(
      [],
    );
  });
});
