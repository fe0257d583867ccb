import { expect } from 'chai';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/** Every GET of the catalogue whose answer is a list (`data`: the list envelope, and the search hits). */
const lists = (Object.entries(endpoints) as [string, Endpoint][]).filter(([, ep]) => {
  const shape = (ep.response as { shape?: Record<string, unknown> } | undefined)?.shape;
  return ep.method === 'get' && !!shape && 'data' in shape;
});

/**
 * One rule for `limit` on every list (SPEC 4 rule 2): an integer from 1 to the list's maximum,
 * anything else 400 validation_error naming `limit`, on lists that page and on lists small
 * enough to answer whole alike. The routes come from the catalogue, so a new list is covered.
 */
describe('lists: one rule for limit on every list of the catalogue', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: ReturnType<typeof client>;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    api = client(stack.baseUrl, (await stack.createAccount()).key);
  });
  after(() => stack.stop());

  it('when the catalogue is read, then every list takes limit in its query', () => {
    expect(lists.length).to.be.at.least(19);
    const without = lists
      .filter(([, ep]) => !('limit' in ((ep.query as { shape?: object } | undefined)?.shape ?? {})))
      .map(([id]) => id);
    expect(without).to.deep.equal([]);
  });

  it('when a list is asked for limit -1, abc, 0 or 101, then 400 validation_error naming limit', async () => {
    const wrong: string[] = [];
    for (const [id, ep] of lists) {
      // A well-formed id that names nothing: the query is checked before any lookup.
      const path = ep.path.replace(/\{[^}]+\}/g, 'x_00000000000000000000');
      const sep = path.includes('?') ? '&' : '?';
      // GET /drive/search needs its q.
      const extra = id === 'searchDrive' ? 'q=report&' : '';
      for (const limit of ['-1', 'abc', '0', '101']) {
        const r = await api.get(`${path}${sep}${extra}limit=${limit}`);
        if (r.status !== 400 || r.body?.error?.code !== 'validation_error' || !/^limit: /.test(r.body.error.message)) {
          wrong.push(`GET ${path} limit=${limit} → ${r.status} ${r.text.slice(0, 120)}`);
        }
      }
    }
    expect(wrong).to.deep.equal([]);
  });

  it('when a whole list (the folder tree) is asked for a page, then limit items come with a cursor that pages on in order', async () => {
    const names = ['a', 'b', 'c'];
    for (const name of names) expect((await api.post('/drive/folders', { name })).status).to.equal(201);
    const whole = await api.get('/drive/folders');
    expect(whole.status).to.equal(200);
    expect(whole.body.data.map((f: { name: string }) => f.name)).to.deep.equal(names);
    expect(whole.body).to.not.have.property('cursor');

    const first = await api.get('/drive/folders?limit=2');
    expect(first.body.data.map((f: { name: string }) => f.name)).to.deep.equal(['a', 'b']);
    expect(first.body.total).to.equal(3);
    expect(first.body.cursor).to.be.a('string');
    const second = await api.get(`/drive/folders?limit=2&cursor=${encodeURIComponent(first.body.cursor)}`);
    expect(second.body.data.map((f: { name: string }) => f.name)).to.deep.equal(['c']);
    expect(second.body).to.not.have.property('cursor');

    const webhooks = await api.get('/webhooks?limit=5');
    expect(webhooks.status).to.equal(200);
    expect(webhooks.body).to.deep.equal({ data: [], total: 0 });
    const foreign = await api.get(`/webhooks?cursor=${encodeURIComponent(first.body.cursor)}`);
    expect(foreign.status).to.equal(400);
    expect(foreign.body.error.message).to.match(/^cursor: /);
  });
});
