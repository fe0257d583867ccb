import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import fc from 'fast-check';
import { startStack, type Stack } from '../../scripts/harness/stack';
import {
  BAD_AUTHORIZATION,
  BAD_CONTENT_ENCODINGS,
  BAD_CONTENT_TYPES,
  example,
  fillPath,
  nestedJson,
  ODD_IDS,
  resolve,
  servedOperations,
  typesOf,
  wrongType,
  type Operation,
  type Schema,
} from './operations';
import { expectSaneAnswer, rawClient, type RawClient, type RawRequest, type RawResponse } from './raw-http';

/**
 * Malformed requests over every served operation, generated from the endpoint catalogue through
 * the served OpenAPI document (an operation added later is covered without new code). Every
 * answer is below 500, carries X-Request-Id, and every 4xx is the Error shape with that id and a
 * bounded message, within a few seconds. A valid-by-chance request may succeed.
 *
 * Fixed seed and bounded runs: FUZZ_SEED and FUZZ_RUNS (a multiplier) change them; FUZZ_VERBOSE=1
 * prints the count of answers by status.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const SCALE = Number(process.env.FUZZ_RUNS ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));
const BODY_LIMIT = 65_536;

/** encodeURIComponent, with lone surrogates (which it refuses) sent as a malformed escape instead. */
const encode = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80';
  }
};

