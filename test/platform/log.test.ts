import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startContext, withContext } from '../../platform/infra/context';
import { createLogger } from '../../platform/infra/log';
import { findLeaks } from '../helpers/log-hygiene';

/** The logger writes one JSON object per line; these tests read the lines back from its file. */
describe('structured log lines', () => {
  let dir: string;
  let file: string;
  const lines = () =>
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'log-test-'));
    file = path.join(dir, 'out.log');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('when an error with a cause is logged, then the line holds its type, message, stack and the cause with its own stack', () => {
    const log = createLogger('info', { service: 'test' }, { file });
    const cause = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
    log.error('request failed', { err: new TypeError('cannot read x', { cause }) });
    const [line] = lines();
    expect(line).to.include({ level: 'error', msg: 'request failed', service: 'test' });
    expect(line!.err).to.include({ type: 'TypeError', message: 'cannot read x' });
    expect(line!.err.stack).to.match(/^TypeError: cannot read x\n\s+at /);
    expect(line!.err.stack).to.include('log.test.ts');
    expect(line!.err.cause).to.include({ type: 'Error', message: 'connection reset', code: 'ECONNRESET' });
    expect(line!.err.cause.stack).to.match(/at /);
  });

  it('when a field is circular, a BigInt, a Buffer or a Map, then the line is still written, and nothing throws', () => {
    const log = createLogger('info', {}, { file });
    const loop: Record<string, unknown> = { name: 'loop' };
    loop.self = loop;
    expect(() =>
      log.info('odd fields', {
        loop,
        big: 12345678901234567890n,
        buf: Buffer.alloc(3),
        map: new Map([['a', 1]]),
        fn: () => 1,
      }),
    ).not.to.throw();
    const [line] = lines();
    expect(line!.loop).to.deep.equal({ name: 'loop', self: '[circular]' });
    expect(line!.big).to.equal('12345678901234567890');
    expect(line!.buf).to.equal('[3 bytes]');
    expect(line!.map).to.deep.equal({ a: 1 });
  });

  it("when a caller passes time, level, msg or a field a child bound, then the logger's own stay and the caller's move under fields", () => {
    const log = createLogger('info', { service: 'api' }, { file }).child({ component: 'jobs' });
    log.warn('real message', {
      time: 'yesterday',
      level: 'debug',
      msg: 'fake',
      service: 'other',
      component: 'x',
      ok: 1,
    });
    const [line] = lines();
    expect(line).to.include({ level: 'warn', msg: 'real message', service: 'api', component: 'jobs', ok: 1 });
    expect(line!.time).to.match(/^\d{4}-\d\d-\d\dT/);
    expect(line!.fields).to.deep.equal({
      time: 'yesterday',
      level: 'debug',
      msg: 'fake',
      service: 'other',
      component: 'x',
    });
    // Each name twice in the text, once at the top and once under fields: never a duplicate key
    // at the top, which would let each reader pick either value.
    const text = readFileSync(file, 'utf8');
    for (const k of ['"time"', '"level"', '"msg"', '"service"', '"component"'])
      expect(text.split(k).length - 1, k).to.equal(2);
  });

  it('when secrets are logged by name or inside strings, then they are redacted: keys, webhook secrets, bearer tokens, URL signatures, passwords in URLs', () => {
    const log = createLogger('info', {}, { file });
    const key = `svc_${'A'.repeat(43)}`;
    const secret = `whsec_${'b'.repeat(43)}`;
    log.info(`calling with ${key}`, {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      secret,
      note: `the secret is ${secret}`,
      url: 'https://api.example.com/assets/a.png?exp=123&sig=abcdef0123456789&x=1',
      amqp: 'amqp://guest:hunter2@127.0.0.1:5672',
      header: 'Authorization: Bearer abc.def.ghi-123',
      err: new Error(`refused key ${key}`),
    });
    const text = readFileSync(file, 'utf8');
    expect(findLeaks(text)).to.deep.equal([]);
    for (const s of [key, secret, 'abcdef0123456789', 'hunter2', 'abc.def.ghi-123']) expect(text).not.to.include(s);
    const [line] = lines();
    expect(line!.msg).to.equal('calling with svc_[redacted]');
    expect(line!.headers).to.deep.equal({ authorization: '[redacted]', 'content-type': 'application/json' });
    expect(line!.url).to.equal('https://api.example.com/assets/a.png?exp=123&sig=[redacted]&x=1');
    expect(line!.amqp).to.equal('amqp://guest:[redacted]@127.0.0.1:5672');
    expect(line!.err.message).to.equal('refused key svc_[redacted]');
  });

  it('when a field name says it holds a secret, then its text is redacted whatever it looks like; ids and counts with such names stay', () => {
    const log = createLogger('info', {}, { file });
    const fields = {
      'x-api-key': 'k1',
      OPENAI_API_KEY: 'sk-123',
      client_secret: 'c',
      refreshToken: 'r',
      passphrase: 'p',
      'proxy-authorization': 'Basic abc',
      private_key: '-----BEGIN',
      webhookSecret: 'w',
      key: 'k',
      keyId: 'key_123',
      maxTokens: 512,
      tokenCount: 3,
    };
    log.info('names', fields);
    const [line] = lines();
    for (const k of [
      'x-api-key',
      'OPENAI_API_KEY',
      'client_secret',
      'refreshToken',
      'passphrase',
      'proxy-authorization',
      'private_key',
      'webhookSecret',
      'key',
    ])
      expect(line![k], k).to.equal('[redacted]');
    expect(line).to.include({ keyId: 'key_123', maxTokens: 512, tokenCount: 3 });
  });

  it('when code runs in a request or a job context, then its lines name the request and the job, also after awaits', async () => {
    const log = createLogger('info', {}, { file }).child({ pool: 'code' });
    await startContext({ requestId: 'req_1' }, async () => {
      log.info('in the request');
      await new Promise((r) => setTimeout(r, 1));
      await withContext({ jobId: 'code_1' }, async () => {
        await Promise.resolve();
        log.info('in the job');
      });
      log.info('explicit', { requestId: 'req_other' });
    });
    log.info('outside');
    const [a, b, c, d] = lines();
    expect(a).to.include({ msg: 'in the request', requestId: 'req_1' }).and.not.to.have.property('jobId');
    expect(b).to.include({ msg: 'in the job', requestId: 'req_1', jobId: 'code_1', pool: 'code' });
    expect(c).to.include({ msg: 'explicit', requestId: 'req_other' });
    expect(d).not.to.have.property('requestId');
  });

  it('when the level is warn, then info and debug lines are not written', () => {
    const log = createLogger('warn', {}, { file });
    log.debug('d');
    log.info('i');
    log.warn('w');
    expect(lines().map((l) => l.msg)).to.deep.equal(['w']);
  });
});
