import { expect } from 'chai';
import { SCOPES, type Scope } from '../../contracts/registry';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { example, fillPath, servedOperations } from '../fuzz/operations';

/**
 * Every served operation with a key that holds every scope but the ones the operation accepts:
 * 403 forbidden, before anything else is looked at. The scope each endpoint needs comes from the
 * catalogue; the workspace rule is checked on the catalogue itself.
 */
describe('scopes: every served operation refuses a key without its scope', function () {
  this.timeout(60_000);
  let stack: Stack;
  let doc: any;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    doc = (await client(stack.baseUrl).get('/openapi')).body;
  });
  after(() => stack.stop());

  it('when the workspace endpoints are read from the catalogue, then GETs need read, AI calls need ai, and every other call needs write', () => {
    const workspaceTags = new Set(['projects', 'sheets', 'boards', 'chat']);
    const ai = new Set(['editSheet', 'extractFlowchart', 'chat']);
    const wrong: string[] = [];
    for (const [id, ep] of Object.entries(endpoints) as [string, Endpoint][]) {
      if (!workspaceTags.has(ep.tag) && id !== 'extractFlowchart') continue;
      const want: Scope[] = ai.has(id) ? ['ai'] : ep.method === 'get' ? ['read'] : ['write'];
      if (JSON.stringify([...ep.scopes]) !== JSON.stringify(want))
        wrong.push(`${id}: ${ep.scopes.join('|')} (want ${want.join('|')})`);
    }
    expect(wrong).to.deep.equal([]);
  });

  it('when a key lacks every scope an operation accepts, then each served operation answers 403 forbidden naming the scope', async () => {
    const ops = servedOperations(doc).filter((o) => o.authenticated);
    expect(ops.length).to.be.at.least(17);
    const keys = new Map<string, string>();
    const keyWithout = async (needed: readonly string[]) => {
      const scopes = SCOPES.filter((s) => !needed.includes(s));
      const name = scopes.join(',');
      if (!keys.has(name)) keys.set(name, (await stack.createAccount({ scopes })).key);
      return keys.get(name)!;
    };
    const refused: string[] = [];
    for (const op of ops) {
      const ep = endpoints[op.id as keyof typeof endpoints] as Endpoint | undefined;
      expect(ep, `${op.id} is in the catalogue`).to.not.equal(undefined);
      const api = client(stack.baseUrl, await keyWithout(ep!.scopes));
      const r = await api.call(op.method, fillPath(op), op.body ? example(doc, op.body) : undefined);
      if (
        r.status !== 403 ||
        r.body?.error?.code !== 'forbidden' ||
        !String(r.body.error.message).includes(`needs ${ep!.scopes.join(' or ')}`)
      ) {
        refused.push(`${op.method} ${op.path} → ${r.status} ${r.text.slice(0, 120)}`);
      }
    }
    expect(refused).to.deep.equal([]);
  });
});
