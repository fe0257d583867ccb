import { expect } from 'chai';
import { createProjectsService } from '../../platform/projects/projects.service';
import { PROJECT_LIMITS } from '../../contracts/projects';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { allPages, expect400, flowchartBody, make, whiteboardBody } from './helpers';

describe('projects API', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  const projectsCol = () => stack.db.db.collection<any>(COLLECTIONS.projects);
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    ({ accountId } = await stack.createAccount().then(async (a) => {
      api = client(stack.baseUrl, a.key);
      return a;
    }));
  });
  after(() => stack?.stop());

  describe('creation', () => {
    it('when a flowchart is posted without positions, then 201 answers the project with nodes laid out top to bottom, edge ids, and an absolute /editor link', async () => {
      const r = await api.post('/flowcharts', flowchartBody());
      expect(r.status, r.text).to.equal(201);
      const p = r.body;
      expect(p.id).to.match(/^prj_[a-z0-9]{20}$/);
      expect(p).to.include({
        name: 'Deploy',
        description: 'How we ship',
        kind: 'flowchart',
        projectType: 'chart',
        isStarred: false,
        version: 1,
      });
      expect(p.tags).to.deep.equal(['eng']);
      expect(p.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/editor/${p.id}`);
      expect(r.headers.get('etag')).to.equal('"1"');
      expect(p.shares).to.deep.equal([]);
      const y = Object.fromEntries(p.content.nodes.map((n: any) => [n.id, n.y]));
      expect(y.start).to.be.below(y.build);
      expect(y.build).to.be.below(y.ok);
      expect(y.ok).to.be.below(y.ship);
      expect(y.ok).to.be.below(y.fix);
      expect(y.ship).to.be.below(y.end);
      const ship = p.content.nodes.find((n: any) => n.id === 'ship');
      const fix = p.content.nodes.find((n: any) => n.id === 'fix');
      expect(ship.y).to.equal(fix.y);
      expect(ship.x).to.not.equal(fix.x); // side by side on one layer
      expect(p.content.edges.map((e: any) => e.id)).to.deep.equal(['e1', 'e2', 'e3', 'e4', 'e5', 'e6']);
      expect(p.content.nodes[1]).to.include({ shape: 'process' });

      const stored = await projectsCol().findOne({ _id: p.id });
      expect(stored).to.include({ accountId, kind: 'flowchart', projectType: 'chart', version: 1, deletedAt: null });
      expect(stored.content).to.deep.equal(p.content);
    });

    it('when nodes carry positions and edges ids, then they are kept as sent', async () => {
      const p = await make(api, '/flowcharts', {
        name: 'Placed',
        nodes: [
          { id: 'a', label: 'A', x: 5, y: 7 },
          { id: 'b', label: 'B', x: 300, y: 7 },
        ],
        edges: [
          { id: 'ab', from: 'a', to: 'b' },
          { from: 'b', to: 'a' },
        ],
      });
      expect(p.content.nodes.map((n: any) => [n.x, n.y])).to.deep.equal([
        [5, 7],
        [300, 7],
      ]);
      expect(p.content.edges.map((e: any) => e.id)).to.deep.equal(['ab', 'e1']);
    });

    it('when a whiteboard is posted, then elements get their sizes and full styles and the connector its box between the two centres', async () => {
      const p = await make(api, '/whiteboards', whiteboardBody());
      expect(p).to.include({ kind: 'whiteboard', projectType: 'chart' });
      expect(p.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/editor/${p.id}`);
      const [a, b, img, c] = p.content.elements;
      expect(p.content.background).to.equal('#ffffff');
      expect(a).to.include({ width: 160, height: 80, rotation: 0, shape: 'rectangle' });
      expect(a.style).to.deep.equal({
        fill: '#ffffff',
        stroke: '#1f2937',
        strokeWidth: 2,
        strokeStyle: 'solid',
        opacity: 1,
        textColor: '#111827',
        fontSize: 16,
        fontWeight: 'normal',
        textAlign: 'center',
      });
      expect(b.style).to.include({ fontSize: 20, fill: 'transparent', textAlign: 'left' });
      expect(img).to.include({ url: 'https://example.com/cat.png', alt: 'a cat' });
      // a's centre (80, 40), b's centre (450, 220)
      expect(c).to.include({
        type: 'connector',
        from: 'a',
        to: 'b',
        arrow: 'end',
        x: 80,
        y: 40,
        width: 370,
        height: 180,
      });
    });

    it('when notes are posted, then 201 answers Markdown content and a /notes link', async () => {
      const p = await make(api, '/notes', { name: 'Ideas', markdown: '# Ideas\n\n- one\n- two' });
      expect(p).to.include({ kind: 'notes', projectType: 'notes' });
      expect(p.openUrl).to.equal(`${stack.config.PUBLIC_BASE_URL}/notes/${p.id}`);
      expect(p.content).to.deep.equal({ markdown: '# Ideas\n\n- one\n- two' });
      const empty = await make(api, '/notes', { name: 'Empty', tags: ['x', 'x', 'y'] });
      expect(empty.content).to.deep.equal({ markdown: '' });
      expect(empty.tags).to.deep.equal(['x', 'y']); // duplicates dropped
    });

    it('when a create is retried with the same Idempotency-Key, then the same project answers and only one is stored', async () => {
      const { key } = await stack.createAccount();
      const other = client(stack.baseUrl, key);
      const h = { 'idempotency-key': 'notes-once-1' };
      const a = await other.post('/notes', { name: 'Once' }, h);
      const b = await other.post('/notes', { name: 'Once' }, h);
      expect(a.status).to.equal(201);
      expect(b.status).to.equal(201);
      expect(b.body.id).to.equal(a.body.id);
      expect(b.headers.get('idempotent-replayed')).to.equal('true');
      expect((await other.get('/projects')).body.total).to.equal(1);
    });

    const bad: [string, '/flowcharts' | '/whiteboards' | '/notes', Record<string, unknown>, string][] = [
      ['name is missing', '/notes', { markdown: 'x' }, 'name: is required'],
      ['name is blank', '/notes', { name: '   ' }, 'name: must not be empty'],
      ['name is longer than 255', '/notes', { name: 'n'.repeat(256) }, 'name: must be at most 255'],
      ['name holds a newline', '/notes', { name: 'a\nb' }, 'name: must not contain control characters'],
      ['description is longer than 2000', '/notes', { name: 'x', description: 'd'.repeat(2001) }, 'description'],
      [
        'there are 21 tags',
        '/notes',
        { name: 'x', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) },
        'tags: must have at most 20 tags',
      ],
      ['a tag is longer than 64', '/notes', { name: 'x', tags: ['t'.repeat(65)] }, 'tags.0'],
      ['an unknown field is sent', '/notes', { name: 'x', bogus: 1 }, 'bogus: unknown field'],
      [
        'Markdown is over the limit',
        '/notes',
        { name: 'x', markdown: 'm'.repeat(PROJECT_LIMITS.notesMax + 1) },
        'markdown: must be at most 200000',
      ],
      ['Markdown holds NUL', '/notes', { name: 'x', markdown: 'a\u0000b' }, 'markdown: must not contain NUL'],
      [
        'an edge names a missing node',
        '/flowcharts',
        flowchartBody({ edges: [{ from: 'nowhere', to: 'build' }] }),
        'edges.0.from: names no node ("nowhere")',
      ],
      [
        'an edge ends at a missing node',
        '/flowcharts',
        flowchartBody({
          edges: [
            { from: 'start', to: 'build' },
            { from: 'build', to: 'gone' },
          ],
        }),
        'edges.1.to',
      ],
      [
        'two nodes share an id',
        '/flowcharts',
        {
          name: 'x',
          nodes: [
            { id: 'a', label: 'A' },
            { id: 'a', label: 'B' },
          ],
        },
        'nodes.1.id: duplicate node id',
      ],
      [
        'two edges share an id',
        '/flowcharts',
        {
          name: 'x',
          nodes: [{ id: 'a', label: 'A' }],
          edges: [
            { id: 'e', from: 'a', to: 'a' },
            { id: 'e', from: 'a', to: 'a' },
          ],
        },
        'edges.1.id: duplicate edge id',
      ],
      [
        'a node shape is unknown',
        '/flowcharts',
        { name: 'x', nodes: [{ id: 'a', label: 'A', shape: 'star' }] },
        'nodes.0.shape: must be one of',
      ],
      ['a node id has a space', '/flowcharts', { name: 'x', nodes: [{ id: 'a b', label: 'A' }] }, 'nodes.0.id'],
      ['nodes are missing', '/flowcharts', { name: 'x' }, 'nodes: is required'],
      [
        'there are 501 nodes',
        '/flowcharts',
        { name: 'x', nodes: Array.from({ length: 501 }, (_, i) => ({ id: `n${i}`, label: 'n' })) },
        'nodes: must have at most 500 nodes',
      ],
      [
        'a connector names a missing element',
        '/whiteboards',
        whiteboardBody({
          elements: [
            { id: 'a', type: 'shape', x: 0, y: 0 },
            { id: 'c', type: 'connector', from: 'a', to: 'zz' },
          ],
        }),
        'elements.1.to: names no element ("zz")',
      ],
      [
        'a connector joins a connector',
        '/whiteboards',
        whiteboardBody({
          elements: [
            { id: 'a', type: 'shape', x: 0, y: 0 },
            { id: 'b', type: 'shape', x: 9, y: 9 },
            { id: 'c', type: 'connector', from: 'a', to: 'b' },
            { id: 'd', type: 'connector', from: 'c', to: 'a' },
          ],
        }),
        'elements.3.from: names a connector',
      ],
      [
        'a connector joins an element to itself',
        '/whiteboards',
        whiteboardBody({
          elements: [
            { id: 'a', type: 'shape', x: 0, y: 0 },
            { id: 'c', type: 'connector', from: 'a', to: 'a' },
          ],
        }),
        'elements.1.to: must name another element',
      ],
      [
        'two elements share an id',
        '/whiteboards',
        whiteboardBody({
          elements: [
            { id: 'a', type: 'shape', x: 0, y: 0 },
            { id: 'a', type: 'text', text: 't', x: 0, y: 0 },
          ],
        }),
        'elements.1.id: duplicate element id',
      ],
      [
        'an element type is unknown',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'video', x: 0, y: 0 }] }),
        'elements.0.type: must be one of shape, text, image, connector',
      ],
      [
        'an image URL is not http(s)',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'image', url: 'javascript:alert(1)', x: 0, y: 0 }] }),
        'elements.0.url: must be an absolute http(s) URL',
      ],
      [
        'an element has no position',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'shape' }] }),
        'elements.0.x: is required',
      ],
      [
        'an element size is zero',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'shape', x: 0, y: 0, width: 0 }] }),
        'elements.0.width: must be between 1 and 100000',
      ],
      [
        'a colour is not a colour',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'shape', x: 0, y: 0, style: { fill: 'red;x' } }] }),
        'elements.0.style.fill',
      ],
      [
        'a style field is unknown',
        '/whiteboards',
        whiteboardBody({ elements: [{ id: 'a', type: 'shape', x: 0, y: 0, style: { glow: 1 } }] }),
        'glow: unknown field',
      ],
      [
        'there are 1001 elements',
        '/whiteboards',
        whiteboardBody({
          elements: Array.from({ length: 1001 }, (_, i) => ({ id: `e${i}`, type: 'text', text: '', x: 0, y: 0 })),
        }),
        'elements: must have at most 1000',
      ],
    ];
    for (const [what, path, body, message] of bad) {
      it(`when ${what} (POST ${path}), then 400 names the field and nothing is stored`, async () => {
        const before = await projectsCol().countDocuments({ accountId });
        const r = await api.post(path, body);
        expect400(r, message);
        expect(await projectsCol().countDocuments({ accountId })).to.equal(before);
      });
    }
  });

  describe('reading and listing', () => {
    let reader: Client;
    let ids: Record<string, string>;
    before(async () => {
      const a = await stack.createAccount();
      reader = client(stack.baseUrl, a.key);
      const f = await make(reader, '/flowcharts', flowchartBody({ name: 'Alpha flow', tags: ['red', 'blue'] }));
      const w = await make(reader, '/whiteboards', whiteboardBody({ name: 'Beta (board) a.c', tags: ['blue'] }));
      const n = await make(reader, '/notes', { name: 'gamma NOTES abc', markdown: '# G' });
      ids = { f: f.id, w: w.id, n: n.id };
      expect((await reader.patch(`/projects/${n.id}`, { isStarred: true })).status).to.equal(200);
    });

    it('when a project is read, then it has its content and shares; in the list it has neither', async () => {
      const one = await reader.get(`/projects/${ids.f}`);
      expect(one.status).to.equal(200);
      expect(one.body.content.nodes).to.have.length(6);
      expect(one.body.shares).to.deep.equal([]);
      expect(one.headers.get('etag')).to.equal('"1"');
      const list = await reader.get('/projects');
      expect(list.status).to.equal(200);
      expect(list.body.total).to.equal(3);
      expect(list.body).to.not.have.property('cursor'); // SPEC 2.3: present only when more pages exist
      for (const item of list.body.data) {
        expect(item).to.not.have.property('content');
        expect(item).to.not.have.property('shares');
        expect(Object.keys(item).sort()).to.deep.equal([
          'createdAt',
          'description',
          'id',
          'isStarred',
          'kind',
          'name',
          'openUrl',
          'projectType',
          'tags',
          'updatedAt',
          'version',
        ]);
      }
      // newest change first: the notes were starred last
      expect(list.body.data.map((p: any) => p.id)).to.deep.equal([ids.n, ids.w, ids.f]);
    });

    const cases: [string, string, string[]][] = [
      ['projectType=chart', '&projectType=chart', ['f', 'w']],
      ['projectType=notes', '&projectType=notes', ['n']],
      ['kind=whiteboard', '&kind=whiteboard', ['w']],
      ['kind=flowchart&projectType=chart', '&kind=flowchart&projectType=chart', ['f']],
      ['kind=notes&projectType=chart (no kind of that type)', '&kind=notes&projectType=chart', []],
      ['tag=blue', '&tag=blue', ['f', 'w']],
      ['tag=red', '&tag=red', ['f']],
      ['tag=Blue (tags are exact)', '&tag=Blue', []],
      ['q=ALPHA (any case)', '&q=ALPHA', ['f']],
      ['q=notes', '&q=notes', ['n']],
      ['q=a.c (a literal dot, not a pattern)', '&q=a.c', ['w']],
      ['q=(board) (brackets are literal)', `&q=${encodeURIComponent('(board)')}`, ['w']],
      ['q=.* (no pattern)', `&q=${encodeURIComponent('.*')}`, []],
      ['q blank (ignored)', '&q=%20', ['f', 'w', 'n']],
      ['starred=true', '&starred=true', ['n']],
      ['starred=false', '&starred=false', ['f', 'w']],
      ['kind=presentation', '&kind=presentation', []],
    ];
    for (const [what, query, expected] of cases) {
      it(`when the list is filtered by ${what}, then it holds exactly the matching projects and total counts them`, async () => {
        const r = await reader.get(`/projects?limit=100${query}`);
        expect(r.status, r.text).to.equal(200);
        expect(r.body.data.map((p: any) => p.id).sort()).to.deep.equal(expected.map((k) => ids[k]).sort());
        expect(r.body.total).to.equal(expected.length);
      });
    }

    it('when sort and order are given, then the list follows them', async () => {
      const byName = await reader.get('/projects?sort=name');
      expect(byName.body.data.map((p: any) => p.name)).to.deep.equal([
        'Alpha flow',
        'Beta (board) a.c',
        'gamma NOTES abc',
      ]);
      const byNameDesc = await reader.get('/projects?sort=name&order=desc');
      expect(byNameDesc.body.data.map((p: any) => p.name)).to.deep.equal([
        'gamma NOTES abc',
        'Beta (board) a.c',
        'Alpha flow',
      ]);
      const created = await reader.get('/projects?sort=createdAt&order=asc');
      expect(created.body.data.map((p: any) => p.id)).to.deep.equal([ids.f, ids.w, ids.n]);
    });

    const invalid: [string, string, string][] = [
      ['limit over 100', 'limit=101', 'limit: must be between 1 and 100'],
      ['limit 0', 'limit=0', 'limit'],
      ['limit not a number', 'limit=ten', 'limit'],
      ['a bad cursor', 'cursor=bm9wZQ', 'cursor: is not a cursor'],
      ['an unknown projectType', 'projectType=deck', 'projectType: must be one of'],
      ['an unknown kind', 'kind=video', 'kind: must be one of'],
      ['q longer than 100', `q=${'q'.repeat(101)}`, 'q: must be at most 100'],
      ['starred not a boolean', 'starred=yes', 'starred: must be true or false'],
      ['an unknown sort', 'sort=size', 'sort: must be one of'],
      ['an unknown order', 'order=up', 'order: must be desc or asc'],
    ];
    for (const [what, query, message] of invalid) {
      it(`when the list query has ${what}, then 400 names the parameter`, async () => {
        expect400(await reader.get(`/projects?${query}`), message);
      });
    }

    it('when a cursor of one sort is sent with another, then 400 (not a wrong page)', async () => {
      const first = await reader.get('/projects?limit=1');
      expect(first.body.cursor).to.be.a('string');
      expect400(
        await reader.get(`/projects?limit=1&sort=name&cursor=${encodeURIComponent(first.body.cursor)}`),
        'cursor',
      );
      expect400(
        await reader.get(`/projects?limit=1&order=asc&cursor=${encodeURIComponent(first.body.cursor)}`),
        'cursor',
      );
      expect400(await reader.get(`/templates?cursor=${encodeURIComponent(first.body.cursor)}`), 'cursor');
    });

    it('when unknown or malformed ids are read, then 404 and 400', async () => {
      expect((await reader.get('/projects/prj_aaaaaaaaaaaaaaaaaaaa')).status).to.equal(404);
      expect400(await reader.get('/projects/a.b'), 'id: must be 1 to 128');
    });
  });

  describe('keyset paging', () => {
    it('when projects are added and deleted between pages, then no project is skipped or repeated', async () => {
      const { key } = await stack.createAccount();
      const pager = client(stack.baseUrl, key);
      const made: string[] = [];
      for (let i = 0; i < 12; i++)
        made.push((await make(pager, '/notes', { name: `n${String(i).padStart(2, '0')}` })).id);
      const seen: string[] = [];
      const deleted = new Set<string>();
      let cursor: string | undefined;
      let page = 0;
      do {
        const r = await pager.get(`/projects?limit=4${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(r.status, r.text).to.equal(200);
        seen.push(...r.body.data.map((p: any) => p.id));
        cursor = r.body.cursor ?? undefined;
        page++;
        if (page === 1) {
          // Between pages: two new projects (newer than every page still to come), one deletion
          // among the pages still to read and one among those read.
          await make(pager, '/notes', { name: 'late 1' });
          await make(pager, '/notes', { name: 'late 2' });
          const unseen = made.find((id) => !seen.includes(id))!;
          expect((await pager.delete(`/projects/${unseen}`)).status).to.equal(204);
          expect((await pager.delete(`/projects/${seen[0]}`)).status).to.equal(204);
          deleted.add(unseen);
        }
      } while (cursor);
      expect(new Set(seen).size).to.equal(seen.length); // nothing repeated
      expect(seen.sort()).to.deep.equal(made.filter((id) => !deleted.has(id)).sort()); // nothing skipped
      expect(page).to.equal(3);
    });
  });

  describe('PATCH', () => {
    it('when only the name is sent, then only the name changes, the version goes up and the ETag follows', async () => {
      const p = await make(api, '/flowcharts', flowchartBody({ name: 'Before' }));
      const r = await api.patch(`/projects/${p.id}`, { name: 'After' });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ name: 'After', description: p.description, version: 2, isStarred: false });
      expect(r.body.tags).to.deep.equal(p.tags);
      expect(r.body.content).to.deep.equal(p.content);
      expect(r.headers.get('etag')).to.equal('"2"');
      expect(new Date(r.body.updatedAt).getTime()).to.be.at.least(new Date(p.updatedAt).getTime());
      expect(r.body.createdAt).to.equal(p.createdAt);
      const stored = await projectsCol().findOne({ _id: p.id });
      expect(stored).to.include({ name: 'After', version: 2 });
    });

    it('when description, tags, isStarred and content are sent, then each is replaced, content validated and completed for the kind', async () => {
      const p = await make(api, '/flowcharts', flowchartBody());
      const r = await api.patch(`/projects/${p.id}`, {
        description: '',
        tags: ['a', 'b', 'a'],
        isStarred: true,
        content: {
          nodes: [
            { id: 'x', label: 'X' },
            { id: 'y', label: 'Y' },
          ],
          edges: [{ from: 'x', to: 'y' }],
        },
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ description: '', isStarred: true, version: 2 });
      expect(r.body.tags).to.deep.equal(['a', 'b']);
      expect(r.body.content.nodes.map((n: any) => n.id)).to.deep.equal(['x', 'y']);
      expect(r.body.content.nodes[0].y).to.be.below(r.body.content.nodes[1].y);
      expect(r.body.content.edges[0].id).to.equal('e1');

      const w = await make(api, '/whiteboards', whiteboardBody());
      const wr = await api.patch(`/projects/${w.id}`, {
        content: { elements: [{ id: 's', type: 'shape', shape: 'sticky', x: 0, y: 0 }] },
      });
      expect(wr.status, wr.text).to.equal(200);
      expect(wr.body.content.elements[0]).to.include({ width: 160, height: 160 });
      expect(wr.body.content.background).to.equal('#ffffff');

      const n = await make(api, '/notes', { name: 'n' });
      const nr = await api.patch(`/projects/${n.id}`, { content: { markdown: '# new' } });
      expect(nr.body.content).to.deep.equal({ markdown: '# new' });
    });

    it('when content breaks its kind rules, then 400 names the field under content and nothing changes', async () => {
      const p = await make(api, '/flowcharts', flowchartBody());
      expect400(
        await api.patch(`/projects/${p.id}`, {
          content: { nodes: [{ id: 'a', label: 'A' }], edges: [{ from: 'b', to: 'a' }] },
        }),
        'content.edges.0.from: names no node',
      );
      expect400(await api.patch(`/projects/${p.id}`, { content: { markdown: 'x' } }), 'content.nodes: is required');
      expect400(await api.patch(`/projects/${p.id}`, { content: 'text' }), 'content: must be an object');
      const w = await make(api, '/whiteboards', whiteboardBody());
      expect400(
        await api.patch(`/projects/${w.id}`, {
          content: { elements: [{ id: 'c', type: 'connector', from: 'a', to: 'b' }] },
        }),
        'content.elements.0.from',
      );
      const n = await make(api, '/notes', { name: 'n' });
      expect400(
        await api.patch(`/projects/${n.id}`, { content: { markdown: 'm'.repeat(PROJECT_LIMITS.notesMax + 1) } }),
        'content.markdown',
      );
      expect((await projectsCol().findOne({ _id: p.id })).version).to.equal(1);
      expect((await projectsCol().findOne({ _id: n.id })).version).to.equal(1);
    });

    it('when the body names nothing, an unknown field, or bad values, then 400 names them', async () => {
      const p = await make(api, '/notes', { name: 'n' });
      expect400(await api.patch(`/projects/${p.id}`, {}), 'name a field to change');
      expect400(await api.patch(`/projects/${p.id}`, { kind: 'flowchart' }), 'kind: unknown field');
      expect400(await api.patch(`/projects/${p.id}`, { name: '' }), 'name: must not be empty');
      expect400(await api.patch(`/projects/${p.id}`, { isStarred: 'yes' }), 'isStarred: must be a boolean');
      expect400(await api.patch(`/projects/${p.id}`, { tags: 'a' }), 'tags');
      expect((await api.patch('/projects/prj_aaaaaaaaaaaaaaaaaaaa', { name: 'x' })).status).to.equal(404);
    });

    it('when If-Match names the current version, then the PATCH applies; a stale one is 412 precondition_failed and changes nothing; a malformed one is 400', async () => {
      const p = await make(api, '/notes', { name: 'v1' });
      const ok = await api.patch(`/projects/${p.id}`, { name: 'v2' }, { 'if-match': '"1"' });
      expect(ok.status, ok.text).to.equal(200);
      expect(ok.body.version).to.equal(2);
      const stale = await api.patch(`/projects/${p.id}`, { name: 'lost', description: 'lost' }, { 'if-match': '"1"' });
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      expect(stale.body.error.message).to.include('version 2');
      const now = await api.get(`/projects/${p.id}`);
      expect(now.body).to.include({ name: 'v2', description: '', version: 2 });
      expect400(await api.patch(`/projects/${p.id}`, { name: 'x' }, { 'if-match': 'abc' }), 'If-Match');
      expect400(await api.patch(`/projects/${p.id}`, { name: 'x' }, { 'if-match': '"0"' }), 'If-Match');
      expect((await api.patch(`/projects/${p.id}`, { name: 'any' }, { 'if-match': '*' })).status).to.equal(200);
    });

    it('when two PATCHes of different fields run at once, then neither field is lost (20 rounds)', async () => {
      const p = await make(api, '/notes', { name: 'race' });
      for (let i = 0; i < 20; i++) {
        const [a, b] = await Promise.all([
          api.patch(`/projects/${p.id}`, { name: `name ${i}` }),
          api.patch(`/projects/${p.id}`, { description: `description ${i}` }),
        ]);
        expect(a.status).to.equal(200);
        expect(b.status).to.equal(200);
        const now = (await api.get(`/projects/${p.id}`)).body;
        expect(now).to.include({ name: `name ${i}`, description: `description ${i}`, version: 3 + 2 * i });
      }
    });

    it('when two PATCHes with the same If-Match race, then exactly one applies and the other is 412', async () => {
      const p = await make(api, '/notes', { name: 'race' });
      for (let i = 0; i < 5; i++) {
        const version = (await api.get(`/projects/${p.id}`)).body.version;
        const h = { 'if-match': `"${version}"` };
        const rs = await Promise.all([
          api.patch(`/projects/${p.id}`, { name: `a${i}` }, h),
          api.patch(`/projects/${p.id}`, { description: `b${i}` }, h),
        ]);
        expect(rs.map((r) => r.status).sort()).to.deep.equal([200, 412]);
        const now = (await api.get(`/projects/${p.id}`)).body;
        expect(now.version).to.equal(version + 1);
        const winner = rs.find((r) => r.status === 200)!.body;
        expect(now.name).to.equal(winner.name);
        expect(now.description).to.equal(winner.description);
      }
    });
  });

  describe('DELETE', () => {
    it('when a project is deleted, then 204, and afterwards it is 404 everywhere and gone from the list', async () => {
      const p = await make(api, '/notes', { name: 'doomed' });
      const r = await api.delete(`/projects/${p.id}`);
      expect(r.status).to.equal(204);
      expect(r.text).to.equal('');
      expect((await api.get(`/projects/${p.id}`)).status).to.equal(404);
      expect((await api.patch(`/projects/${p.id}`, { name: 'x' })).status).to.equal(404);
      expect((await api.delete(`/projects/${p.id}`)).status).to.equal(404);
      expect((await allPages(api)).map((x) => x.id)).to.not.include(p.id);
      expect(await projectsCol().findOne({ _id: p.id })).to.equal(null);
    });

    it('when If-Match is stale on DELETE, then 412 and the project stays; the current version deletes it', async () => {
      const p = await make(api, '/notes', { name: 'kept' });
      await api.patch(`/projects/${p.id}`, { name: 'kept 2' });
      const stale = await api.delete(`/projects/${p.id}`, { 'if-match': '"1"' });
      expect(stale.status).to.equal(412);
      expect(stale.body.error.code).to.equal('precondition_failed');
      expect((await api.get(`/projects/${p.id}`)).status).to.equal(200);
      expect((await api.delete(`/projects/${p.id}`, { 'if-match': '"2"' })).status).to.equal(204);
    });

    it("when a sheet project is deleted, then its grid and its commits go with it, and other sheets' stay", async () => {
      const service = createProjectsService(stack.rt);
      const sheet = await service.create({ accountId, kind: 'sheet', name: 'Budget', content: null });
      const other = await service.create({ accountId, kind: 'sheet', name: 'Other', content: null });
      const sheets = stack.db.db.collection<any>(COLLECTIONS.sheets);
      const commits = stack.db.db.collection<any>(COLLECTIONS.sheetCommits);
      await sheets.insertMany([
        { _id: sheet._id, accountId, columns: [] },
        { _id: other._id, accountId, columns: [] },
      ]);
      await commits.insertMany([
        { _id: 'cmt_1', sheetId: sheet._id, accountId },
        { _id: 'cmt_2', sheetId: sheet._id, accountId },
        { _id: 'cmt_3', sheetId: other._id, accountId },
      ]);
      const got = await api.get(`/projects/${sheet._id}`);
      expect(got.body).to.include({
        kind: 'sheet',
        projectType: 'sheet',
        openUrl: `${stack.config.PUBLIC_BASE_URL}/sheets/${sheet._id}`,
      });
      expect400(
        await api.patch(`/projects/${sheet._id}`, { content: { cells: [] } }),
        'content: the content of a sheet project cannot be changed here',
      );
      expect((await api.patch(`/projects/${sheet._id}`, { name: 'Budget 2027' })).status).to.equal(200);

      expect((await api.delete(`/projects/${sheet._id}`)).status).to.equal(204);
      expect(await sheets.countDocuments({ _id: sheet._id })).to.equal(0);
      expect(await commits.countDocuments({ sheetId: sheet._id })).to.equal(0);
      expect(await sheets.countDocuments({ _id: other._id })).to.equal(1);
      expect(await commits.countDocuments({ sheetId: other._id })).to.equal(1);
    });
  });

  describe('presentations in the same list', () => {
    it('when a presentation is made by POST /presentations, then it is listed with the other kinds and GET shows its deck state as read-only content', async () => {
      const a = await stack.createAccount({ features: { backgroundDecks: false } });
      const p = client(stack.baseUrl, a.key);
      const deck = await p.post('/presentations', { name: 'Quarterly', brief: 'Results', tags: ['q3'] });
      expect(deck.status, deck.text).to.equal(201);
      await make(p, '/notes', { name: 'notes' });
      const list = await p.get('/projects');
      expect(list.body.total).to.equal(2);
      const item = list.body.data.find((x: any) => x.id === deck.body.id);
      expect(item).to.include({
        kind: 'presentation',
        projectType: 'presentation',
        version: 1,
        openUrl: `${stack.config.PUBLIC_BASE_URL}/presentations/${deck.body.id}`,
      });
      expect((await p.get('/projects?kind=presentation')).body.data.map((x: any) => x.id)).to.deep.equal([
        deck.body.id,
      ]);
      const got = await p.get(`/projects/${deck.body.id}`);
      expect(got.body.content).to.include({
        generationStatus: 'pending_editor_open',
        jobId: null,
        pollUrl: null,
        build: null,
        slideMode: 'creator',
        requestedSlides: 8,
        brief: 'Results',
      });
      expect400(
        await p.patch(`/projects/${deck.body.id}`, { content: { slides: [] } }),
        'content: the content of a presentation project cannot be changed here',
      );
      const renamed = await p.patch(`/projects/${deck.body.id}`, { name: 'Q3 review', isStarred: true });
      expect(renamed.status).to.equal(200);
      expect(renamed.body).to.include({ name: 'Q3 review', isStarred: true, version: 2 });
    });

    it('when a presentation stored before kind and version existed is read, patched and listed, then it is a presentation at version 1, then 2', async () => {
      const a = await stack.createAccount();
      const p = client(stack.baseUrl, a.key);
      const now = new Date();
      const url = stack.rt.blobs.url('blob_old', 'slide-1.png', 60);
      await projectsCol().insertOne({
        _id: 'prj_legacydeck000000000',
        accountId: a.accountId,
        name: 'Old deck',
        description: '',
        projectType: 'presentation',
        canvasMode: 'creator',
        tags: [],
        isStarred: false,
        createdAt: now,
        updatedAt: now,
        deletedAt: null,
        presentation: {
          brief: 'b',
          outline: null,
          slideCount: 3,
          slideMode: 'creator',
          themeId: null,
          visualStyle: 'illustration',
          brandUrl: null,
          companyName: null,
          generationStatus: 'generating',
          jobId: 'deck_old0000000000000000',
          build: {
            status: 'built',
            theme: {
              id: 'default',
              source: 'builtin',
              background: '#fff',
              surface: '#eee',
              text: '#000',
              accent: '#f00',
            },
            manifestUrl: url,
            builtAt: now,
            slides: [
              {
                index: 0,
                title: 'One',
                bullets: ['a'],
                status: 'built',
                imageUrl: url,
                contentUrl: null,
                width: 960,
                height: 540,
                error: null,
              },
            ],
          },
        },
      });
      const listed = (await p.get('/projects?kind=presentation')).body.data;
      expect(listed.map((x: any) => [x.id, x.kind, x.version])).to.deep.equal([
        ['prj_legacydeck000000000', 'presentation', 1],
      ]);
      const got = await p.get('/projects/prj_legacydeck000000000');
      expect(got.body.content).to.include({
        generationStatus: 'generating',
        jobId: 'deck_old0000000000000000',
        pollUrl: '/api/v1/jobs/deck_old0000000000000000',
      });
      const slide = got.body.content.build.slides[0];
      expect(slide).to.include({ index: 0, title: 'One', status: 'built' });
      // Signed again at read time: a later expiry than the stored 60 s link, and a valid signature.
      const exp = (u: string) => Number(new URL(u).searchParams.get('exp'));
      expect(exp(slide.imageUrl)).to.be.greaterThan(exp(url));
      const sig = new URL(slide.imageUrl);
      expect(stack.rt.blobs.verify('blob_old', sig.searchParams.get('exp')!, sig.searchParams.get('sig')!)).to.equal(
        'ok',
      );
      const patched = await p.patch('/projects/prj_legacydeck000000000', { tags: ['old'] }, { 'if-match': '"1"' });
      expect(patched.status, patched.text).to.equal(200);
      expect(patched.body.version).to.equal(2);
      expect(patched.headers.get('etag')).to.equal('"2"');
    });

    it('when a presentation with a deck job is deleted, then the project goes and the job stays as it is', async () => {
      const a = await stack.createAccount();
      const p = client(stack.baseUrl, a.key);
      const deck = await p.post('/presentations', { name: 'Deck', brief: 'b' });
      expect(deck.status, deck.text).to.equal(201);
      const jobId = deck.body.job.jobId;
      const before = await stack.db.jobs.findOne({ _id: jobId });
      expect((await p.delete(`/projects/${deck.body.id}`)).status).to.equal(204);
      expect((await p.get(`/projects/${deck.body.id}`)).status).to.equal(404);
      const job = await stack.db.jobs.findOne({ _id: jobId });
      expect(job).to.not.equal(null);
      expect(job!.status).to.equal(before!.status);
    });
  });
});
