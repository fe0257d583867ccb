import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { endpoints } from '../../contracts/endpoints';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

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
    expect(ops.length).to.equal(93); // SPEC 4.1 to 4.11: 3+12+10+10+10+7+10+4+8+10+6, plus POST /projects/{id}/share, PATCH /drive/folders/{id} and GET /jobs/{id}/events
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

  it('when a request schema refuses unknown fields, NUL and malformed ids, then the document says so', async () => {
    const r = await client(stack.baseUrl).get('/openapi');
    const s = r.body.components.schemas;
    for (const id of [
      'CodeBuildRequest',
      'SongRequest',
      'VideoRequest',
      'ImageRequest',
      'MoonlightRequest',
      'PresentationRequest',
      'WebhookCreate',
      'WebhookUpdate',
    ]) {
      expect(s[id].additionalProperties, id).to.equal(false);
    }
    // SPEC 2.16: additional members are allowed on research (and ignored).
    expect(s.ResearchRequest.additionalProperties).to.equal(undefined);
    expect(s.CodeBuildRequest.properties.prompt.pattern).to.equal('^[^\\u0000]*$');
    expect(s.CodeBuildRequest.properties.name.pattern).to.equal('^[^\\u0000-\\u001f\\u007f-\\u009f]*$');
    const id = r.body.paths['/jobs/{id}'].get.parameters[0];
    expect(id.schema).to.include({ type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_-]+$' });
    expect(r.body.paths['/openapi'].get.responses).to.include.keys('400', '413', '415', 'default');
  });

  it("when Redocly's recommended ruleset lints the document (offline, telemetry off), then it finds no error and no warning", async function () {
    this.timeout(60_000);
    const doc = (await client(stack.baseUrl).get('/openapi')).body;
    // The test server listens on 127.0.0.1, which no-server-example.com flags; a deployment's
    // PUBLIC_BASE_URL is a real host.
    doc.servers = [{ url: 'https://api.svc.test/api/v1' }];
    const dir = await mkdtemp(path.join(tmpdir(), 'openapi-lint-'));
    try {
      const file = path.join(dir, 'openapi.json');
      await writeFile(file, JSON.stringify(doc));
      await writeFile(path.join(dir, 'redocly.yaml'), 'extends:\n  - recommended\ntelemetry: off\n');
      const bin = path.resolve('node_modules/@redocly/cli/bin/cli.js');
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [bin, 'lint', file, '--config', path.join(dir, 'redocly.yaml'), '--format', 'json'],
        {
          cwd: dir,
          // No telemetry, no update check against the registry: the lint runs without network.
          env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
          maxBuffer: 16 * 1024 * 1024,
        },
      ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
      const report = JSON.parse(stdout) as {
        totals: { errors: number; warnings: number };
        problems: { ruleId: string; message: string }[];
      };
      const problems = report.problems.map((p) => `${p.ruleId}: ${p.message}`);
      expect(problems).to.deep.equal([]);
      expect(report.totals).to.include({ errors: 0, warnings: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
