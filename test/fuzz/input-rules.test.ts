import { deflateSync, gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { nestedJson } from './operations';
import { expectSaneAnswer, rawClient, type RawClient, type RawRequest } from './raw-http';

/** The input rules one by one (docs/api-guide.md, "Input rules"), each with the exact code and message. */
describe('input rules: no 5xx on bad input, one Error shape, one rule for unknown fields', () => {
  let stack: Stack;
  let http: RawClient;
  let key: string;
  let accountId: string;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { BODY_LIMIT_BYTES: '65536' } });
    ({ key, accountId } = await stack.createAccount({ credits: 100_000 }));
    http = rawClient(stack.baseUrl);
  });
  after(async () => {
    http?.close();
    await stack?.stop();
  });

  const send = async (req: RawRequest) => {
    const res = await http.send({ ...req, headers: { authorization: `Bearer ${key}`, ...req.headers } });
    expectSaneAnswer(res, `${req.method} ${req.path}`);
    return res;
  };
  const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
    send({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body });
  const expectError = (
    res: { status: number; body: any; text: string },
    status: number,
    code: string,
    message?: RegExp,
  ) => {
    expect(res.status, res.text).to.equal(status);
    expect(res.body.error.code, res.text).to.equal(code);
    if (message) expect(res.body.error.message).to.match(message);
  };

  it('when a Content-Encoding does not match the body, then 400 bad_request; an unknown one 415', async () => {
    const body = JSON.stringify({ prompt: 'a counter' });
    for (const enc of ['gzip', 'deflate', 'br']) {
      expectError(
        await post('/code-builds', body, { 'content-encoding': enc }),
        400,
        'bad_request',
        /Content-Encoding/,
      );
    }
    expectError(
      await post('/code-builds', body, { 'content-encoding': 'x-unknown' }),
      415,
      'unsupported_media_type',
      /Content-Encoding/,
    );
    // A real deflate of a good body is read as usual (and fails validation for the right reason).
    expectError(
      await post('/code-builds', deflateSync(JSON.stringify({ prompt: 'x', extra: 1 })), {
        'content-encoding': 'deflate',
      }),
      400,
      'validation_error',
      /extra: unknown field/,
    );
  });

  it('when a path id has a bad percent-escape (%ff, %, %C0%AF), on /jobs and on /assets too, then 400', async () => {
    for (const id of ['%ff', '%', '%C0%AF', 'a%zz']) {
      expectError(
        await send({ method: 'GET', path: `/jobs/${id}` }),
        400,
        'validation_error',
        /^path: malformed percent-encoding$/,
      );
      expectError(await send({ method: 'GET', path: `/assets/${id}/x.png?exp=1&sig=x` }), 400, 'validation_error');
      expectError(await send({ method: 'GET', path: `/webhooks/${id}/deliveries` }), 400, 'validation_error');
    }
  });

  it('when a path id is malformed (NUL, control characters, ../, 300 characters, non-ASCII), then 400 naming the parameter; a well-formed unknown id 404', async () => {
    for (const id of ['%00', 'code_%00', '%1b', '..', 'x'.repeat(129), '%C3%A9', 'a.b', '%24where']) {
      expectError(
        await send({ method: 'GET', path: `/jobs/${id}` }),
        400,
        'validation_error',
        /^id: must be 1 to 128 letters, digits, _ and -$/,
      );
    }
    expectError(await send({ method: 'GET', path: '/research/%00' }), 400, 'validation_error', /^jobId: /);
    expectError(await send({ method: 'GET', path: `/jobs/code_${'x'.repeat(123)}` }), 404, 'not_found');
    expectError(await send({ method: 'GET', path: '/webhooks/wh_nosuchhook' }), 404, 'not_found');
  });

  it('when a string field holds NUL, then 400 naming it; names refuse control characters', async () => {
    expectError(
      await post('/code-builds', JSON.stringify({ prompt: 'a\u0000b' })),
      400,
      'validation_error',
      /^prompt: must not contain NUL characters$/,
    );
    expectError(
      await post('/research', JSON.stringify({ query: 'q\u0000' })),
      400,
      'validation_error',
      /^query: must not contain NUL/,
    );
    expectError(
      await post('/songs', JSON.stringify({ style: 'pop', title: 'a\u001bb' })),
      400,
      'validation_error',
      /^title: must not contain control characters$/,
    );
    expectError(
      await post('/presentations', JSON.stringify({ name: 'deck', brief: 'b', tags: ['ok', 'x\u0000'] })),
      400,
      'validation_error',
      /^tags\.1: must not contain control characters$/,
    );
    expectError(
      await post(
        '/webhooks',
        JSON.stringify({ name: 'n\nm', url: 'https://example.org/h', events: ['code_build.completed'] }),
      ),
      400,
      'validation_error',
      /name: must not contain control characters/,
    );
    expectError(
      await post('/videos', JSON.stringify({ prompt: 'p', referenceImageUrl: 'https://example.org/a\u0000.png' })),
      400,
      'validation_error',
      /^referenceImageUrl: /,
    );
    // Free text keeps its newlines.
    expect((await post('/code-builds', JSON.stringify({ prompt: 'line one\nline two\ttabbed' }))).status).to.equal(202);
  });

  it('when JSON nests 32 levels, then the parser takes it; at 33 and at tens of thousands of levels (gzipped too), 400 before parsing', async () => {
    // 32 levels: the body and 31 more inside one field (refused by the contract, not the parser).
    const at32 = await post('/code-builds', `{"prompt":"x","planFirst":${nestedJson(31, 'array')}}`);
    expectError(at32, 400, 'validation_error', /^planFirst: must be a boolean$/);
    const at33 = await post('/code-builds', `{"prompt":"x","planFirst":${nestedJson(32, 'array')}}`);
    expectError(at33, 400, 'validation_error', /^body: nested deeper than 32 levels of objects and arrays$/);
    // Brackets inside strings do not count.
    expect((await post('/code-builds', JSON.stringify({ prompt: '[[[[{{{{\\"'.repeat(100) }))).status).to.equal(202);
    expectError(
      await post('/research', nestedJson(50_000, 'object').slice(0, 60_000)),
      400,
      'validation_error',
      /nested deeper than 32/,
    );
    expectError(
      await post('/research', gzipSync(nestedJson(30_000, 'array')), { 'content-encoding': 'gzip' }),
      400,
      'validation_error',
      /nested deeper than 32/,
    );
  });

  it('when a body has unknown fields, then 400 validation_error naming them (every body but research)', async () => {
    expectError(
      await post('/code-builds', JSON.stringify({ prompt: 'x', colour: 'red', size: 2 })),
      400,
      'validation_error',
      /^colour, size: unknown field$/,
    );
    expectError(
      await post('/presentations', JSON.stringify({ name: 'd', outline: [{ title: 't', bullets: [], notes: 'n' }] })),
      400,
      'validation_error',
      /notes: unknown field/,
    );
    expectError(
      await post('/images/moonlight', JSON.stringify({ prompt: 'a lake', steps: 8 })),
      400,
      'validation_error',
      /^steps: unknown field$/,
    );
  });

  it('when research gets additional members, then 202 and only the validated query is stored; $, . and NUL names are 400 everywhere', async () => {
    const ok = await post(
      '/research',
      JSON.stringify({ query: ' market size ', depth: 'deep', options: { region: 'EU' } }),
    );
    expect(ok.status, ok.text).to.equal(202);
    const doc = await stack.db.jobs.findOne({ _id: ok.body.jobId, accountId });
    // The extra members are dropped; the stored input is the query plus the Drive the key may read (all scopes, no pins).
    expect(doc?.input).to.deep.equal({ query: 'market size', drive: { pins: [] } });
    for (const body of [
      '{"query":"q","$where":"1"}',
      '{"query":"q","$set":{"credits":1e9}}',
      '{"query":"q","a.b":1}',
      '{"query":"q","x\\u0000":1}',
      '{"query":"q","options":{"$gt":""}}',
      '{"query":{"$ne":null}}',
    ]) {
      expectError(await post('/research', body), 400, 'validation_error');
    }
    expectError(
      await post('/code-builds', '{"prompt":"x","$where":"1"}'),
      400,
      'validation_error',
      /^"\$where": field names must not start with \$ or contain \. or NUL$/,
    );
    expect(await stack.db.jobs.countDocuments({ accountId, type: 'research' })).to.equal(1); // the one accepted above
  });

  it('when a field name or value is huge, then the message quotes at most 64 characters of it', async () => {
    const long = 'n'.repeat(60_000);
    const res = await post('/code-builds', JSON.stringify({ prompt: 'x', [long]: 1 }));
    expectError(res, 400, 'validation_error');
    expect(res.body.error.message).to.equal(`${'n'.repeat(64)}…: unknown field`);
    const dollar = await post('/code-builds', JSON.stringify({ prompt: 'x', [`$${long}`]: 1 }));
    expect(dollar.body.error.message).to.equal(
      `"$${'n'.repeat(60)}…": field names must not start with $ or contain . or NUL`,
    );
    const path = await send({ method: 'GET', path: `/no-such/${'p'.repeat(10_000)}` });
    expectError(path, 404, 'not_found');
    expect(path.body.error.message.length).to.be.below(200);
  });

  it('when a Range header is bad, then 416 in the Error shape with Content-Range: bytes */size; a good one 206; another unit is ignored', async () => {
    const blob = await stack.rt.blobs.put(Buffer.from('0123456789'), {
      contentType: 'video/mp4',
      filename: 'clip.mp4',
      accountId,
    });
    const url = stack.rt.blobs.url(blob.id, 'clip.mp4');
    for (const range of [
      'bytes=20-30',
      'bytes=5-2',
      'bytes=-0',
      'bytes=abc',
      'bytes=0-1,3-4',
      'bytes=',
      'bytes=99999999999999999999-',
    ]) {
      const r = await fetch(url, { headers: { range } });
      const body = (await r.json()) as any;
      expect(r.status, range).to.equal(416);
      expect(r.headers.get('content-range'), range).to.equal('bytes */10');
      expect(r.headers.get('content-type')).to.match(/^application\/json/);
      expect(body.error.code).to.equal('range_not_satisfiable');
      expect(body.error.requestId).to.equal(r.headers.get('x-request-id'));
    }
    const part = await fetch(url, { headers: { range: 'bytes=2-4' } });
    expect(part.status).to.equal(206);
    expect(await part.text()).to.equal('234');
    expect(part.headers.get('content-range')).to.equal('bytes 2-4/10');
    const suffix = await fetch(url, { headers: { range: 'bytes=-3' } });
    expect(await suffix.text()).to.equal('789');
    const other = await fetch(url, { headers: { range: 'items=0-1' } });
    expect(other.status).to.equal(200);
    expect(await other.text()).to.equal('0123456789');
  });

  it('when a query value is bad, then 400 naming it, before the webhook is looked up', async () => {
    for (const q of ['limit=-1', 'limit=abc', 'limit=0', 'limit=1&limit=2', `cursor=${'c'.repeat(600)}`]) {
      const res = await send({ method: 'GET', path: `/webhooks/wh_00000000000000000000/deliveries?${q}` });
      expectError(res, 400, 'validation_error', /^(limit|cursor): /);
    }
  });
});
