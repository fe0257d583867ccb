import { expect } from 'chai';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** The OpenAPI document declares what the server does beyond JSON bodies: streams, redirects, empty bodies, cross-field rules. */
describe('GET /openapi completeness', () => {
  let stack: Stack;
  let doc: any;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    doc = (await client(stack.baseUrl).get('/openapi')).body;
  });
  after(() => stack.stop());
  const op = (method: string, path: string) => doc.paths[path][method];

  it('when an answer is streamed, then its success response declares the stream media type beside JSON', () => {
    const completions = op('post', '/chat/completions').responses['200'].content;
    expect(completions).to.have.keys('application/json', 'text/event-stream');
    expect(completions['application/json'].schema.$ref).to.equal('#/components/schemas/AgentCompletionResponse');
    expect(completions['text/event-stream'].schema.type).to.equal('string');
    expect(completions['text/event-stream'].schema.description)
      .to.include('chat.completion.chunk')
      .and.include('data: [DONE]')
      .and.include(': keepalive');
    expect(op('post', '/chat').responses['200'].content).to.have.keys('application/json', 'text/event-stream');
    const speech = op('post', '/speech').responses['200'];
    expect(Object.keys(speech.content)).to.have.length(1);
    expect(Object.keys(speech.content)[0]).to.match(/^audio\//);
    expect(speech.headers).to.include.keys('X-Audio-Sample-Rate', 'X-Audio-Encoding');
  });

  it('when an operation redirects, then its 302 declares the Location header and the body that repeats it', () => {
    const redirects = Object.entries(endpoints as Record<string, Endpoint>).filter(([, ep]) => ep.status === 302);
    expect(redirects.map(([id]) => id)).to.include('getDriveFileContent');
    for (const [id, ep] of redirects) {
      const r302 = op(ep.method, ep.path).responses['302'];
      expect(r302.headers?.Location, id).to.deep.equal({ $ref: '#/components/headers/Location' });
    }
    expect(op('get', '/drive/files/{id}/content').responses['302'].content['application/json'].schema.$ref).to.equal(
      '#/components/schemas/DriveDownloadLink',
    );
    expect(doc.components.headers.Location.description).to.include('302');
  });

  it('when the document is read, then it is 3.1 with the base dialect and GET /openapi declares its own shape', () => {
    expect(doc.openapi).to.equal('3.1.0');
    expect(doc.jsonSchemaDialect).to.equal('https://spec.openapis.org/oas/3.1/dialect/base');
    expect(op('get', '/openapi').responses['200'].content['application/json'].schema.$ref).to.equal(
      '#/components/schemas/OpenApiDocument',
    );
    const s = doc.components.schemas.OpenApiDocument;
    expect(s.type).to.equal('object');
    expect(s.required).to.deep.equal(['openapi', 'info', 'paths']);
  });

  it('when a POST reads no body, then it declares an optional {} body, and the server ignores any member sent', async () => {
    const noBody = Object.values(endpoints as Record<string, Endpoint>).filter(
      (ep) => ep.method === 'post' && !ep.body,
    );
    expect(noBody.map((ep) => ep.path)).to.include.members([
      '/personas/{id}/publish',
      '/personas/{id}/conversations/{cid}/end',
    ]);
    for (const ep of noBody) {
      const rb = op(ep.method, ep.path).requestBody;
      expect(rb?.required, ep.path).to.equal(false);
      expect(rb.content['application/json'].schema.type, ep.path).to.equal('object');
    }
    // As declared: a member is not refused (no 400 unknown field), the request goes on to the persona lookup.
    const { key } = await stack.createAccount({ scopes: ['read', 'write'] });
    const api = client(stack.baseUrl, key);
    for (const path of ['/personas/per_nobody/publish', '/personas/per_nobody/conversations/pcv_nobody/end']) {
      const r = await api.post(path, { anything: 1 });
      expect(r.status, path).to.equal(404);
      expect(r.body.error.code).to.equal('not_found');
      expect((await api.post(path)).status, path).to.equal(404);
    }
  });

  it('when a body rule spans fields, then the schema says it, and the server answers as the schema says', async () => {
    const s = doc.components.schemas;
    expect(s.DriveFileCreate.oneOf).to.deep.equal([{ required: ['content'] }, { required: ['contentBase64'] }]);
    expect(s.SpaceRequest.oneOf).to.deep.equal([
      { required: ['imageUrl'] },
      { required: ['imageUrls'] },
      { required: ['videoUrl'] },
    ]);
    for (const id of [
      'PersonaUpdate',
      'ProjectUpdate',
      'ConversationUpdate',
      'BoardUpdate',
      'CardUpdate',
      'WebhookUpdate',
      'DriveFileUpdate',
      'DriveFolderUpdate',
    ]) {
      expect(s[id].minProperties, id).to.equal(1);
    }
    expect(s.AgentRunApproveRequest.if).to.deep.equal({
      properties: { decision: { const: 'reject' } },
      required: ['decision'],
    });
    expect(s.AgentRunApproveRequest.then).to.deep.equal({ properties: { scope: { const: 'once' } } });
    const q = op('get', '/drive/search').parameters.find((p: { name: string }) => p.name === 'q');
    expect(q.schema.minLength).to.equal(1);
    expect(s.ChatRequest.oneOf).to.deep.equal([{ required: ['message'] }, { required: ['messages'] }]);
    const bothNull = { required: ['before', 'after'], properties: { before: { const: null }, after: { const: null } } };
    expect(s.CardCreate.not).to.deep.equal(bothNull);
    expect(s.CardUpdate.not).to.deep.equal(bothNull);
    expect(s.PersonaDeploymentCreate.then.required).to.deep.equal(['allowedOrigins']);
    expect(s.PersonaDeploymentCreate.else.not.required).to.deep.equal(['allowedOrigins']);
    expect(s.DriveBulkRequest.if.properties.action.const).to.equal('move');
    expect(s.DriveBulkRequest.then.required).to.deep.equal(['folderId']);
    expect(s.DriveBulkRequest.else.not.required).to.deep.equal(['folderId']);
    expect(s.PresentationRequest.anyOf).to.have.length(2);
    expect(s.SpeechRequest.properties.text.minLength).to.equal(1);
    expect(new RegExp(s.SpeechRequest.properties.text.pattern).test('Hello there.')).to.equal(true);
    expect(new RegExp(s.SpeechRequest.properties.text.pattern).test('one\ntwo')).to.equal(false);
    expect(new RegExp(s.MoonlightRequest.properties.negativePrompt.pattern).test('blurry')).to.equal(false);
    const fileNameRules = s.DriveFileCreate.properties.name.allOf.map(
      (r: { pattern: string }) => new RegExp(r.pattern),
    );
    const fileNameOk = (n: string) => fileNameRules.every((re: RegExp) => re.test(n));
    expect(['report.pdf', ' a b.tar.gz ', 'x.MD'].map(fileNameOk)).to.deep.equal([true, true, true]);
    expect(['report', '.pdf', 'a/b.pdf', 'a\\b.pdf', 'a.p-f', '   '].map(fileNameOk)).to.deep.equal([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);

    const { key } = await stack.createAccount({ scopes: ['read', 'write', 'drive:read', 'drive:write'] });
    const api = client(stack.baseUrl, key);
    const both = await api.post('/drive/files', { name: 'a.txt', content: 'x', contentBase64: 'eA==' });
    expect(both.status).to.equal(400);
    expect(both.body.error.message).to.include('send exactly one of content and contentBase64');
    const neither = await api.post('/drive/files', { name: 'a.txt' });
    expect(neither.status).to.equal(400);
    expect(neither.body.error.message).to.include('send exactly one of content and contentBase64');
    const board = await api.post('/boards', { name: 'B' });
    expect(board.status).to.equal(201);
    const empty = await api.patch(`/boards/${board.body.id}`, {});
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.include('name a field to change');
    // The other rules now in the schemas, answered by the server as declared (400 naming the field).
    const refused = async (r: Promise<{ status: number; body: any }>, field: string) => {
      const res = await r;
      expect(res.status, field).to.equal(400);
      expect(res.body.error.code, field).to.equal('validation_error');
      expect(res.body.error.message, field).to.include(field);
    };
    await refused(api.post(`/boards/${board.body.id}/cards`, { title: 'T', before: null, after: null }), 'before');
    await refused(api.post('/personas/per_nobody/deployments', { channel: 'web' }), 'allowedOrigins');
    await refused(
      api.post('/personas/per_nobody/deployments', { channel: 'api', allowedOrigins: ['https://a.test'] }),
      'allowedOrigins',
    );
    expect((await api.post('/personas/per_nobody/deployments', { channel: 'api' })).status).to.equal(404);
    await refused(api.post('/drive/files/bulk', { fileIds: ['dfl_x'], action: 'move' }), 'folderId');
    await refused(api.post('/drive/files/bulk', { fileIds: ['dfl_x'], action: 'trash', folderId: 'root' }), 'folderId');
    await refused(api.post('/drive/files', { name: 'report', content: 'x' }), 'name');
    await refused(api.post('/drive/folders', { name: 'a/b' }), 'name');
    await refused(api.post('/drive/folders', { name: '   ' }), 'name');
  });
});
