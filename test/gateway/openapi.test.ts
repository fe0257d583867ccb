import { expect } from 'chai';
import { endpoints } from '../../contracts/endpoints';
import { client } from '../helpers/http';
import { startStack, type Stack } from '../helpers/stack';

describe('GET /openapi', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
  });
  after(() => stack.stop());

  it('when fetched without a key, then it is an OpenAPI 3.1 document with every SPEC section 4 endpoint', async () => {
    const r = await client(stack.baseUrl).get('/openapi');
    expect(r.status).to.equal(200);
    expect(r.body.openapi).to.equal('3.1.0');
    expect(r.body.info.version).to.equal('1.0.0');
    expect(r.body.servers[0].url).to.match(/\/api\/v1$/);
    const ops = Object.values(r.body.paths as Record<string, Record<string, any>>).flatMap((p) => Object.values(p));
    expect(ops.length).to.equal(Object.keys(endpoints).length);
    expect(ops.length).to.equal(90); // SPEC 4.1 to 4.11: 3+12+10+10+10+7+10+4+8+10+6
    const post = r.body.paths['/code-builds'].post;
    expect(post['x-required-scopes']).to.deep.equal(['ai']);
    expect(post.responses).to.have.property('202');
    expect(post.requestBody.content['application/json'].schema.$ref).to.equal('#/components/schemas/CodeBuildRequest');
    expect(r.body.paths['/jobs/{id}'].get['x-required-scopes']).to.deep.equal(['read', 'ai']);
    expect(r.body.paths['/webhooks/{id}'].patch).to.exist;
    expect(r.body.paths['/drive/files/{id}/content'].get.responses).to.have.property('302');
  });

  it('when a contract gains a field, then the document shows it (schemas come from the zod contracts)', async () => {
    const r = await client(stack.baseUrl).get('/openapi');
    const s = r.body.components.schemas;
    expect(s.CodeBuildRequest.properties).to.have.keys('prompt', 'name', 'framework', 'planFirst');
    expect(s.CodeBuildRequest.required).to.deep.equal(['prompt']);
    expect(s.JobEnvelope.properties.status.enum).to.deep.equal(['queued', 'processing', 'complete', 'failed']);
    expect(s.Error.properties.error.required).to.deep.equal(['code', 'message', 'requestId']);
  });
});
