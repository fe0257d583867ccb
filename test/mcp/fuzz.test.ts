import { expect } from 'chai';
import fc from 'fast-check';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { rawPost } from './helpers';

const TOOL_NAMES = [
  'create_notes',
  'create_flowchart',
  'get_job',
  'get_project',
  'list_projects',
  'start_song',
  'generate_image',
  'drive_search',
  'nope',
];

/** JSON-RPC-shaped bodies with random members: the methods a client sends, and nonsense. */
const rpcBody = fc.record(
  {
    jsonrpc: fc.oneof(fc.constant('2.0'), fc.string({ maxLength: 4 }), fc.integer()),
    id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null), fc.object({ maxDepth: 1 })),
    method: fc.oneof(
      fc.constantFrom('initialize', 'tools/list', 'tools/call', 'ping', 'notifications/initialized', 'resources/list'),
      fc.string({ maxLength: 12 }),
    ),
    params: fc.oneof(
      fc.record(
        {
          name: fc.oneof(fc.constantFrom(...TOOL_NAMES), fc.string({ maxLength: 8 })),
          arguments: fc.oneof(fc.object({ maxDepth: 2, maxKeys: 4 }), fc.jsonValue({ maxDepth: 2 })),
        },
        { requiredKeys: [] },
      ),
      fc.record(
        {
          protocolVersion: fc.constantFrom('2025-06-18', 'x'),
          capabilities: fc.object({ maxDepth: 1 }),
          clientInfo: fc.record({ name: fc.string(), version: fc.string() }),
        },
        { requiredKeys: [] },
      ),
      fc.jsonValue({ maxDepth: 2 }),
    ),
  },
  { requiredKeys: [] },
);

/** Bodies that are not one JSON-RPC object: arrays, scalars, broken JSON. */
const oddBody = fc.oneof(
  fc.array(rpcBody, { maxLength: 3 }).map((a) => JSON.stringify(a)),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 40 }),
);

describe('MCP server: random JSON-RPC bodies', () => {
  let stack: Stack;
  let key: string;
  before(async () => {
    // No workers: a random start_song may be accepted, and rendering it is not the subject here.
    stack = await startStack({ workers: false, scheduler: false, env: { RATE_LIMIT_MAX: '100000' } });
    ({ key } = await stack.createAccount({ credits: 100_000 }));
  });
  after(() => stack.stop());

  it('when random JSON-RPC bodies are posted, then never a 5xx, and every answer is one JSON-RPC object (a result or an error with a numeric code; a batch a 400)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 3, arbitrary: rpcBody.map((b) => JSON.stringify(b)) }, { weight: 1, arbitrary: oddBody }),
        async (body) => {
          const r = await rawPost(stack, body, { authorization: `Bearer ${key}` });
          expect(r.status, `${body} → ${r.text}`).to.be.below(500);
          if (r.status === 202) return; // a notification or response: accepted, no body
          const a = r.json;
          expect(a, r.text).to.include({ jsonrpc: '2.0' });
          if ('error' in a) expect(a.error.code, r.text).to.be.a('number');
          else expect(a, r.text).to.have.property('result');
          // A batch is refused whole: Invalid Request, or the body rules' own 400 when they refuse it first.
          if (body.startsWith('[')) expect(r.status, `a batch: ${r.text}`).to.equal(400);
        },
      ),
      { numRuns: 150 },
    );
  });
});