describe('fuzz: malformed requests over every served operation', function () {
  this.timeout(120_000);
  let stack: Stack;
  let http: RawClient;
  let key: string;
  let doc: any;
  let ops: Operation[];
  let sent = 0;
  const statuses: Record<number, number> = {};

  before(async () => {
    stack = await startStack({
      // The request/reply pools answer the synchronous endpoints should a body be valid by chance.
      scheduler: false,
      env: {
        WORKER_POOLS: 'image,sheet,extract,speech',
        BODY_LIMIT_BYTES: String(BODY_LIMIT),
        RATE_LIMIT_MAX: '1000000',
        SHEET_RPC_TIMEOUT_MS: '5000',
        EXTRACT_RPC_TIMEOUT_MS: '5000',
        SPEECH_RPC_TIMEOUT_MS: '5000',
      },
    });
    key = (await stack.createAccount({ credits: 1_000_000 })).key;
    http = rawClient(stack.baseUrl);
    doc = (await http.send({ method: 'GET', path: '/openapi' })).body;
    ops = servedOperations(doc);
  });
  after(async () => {
    if (process.env.FUZZ_VERBOSE)
      console.log(`fuzz: ${sent} requests, seed ${SEED}, statuses ${JSON.stringify(statuses)}`);
    http?.close();
    await stack?.stop();
  });

  const auth = () => ({ authorization: `Bearer ${key}` });
  const json = { 'content-type': 'application/json' };

  /** Send, check the answer, count it. */
  const call = async (what: string, req: RawRequest): Promise<RawResponse> => {
    const res = await http.send(req);
    sent++;
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    expectSaneAnswer(res, `${req.method} ${req.path.slice(0, 120)} [${what}]`);
    return res;
  };

  /** fc.assert with the suite's seed, runs and no shrinking (each try is an HTTP call). */
  const check = <T>(arb: fc.Arbitrary<T>, n: number, body: (v: T) => Promise<void>) =>
    fc.assert(fc.asyncProperty(arb, body), { seed: SEED, numRuns: runs(n), endOnFailure: true });

  const withBody = () => ops.filter((o) => o.body);
  const bodyFor = (op: Operation) => example(doc, op.body!) as Record<string, unknown>;
  const properties = (op: Operation) => Object.entries((op.body?.properties ?? {}) as Record<string, Schema>);

  it('serves 18 operations and the fuzzer finds them all in the document', () => {
    expect(ops.map((o) => o.id)).to.include.members([
      'getAccount',
      'getJob',
      'createCodeBuild',
      'createResearch',
      'updateWebhook',
      'listWebhookDeliveries',
    ]);
    expect(ops.length).to.be.at.least(18);
  });

  it('when a path id is odd (../, %00, %ff, %, %C0%AF, 300 characters, non-ASCII), then 400 or 404 in the Error shape', async () => {
    const targets = [
      ...ops.filter((o) => o.pathParams.length),
      {
        id: 'assets',
        method: 'GET',
        path: '/assets/{id}/{name}',
        pathParams: ['id'],
        query: [],
        authenticated: false,
      } as Operation,
    ];
    const oddId = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...ODD_IDS) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).map(encode) },
      {
        weight: 1,
        arbitrary: fc.string({ unit: fc.constantFrom('a', '_', '-', '9'), minLength: 129, maxLength: 400 }),
      },
    );
    for (const op of targets) {
      await check(oddId, 24, async (id) => {
        const res = await call(`odd id ${op.id}`, {
          method: op.method,
          path: fillPath(op, id),
          headers: { ...auth(), ...(op.body ? json : {}) },
          body: op.body ? JSON.stringify(bodyFor(op)) : undefined,
        });
        expect([400, 404], `${op.id} ${id} → ${res.status} ${res.text}`).to.include(res.status);
      });
    }
  });

  it('when the body is not JSON, then 400 invalid_json (or 400 naming the body)', async () => {
    const broken = fc.oneof(
      fc.constantFrom(
        '{',
        '{"a":',
        '[1,]',
        'nul',
        "{'a':1}",
        '{"a":1}}',
        '\u0000',
        '{"a":"\\x"}',
        '"\ud800"',
        '{"a" 1}',
        '\ufeff{',
        '1e99999',
      ),
      fc.string({ maxLength: 60 }).filter((s) => {
        try {
          JSON.parse(s);
          return false;
        } catch {
          return true;
        }
      }),
    );
    for (const op of withBody()) {
      await check(broken, 12, async (text) => {
        const res = await call(`broken JSON ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body: text,
        });
        expect(res.status, res.text).to.equal(400);
      });
    }
  });

  it('when the body is not an object (array, number, string, null), then 400', async () => {
    for (const op of withBody()) {
      await check(fc.constantFrom('[]', '[{}]', '1', '"s"', 'null', 'true'), 6, async (text) => {
        const res = await call(`non-object ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body: text,
        });
        expect(res.status, res.text).to.equal(400);
      });
    }
  });

  it('when a field has the wrong type, then 400 validation_error naming it', async () => {
    for (const op of withBody()) {
      const props = properties(op);
      const arb = fc.constantFrom(...props).chain(([name, s]) => wrongType(typesOf(doc, s)).map((v) => ({ name, v })));
      await check(arb, 15, async ({ name, v }) => {
        const res = await call(`wrong type ${op.id}.${name}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body: JSON.stringify({ ...bodyFor(op), [name]: v }),
        });
        if (res.status === 400) expect(res.body.error.message, res.text).to.include(name);
      });
    }
  });

  it('when a string is huge (over its limit, or over the body limit), then 400 or 413', async () => {
    for (const op of withBody()) {
      const strings = properties(op).filter(([, s]) => typesOf(doc, s).has('string'));
      if (!strings.length) continue;
      const arb = fc.record({ prop: fc.constantFrom(...strings), size: fc.integer({ min: 1, max: BODY_LIMIT * 2 }) });
      await check(arb, 8, async ({ prop: [name, s], size }) => {
        const max = resolve(doc, s).maxLength as number | undefined;
        const length = Math.max(size, (max ?? 0) + 1);
        const res = await call(`huge ${op.id}.${name}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body: JSON.stringify({ ...bodyFor(op), [name]: 'y'.repeat(length) }),
        });
        if (max !== undefined || length > BODY_LIMIT) expect([400, 413], res.text).to.include(res.status);
      });
    }
  });

  it('when JSON nests deeper than 32 levels (up to thousands), then 400 before anything reads it', async () => {
    const arb = fc.record({
      levels: fc.integer({ min: 32, max: 5000 }),
      kind: fc.constantFrom('array' as const, 'object' as const),
      atRoot: fc.boolean(),
    });
    for (const op of withBody()) {
      const first = properties(op)[0]?.[0] ?? 'x';
      await check(arb, 8, async ({ levels, kind, atRoot }) => {
        // atRoot: the body itself is the nest; else one field holds it (one level more).
        const body = atRoot ? nestedJson(levels + 1, kind) : `{"${first}":${nestedJson(levels, kind)}}`;
        const res = await call(`nested ${levels} ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body,
        });
        expect(res.status, res.text).to.equal(400);
        expect(res.body.error.message, res.text).to.match(/nested deeper than 32 levels/);
      });
    }
  });

  it('when a body holds unknown fields, then 400 naming them where the document says additionalProperties: false; $, . and NUL names always 400', async () => {
    const keyArb = fc.oneof(
      fc.constantFrom(
        '$where',
        '$set',
        '$gt',
        'a.b',
        '.',
        'x\u0000y',
        '\u0000',
        '__proto__',
        'constructor',
        'prototype',
        'extra',
        'é',
        '日本',
      ),
      fc.string({ minLength: 1, maxLength: 30 }),
    );
    for (const op of withBody()) {
      const known = new Set(Object.keys(op.body!.properties ?? {}));
      const strict = op.body!.additionalProperties === false;
      const arb = fc.record({
        k: keyArb.filter((k) => !known.has(k)),
        v: fc.constantFrom('1', '"v"', '[]', '{"$ne":null}', '{"a.b":1}'),
      });
      await check(arb, 10, async ({ k, v }) => {
        const base = JSON.stringify(bodyFor(op));
        const body = `${base.slice(0, -1)}${base.length > 2 ? ',' : ''}${JSON.stringify(k)}:${v}}`;
        const res = await call(`unknown field ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body,
        });
        const unsafe = /^\$|[.\u0000]/.test(k) || v.includes('$') || v.includes('.');
        if (strict || unsafe) {
          expect(res.status, `${op.id} ${JSON.stringify(k)} → ${res.text}`).to.equal(400);
          expect(res.body.error.code).to.equal('validation_error');
        }
      });
    }
  });

  it('when a field name is 60 KB long, then the message quotes at most 64 characters of it', async () => {
    for (const op of withBody()) {
      const base = JSON.stringify(bodyFor(op));
      for (const k of ['k'.repeat(60_000), `$${'d'.repeat(60_000)}`]) {
        const body = `${base.slice(0, -1)}${base.length > 2 ? ',' : ''}${JSON.stringify(k)}:1}`;
        const res = await call(`long field name ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body,
        });
        if (res.status >= 400) {
          expect(res.body.error.message.length, res.text.slice(0, 200)).to.be.below(300);
          expect(res.body.error.message).not.to.match(/(k{65}|d{65})/);
        }
      }
    }
  });

  it('when any string field holds NUL, then 400 validation_error naming that field', async () => {
    for (const op of withBody()) {
      for (const [name, s] of properties(op)) {
        const types = typesOf(doc, s);
        const r = resolve(doc, s);
        const itemTypes = r.items ? typesOf(doc, r.items) : new Set<string>();
        let value: unknown;
        if (types.has('string')) value = 'a\u0000b';
        else if (types.has('array') && itemTypes.has('string')) value = ['a\u0000b'];
        else continue;
        const res = await call(`NUL in ${op.id}.${name}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body: JSON.stringify({ ...bodyFor(op), [name]: value }),
        });
        expect(res.status, `${op.id}.${name} → ${res.text}`).to.equal(400);
        expect(res.body.error.code).to.equal('validation_error');
        // The field, or the item of it (`tags.0:`), is named.
        expect(res.body.error.message, res.text).to.match(new RegExp(`(^|; )${name}(\\.\\d+)?:`));
      }
    }
  });

  it('when query values are bad (limit=-1, limit=abc, garbage cursor, junk parameters), then 4xx in the Error shape or a plain answer', async () => {
    const badValue = fc.oneof(
      fc.constantFrom(
        '-1',
        '0',
        'abc',
        '1e999',
        '101',
        '1.5',
        '',
        '%00',
        '%ff',
        '%',
        'NaN',
        '0x10',
        '%205',
        '9'.repeat(400),
      ),
      fc.string({ unit: 'binary', maxLength: 60 }).map(encode),
      fc.constant(Buffer.from(JSON.stringify([Date.now(), 'whd_\u0000'])).toString('base64url')),
      fc.constant(Buffer.from(JSON.stringify([1, { $gt: '' }])).toString('base64url')),
    );
    for (const op of ops.filter((o) => o.method === 'GET')) {
      const names = [...op.query.map((q) => q.name), 'junk', 'limit[]', '__proto__', '$where'];
      const arb = fc.array(fc.tuple(fc.constantFrom(...names), badValue), { minLength: 1, maxLength: 3 });
      await check(arb, op.query.length ? 30 : 4, async (pairs) => {
        const qs = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&');
        await call(`query ${op.id}`, { method: 'GET', path: `${fillPath(op)}?${qs}`, headers: auth() });
      });
    }
  });

  it('when the Authorization header is bad, then 401 (431 over the header limit) in the Error shape', async () => {
    const authArb = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...BAD_AUTHORIZATION) },
      {
        weight: 1,
        arbitrary: fc
          .string({
            unit: fc
              .integer({ min: 0x20, max: 0xff })
              .filter((c) => c !== 0x7f)
              .map((c) => String.fromCharCode(c)),
            maxLength: 80,
          })
          .map((s) => `Bearer ${s}`),
      },
    );
    for (const op of ops.filter((o) => o.authenticated)) {
      await check(authArb, 8, async (authorization) => {
        const res = await call(`bad auth ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { authorization, ...(op.body ? json : {}) },
          body: op.body ? JSON.stringify(bodyFor(op)) : undefined,
        });
        expect([401, 431], `${JSON.stringify(authorization.slice(0, 40))} → ${res.text}`).to.include(res.status);
      });
    }
  });

  it('when the Content-Encoding does not match the body, then 400 or 415 on every body endpoint', async () => {
    for (const op of withBody()) {
      await check(fc.constantFrom(...BAD_CONTENT_ENCODINGS), 8, async (encoding) => {
        const res = await call(`content-encoding ${encoding} ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json, 'content-encoding': encoding },
          body: JSON.stringify(bodyFor(op)),
        });
        expect([400, 415], res.text).to.include(res.status);
      });
      // Real gzip of something bad: the same rules as plain bodies.
      const deep = await call(`gzip of deep JSON ${op.id}`, {
        method: op.method,
        path: fillPath(op),
        headers: { ...auth(), ...json, 'content-encoding': 'gzip' },
        body: gzipSync(nestedJson(20_000, 'array')),
      });
      expect(deep.status, deep.text).to.equal(400);
      const bomb = await call(`gzip bomb ${op.id}`, {
        method: op.method,
        path: fillPath(op),
        headers: { ...auth(), ...json, 'content-encoding': 'gzip' },
        body: gzipSync(Buffer.alloc(BODY_LIMIT * 64, 0x20)),
      });
      expect(bomb.status, bomb.text).to.equal(413);
    }
  });

  it('when the Content-Type is not UTF-8 JSON, then 415', async () => {
    for (const op of withBody()) {
      await check(fc.constantFrom(...BAD_CONTENT_TYPES), 4, async (type) => {
        const res = await call(`content-type ${type} ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), 'content-type': type },
          body: JSON.stringify(bodyFor(op)),
        });
        expect(res.status, res.text).to.equal(415);
      });
    }
  });

  it('when the body is larger than BODY_LIMIT_BYTES, then 413', async () => {
    for (const op of withBody()) {
      await check(fc.integer({ min: BODY_LIMIT + 1, max: BODY_LIMIT * 3 }), 3, async (size) => {
        const body = JSON.stringify({ ...bodyFor(op), pad: 'p'.repeat(size) });
        const res = await call(`oversize ${op.id}`, {
          method: op.method,
          path: fillPath(op),
          headers: { ...auth(), ...json },
          body,
        });
        expect(res.status, res.text.slice(0, 200)).to.equal(413);
      });
    }
  });

  it('afterwards, the service still answers GET /account', async () => {
    const res = await call('after the fuzz', { method: 'GET', path: '/account', headers: auth() });
    expect(res.status).to.equal(200);
    expect(sent, 'requests sent by the fuzz suite').to.be.above(900);
  });
});
