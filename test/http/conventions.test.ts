import { expect } from 'chai';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { locationOf } from '../../api/http/route';
import { client, type Client, type HttpResult } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** A 1×1 PNG: bytes the extract endpoint sniffs as image/png. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
const MALFORMED = '{"prompt": "x",';
const RATE_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-policy',
  'ratelimit',
];

describe('HTTP conventions: rule order, Location, If-Match, WWW-Authenticate, Retry-After, rate-limit headers, validation details', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let anon: Client;
  before(async () => {
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: {
        ALLOW_LOOPBACK_URLS: 'true',
        SPACE_ROOM_ENGINE: 'none',
        EXTRACT_RPC_TIMEOUT_MS: '300',
        RATE_LIMIT_MAX: '1000',
        RATE_LIMIT_WINDOW_SECONDS: '60',
      },
    });
    api = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
    anon = client(stack.baseUrl);
  });
  after(() => stack?.stop());

  const expectError = (r: HttpResult, status: number, code: string) => {
    expect(r.status, r.text).to.equal(status);
    expect(r.body.error.code).to.equal(code);
    expect(r.body.error.requestId).to.equal(r.headers.get('x-request-id'));
  };
  const expectRateHeaders = (r: HttpResult) => {
    for (const h of RATE_HEADERS) expect(r.headers.get(h), h).to.be.a('string');
    expect(r.headers.get('ratelimit-policy')).to.equal(`"default";q=${r.headers.get('x-ratelimit-limit')};w=60`);
    expect(r.headers.get('ratelimit')).to.equal(
      `"default";r=${r.headers.get('x-ratelimit-remaining')};t=${r.headers.get('x-ratelimit-reset')}`,
    );
  };

  describe('rule order: the key, then its scope, then the body', () => {
    it('when a malformed JSON body comes without a key or with an invalid one, then 401 (not 400 invalid_json) with WWW-Authenticate and no rate-limit headers', async () => {
      const none = await anon.post('/code-builds', MALFORMED);
      expectError(none, 401, 'unauthorized');
      expect(none.headers.get('www-authenticate')).to.equal('Bearer realm="api"');
      const bad = await client(stack.baseUrl, 'svc_not_a_real_key').post('/code-builds', MALFORMED);
      expectError(bad, 401, 'unauthorized');
      expect(bad.headers.get('www-authenticate')).to.equal('Bearer realm="api", error="invalid_token"');
      for (const r of [none, bad]) for (const h of RATE_HEADERS) expect(r.headers.get(h), h).to.equal(null);
    });

    it('when a body is not JSON or too large and no key is sent, then 401 too (the body is never read)', async () => {
      expectError(
        await anon.post('/code-builds', 'prompt=x', { 'content-type': 'application/x-www-form-urlencoded' }),
        401,
        'unauthorized',
      );
      expectError(
        await anon.post('/drive/files', { name: 'big.txt', content: 'x'.repeat(7 * 1024 * 1024) }),
        401,
        'unauthorized',
      );
    });

    it("when a key lacks the route's scope and the body is malformed, then 403 forbidden", async () => {
      const reader = client(stack.baseUrl, (await stack.createAccount({ scopes: ['read'] })).key);
      const r = await reader.post('/code-builds', MALFORMED);
      expectError(r, 403, 'forbidden');
      expectRateHeaders(r);
    });

    it('when a valid key sends a malformed body, then 400 invalid_json with the rate-limit headers', async () => {
      const r = await api.post('/code-builds', MALFORMED);
      expectError(r, 400, 'invalid_json');
      expectRateHeaders(r);
    });

    it('when POST /drive/files carries a body over its own limit, then 413 payload_too_large (its limit still applies)', async () => {
      expectError(
        await api.post('/drive/files', { name: 'big.txt', content: 'x'.repeat(7 * 1024 * 1024) }),
        413,
        'payload_too_large',
      );
    });

    it('when public routes are fetched without a key, then they still answer: GET /openapi with no rate-limit headers', async () => {
      const r = await anon.get('/openapi');
      expect(r.status).to.equal(200);
      for (const h of RATE_HEADERS) expect(r.headers.get(h), h).to.equal(null);
    });
  });

  describe('Location on 201 and 202', () => {
    const expectLocation = async (r: HttpResult, status: number, path: RegExp) => {
      expect(r.status, r.text).to.equal(status);
      const location = r.headers.get('location');
      expect(location).to.match(path);
      // It names what was made: a GET of it answers.
      const there = await api.get(location!.replace(/^\/api\/v1/, ''));
      expect(there.status, `GET ${location}`).to.equal(200);
      return there;
    };

    it('when a project, a webhook and a drive file are created, then Location is their URL under /api/v1', async () => {
      const project = await api.post('/notes', { name: 'Located' });
      expect((await expectLocation(project, 201, /^\/api\/v1\/projects\/[A-Za-z0-9_-]+$/)).body.id).to.equal(
        project.body.id,
      );
      const hook = await api.post('/webhooks', {
        name: 'hook',
        url: 'https://127.0.0.1:9/hook',
        events: ['code_build.completed'],
      });
      expect((await expectLocation(hook, 201, /^\/api\/v1\/webhooks\/[A-Za-z0-9_-]+$/)).body.id).to.equal(hook.body.id);
      const file = await api.post('/drive/files', { name: 'located.txt', content: 'hello' });
      expect((await expectLocation(file, 201, /^\/api\/v1\/drive\/files\/[A-Za-z0-9_-]+$/)).body.id).to.equal(
        file.body.id,
      );
    });

    it('when a flowchart, a sheet, a board, a conversation and a persona are created, then Location is their URL; a card and a folder name their own path', async () => {
      const flow = await api.post('/flowcharts', {
        name: 'flow',
        nodes: [
          { id: 'a', label: 'A' },
          { id: 'b', label: 'B' },
        ],
        edges: [{ from: 'a', to: 'b' }],
      });
      expect((await expectLocation(flow, 201, /^\/api\/v1\/projects\/[A-Za-z0-9_-]+$/)).body.id).to.equal(flow.body.id);
      const sheet = await api.post('/sheets', {
        name: 'sheet',
        columns: [{ name: 'Name', type: 'string' }],
        rows: [['x']],
      });
      expect((await expectLocation(sheet, 201, /^\/api\/v1\/sheets\/[A-Za-z0-9_-]+$/)).body.id).to.equal(sheet.body.id);
      const board = await api.post('/boards', { name: 'board' });
      expect((await expectLocation(board, 201, /^\/api\/v1\/boards\/[A-Za-z0-9_-]+$/)).body.id).to.equal(board.body.id);
      const conversation = await api.post('/conversations', { title: 'chat' });
      expect((await expectLocation(conversation, 201, /^\/api\/v1\/conversations\/[A-Za-z0-9_-]+$/)).body.id).to.equal(
        conversation.body.id,
      );
      const persona = await api.post('/personas', { name: 'persona' });
      expect((await expectLocation(persona, 201, /^\/api\/v1\/personas\/[A-Za-z0-9_-]+$/)).body.id).to.equal(
        persona.body.id,
      );
      // No GET of one card or one folder: Location is the path their PATCH answers on.
      const card = await api.post(`/boards/${board.body.id}/cards`, { title: 'card' });
      expect(card.status, card.text).to.equal(201);
      expect(card.headers.get('location')).to.equal(`/api/v1/boards/${board.body.id}/cards/${card.body.id}`);
      const folder = await api.post('/drive/folders', { name: 'Located' });
      expect(folder.status, folder.text).to.equal(201);
      expect(folder.headers.get('location')).to.equal(`/api/v1/drive/folders/${folder.body.id}`);
    });

    it('when a job is dispatched (202), then Location is the job URL, also on an Idempotency-Key replay', async () => {
      const first = await api.post('/code-builds', { prompt: 'a counter' }, { 'idempotency-key': 'loc-1' });
      const job = await expectLocation(first, 202, /^\/api\/v1\/jobs\/code_[A-Za-z0-9_-]+$/);
      expect(job.body.jobId).to.equal(first.body.jobId);
      const replay = await api.post('/code-builds', { prompt: 'a counter' }, { 'idempotency-key': 'loc-1' });
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.headers.get('location')).to.equal(first.headers.get('location'));
    });

    it('when the catalogue lists a 201 or 202 endpoint, then a Location is derived for it', () => {
      const created = { id: 'x_1', jobId: 'vid_1', runId: 'run_1', agentId: 'agt_1' };
      for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
        if (ep.status !== 201 && ep.status !== 202) continue;
        const params = Object.fromEntries([...ep.path.matchAll(/\{(\w+)\}/g)].map((m) => [m[1]!, `p_${m[1]}`]));
        const location = locationOf(ep, created, params);
        expect(location, id).to.match(/^\/[a-z]/);
        expect(location, id).not.to.match(/undefined|\{/);
      }
    });

    it('when the OpenAPI document describes a 201 or 202, then it declares Location', async () => {
      const doc = (await anon.get('/openapi')).body;
      for (const ep of Object.values(endpoints) as Endpoint[]) {
        if (ep.status !== 201 && ep.status !== 202) continue;
        expect(doc.paths[ep.path][ep.method].responses[String(ep.status)].headers, ep.path).to.have.property(
          'Location',
        );
      }
      expect(doc.components.headers).to.include.keys(
        'Location',
        'WWW-Authenticate',
        'Retry-After',
        'RateLimit',
        'RateLimit-Policy',
      );
      const post = doc.paths['/code-builds'].post.responses;
      expect(post['401'].headers).to.have.property('WWW-Authenticate');
      expect(post['429'].headers).to.include.keys('Retry-After', 'RateLimit');
      expect(post['503'].headers).to.have.property('Retry-After');
    });
  });

  describe('If-Match', () => {
    it('when If-Match names a version that is no longer current, then 412 precondition_failed and nothing changes; the current one applies', async () => {
      const p = (await api.post('/notes', { name: 'Versioned' })).body;
      expect((await api.patch(`/projects/${p.id}`, { name: 'Second' })).status).to.equal(200);
      const stale = await api.patch(`/projects/${p.id}`, { name: 'Lost' }, { 'if-match': `"${p.version}"` });
      expectError(stale, 412, 'precondition_failed');
      expect(stale.body.error.message).to.match(/version/);
      expect((await api.get(`/projects/${p.id}`)).body.name).to.equal('Second');
      expectError(await api.delete(`/projects/${p.id}`, { 'if-match': `"${p.version}"` }), 412, 'precondition_failed');
      const ok = await api.patch(`/projects/${p.id}`, { name: 'Third' }, { 'if-match': `"${p.version + 1}"` });
      expect(ok.status, ok.text).to.equal(200);
      expect(ok.headers.get('etag')).to.equal(`"${p.version + 2}"`);
    });

    it('when a change conflicts without any precondition (a name taken in the folder), then it stays 409', async () => {
      const a = (await api.post('/drive/files', { name: 'taken.txt', content: 'a' })).body;
      const b = (await api.post('/drive/files', { name: 'other.txt', content: 'b' })).body;
      expect(a.id).to.be.a('string');
      expectError(await api.patch(`/drive/files/${b.id}`, { name: 'taken.txt' }), 409, 'conflict');
      expectError(
        await api.patch(`/drive/files/${b.id}`, { name: 'renamed.txt' }, { 'if-match': '"999"' }),
        412,
        'precondition_failed',
      );
    });

    it('when the OpenAPI document describes a route that honours If-Match, then it declares the header and the 412', async () => {
      const doc = (await anon.get('/openapi')).body;
      for (const ep of Object.values(endpoints) as Endpoint[]) {
        const op = doc.paths[ep.path][ep.method];
        const declared = op.parameters.some(
          (p: { name: string; in: string }) => p.in === 'header' && p.name === 'If-Match',
        );
        expect(declared, `${ep.method} ${ep.path}`).to.equal(!!ep.ifMatch);
        if (ep.ifMatch) expect(op.responses, `${ep.method} ${ep.path}`).to.have.property('412');
      }
      expect(doc.paths['/projects/{id}'].patch.responses).not.to.have.property('409');
    });
  });

  describe('Retry-After on 503 and 504', () => {
    it('when an engine is not deployed (503) or a pool does not answer in time (504), then the error carries Retry-After in seconds', async () => {
      const r503 = await api.post('/real-world/spaces', { imageUrls: ['http://127.0.0.1:9/room.png'] });
      expectError(r503, 503, 'room_engine_unavailable');
      expect(r503.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
      const r504 = await api.post('/extract-flowchart', { documentBase64: PNG, mimeType: 'image/png' });
      expectError(r504, 504, 'timeout');
      expect(r504.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
    });
  });

  describe('validation details', () => {
    it('when validation fails, then error.details lists each field (dotted path, code, message) and the message still names them', async () => {
      const r = await api.post('/code-builds', { framework: 'vue', planFirst: 'yes', extra: 1 });
      expectError(r, 400, 'validation_error');
      expect(r.body.error.message)
        .to.match(/prompt: is required/)
        .and.match(/planFirst/);
      const byPath = Object.fromEntries(
        (r.body.error.details as { path: string; code: string; message: string }[]).map((d) => [d.path, d]),
      );
      expect(byPath.prompt).to.deep.include({ code: 'invalid_type', message: 'is required' });
      expect(byPath.planFirst?.code).to.be.a('string');
      expect(byPath.extra).to.deep.include({ code: 'unrecognized_keys', message: 'unknown field' });
    });

    it('when a nested field fails, then its path is dotted from the body root', async () => {
      const r = await api.post('/flowcharts', {
        name: 'f',
        nodes: [
          { id: 'a', label: 'A', shape: 'start' },
          { id: 'b', label: 'B', shape: 'hexagon' },
        ],
        edges: [],
      });
      expectError(r, 400, 'validation_error');
      const paths = (r.body.error.details as { path: string }[]).map((d) => d.path);
      expect(
        paths.some((p) => /^nodes\.1\./.test(p)),
        paths.join(),
      ).to.equal(true);
    });

    it('when a query or path id is malformed, then details name it too', async () => {
      const q = await api.get('/projects?limit=0');
      expectError(q, 400, 'validation_error');
      expect(q.body.error.details[0].path).to.equal('limit');
      const p = await api.get('/projects/bad%20id');
      expectError(p, 400, 'validation_error');
      expect(p.body.error.details).to.deep.equal([
        { path: 'id', code: 'invalid_format', message: 'must be 1 to 128 letters, digits, _ and -' },
      ]);
    });

    it('when the OpenAPI document describes the Error shape, then details is an optional field', async () => {
      const s = (await anon.get('/openapi')).body.components.schemas.Error.properties.error;
      expect(s.properties).to.have.property('details');
      expect(s.required).not.to.include('details');
    });
  });
});
