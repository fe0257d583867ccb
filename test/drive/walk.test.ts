import { expect } from 'chai';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { client, eventually, type Client, type HttpResult } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

/**
 * Tenant walk over every Drive route: a second account's key, with every scope,
 * gets 404 (bulk: not_found / folder_not_found per file; search: none of them) for the first
 * account's files and folders, and never sees a byte, a name or a word of them.
 */
describe('Drive tenant walk: a second account against every Drive route', () => {
  let stack: Stack;
  let a: Client;
  let b: Client;
  const secret = 'zanzibarquux';
  const A: Record<string, string> = {};
  let bFile: string;
  let aDownloadUrl: string;
  let bDownloadUrl: string;

  before(async function () {
    this.timeout(60_000);
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'drive' } });
    a = client(stack.baseUrl, (await stack.createAccount()).key);
    b = client(stack.baseUrl, (await stack.createAccount()).key);
    A.folder = (await a.post('/drive/folders', { name: `Folder ${secret}` })).body.id;
    A.sub = (await a.post('/drive/folders', { name: 'Sub', parentFolderId: A.folder })).body.id;
    A.file = (
      await a.post('/drive/files', {
        name: `${secret}.md`,
        content: `# Plans\n\nThe ${secret} budget.`,
        folderId: A.folder,
        tags: [secret],
      })
    ).body.id;
    A.rootFile = (await a.post('/drive/files', { name: 'root.txt', content: `root ${secret}` })).body.id;
    A.trashed = (await a.post('/drive/files', { name: 'trashed.txt', content: `gone ${secret}` })).body.id;
    await a.post('/drive/files/bulk', { fileIds: [A.trashed], action: 'trash' });
    bFile = (await b.post('/drive/files', { name: 'mine.txt', content: 'b owns this' })).body.id;
    aDownloadUrl = (await a.get(`/drive/files/${A.file}`)).body.downloadUrl;
    bDownloadUrl = (await b.get(`/drive/files/${bFile}`)).body.downloadUrl;
    // The first account finds its file (text extracted by the drive pool), so "none" below means something.
    await eventually(
      async () =>
        (await a.get(`/drive/search?q=${secret}`)).body?.data?.some(
          (h: { file: { id: string } }) => h.file.id === A.file,
        ),
      20_000,
      'the owner to find its file',
    );
    expect((await a.get(`/drive/files/${A.file}/text`)).body.content).to.include(secret);
  });
  after(() => stack?.stop());

  /** Nothing of the first account leaks into an answer. */
  const clean = (r: HttpResult, what: string) => {
    for (const v of [...Object.values(A), secret]) expect(r.text, `${what} leaks ${v}`).to.not.include(v);
  };

  /** One probe per Drive operation, per id of the first account. Every catalogue entry tagged drive must be here. */
  const probes: Record<string, (id: string) => Promise<void>> = {
    listDriveFiles: async (id) => {
      const r = await b.get(`/drive/files?folderId=${id}`);
      expect(r.status, `list folderId=${id}`).to.equal(404);
      clean(r, 'list by folder');
      const all = await b.get('/drive/files');
      expect(all.status).to.equal(200);
      expect(all.body.data.map((f: { id: string }) => f.id)).to.deep.equal([bFile]);
      clean(all, 'list');
      clean(await b.get('/drive/files?trash=true'), 'trash list');
    },
    createDriveFile: async (id) => {
      const r = await b.post('/drive/files', { name: 'into.txt', content: 'x', folderId: id });
      expect(r.status, `create in ${id}`).to.equal(404);
      clean(r, 'create');
    },
    getDriveFile: async (id) => {
      const r = await b.get(`/drive/files/${id}`);
      expect(r.status, `get ${id}`).to.equal(404);
      clean(r, 'get');
    },
    updateDriveFile: async (id) => {
      for (const body of [{ isStarred: true }, { name: 'stolen.txt' }]) {
        const r = await b.patch(`/drive/files/${id}`, body);
        expect(r.status, `patch ${id}`).to.equal(404);
        clean(r, 'patch');
      }
      const move = await b.patch(`/drive/files/${bFile}`, { folderId: id });
      expect(move.status, `move own file into ${id}`).to.equal(404);
    },
    getDriveFileContent: async (id) => {
      const r = await b.get(`/drive/files/${id}/content`);
      expect(r.status, `content ${id}`).to.equal(404);
      expect(r.headers.get('location')).to.equal(null);
      clean(r, 'content');
    },
    getDriveFileText: async (id) => {
      const r = await b.get(`/drive/files/${id}/text`);
      expect(r.status, `text ${id}`).to.equal(404);
      clean(r, 'text');
    },
    bulkDriveFiles: async (id) => {
      for (const action of ['star', 'unstar', 'trash', 'restore']) {
        const r = await b.post('/drive/files/bulk', { fileIds: [id], action });
        expect(r.status).to.equal(200);
        expect(r.body.failed, `${action} ${id}`).to.deep.equal([{ fileId: id, reason: 'not_found' }]);
      }
      const mv = await b.post('/drive/files/bulk', { fileIds: [id], action: 'move', folderId: 'root' });
      expect(mv.body.failed).to.deep.equal([{ fileId: id, reason: 'not_found' }]);
      const into = await b.post('/drive/files/bulk', { fileIds: [bFile], action: 'move', folderId: id });
      expect(into.body).to.deep.equal({
        action: 'move',
        succeeded: [],
        failed: [{ fileId: bFile, reason: 'folder_not_found' }],
      });
    },
    searchDrive: async () => {
      for (const q of [secret, 'plans budget', 'root', 'trashed']) {
        const r = await b.get(`/drive/search?q=${encodeURIComponent(q)}`);
        expect(r.status).to.equal(200);
        expect(
          r.body.data.map((h: { file: { id: string } }) => h.file.id).filter((x: string) => x !== bFile),
          q,
        ).to.deep.equal([]);
        // The answer echoes the query itself; nothing else of the first account may appear.
        clean({ ...r, text: JSON.stringify(r.body.data) }, `search ${q}`);
      }
    },
    listDriveFolders: async () => {
      const r = await b.get('/drive/folders');
      expect(r.status).to.equal(200);
      expect(r.body.data).to.deep.equal([]);
      clean(r, 'folders');
    },
    createDriveFolder: async (id) => {
      const r = await b.post('/drive/folders', { name: 'inside', parentFolderId: id });
      expect(r.status, `folder in ${id}`).to.equal(404);
      clean(r, 'create folder');
    },
    updateDriveFolder: async (id) => {
      const r = await b.patch(`/drive/folders/${id}`, { name: 'stolen', color: '#000' });
      expect(r.status, `patch folder ${id}`).to.equal(404);
      clean(r, 'patch folder');
      const mine = (await b.post('/drive/folders', { name: `Mine ${id.slice(-6)}` })).body.id;
      const into = await b.patch(`/drive/folders/${mine}`, { parentFolderId: id });
      expect(into.status, `move own folder into ${id}`).to.equal(404);
    },
  };

  it('when the catalogue is read, then every Drive operation has a probe in this walk', () => {
    const drive = (Object.entries(endpoints) as [string, Endpoint][])
      .filter(([, e]) => e.tag === 'drive')
      .map(([id]) => id);
    expect(drive.sort()).to.deep.equal(Object.keys(probes).sort());
  });

  it("when the second account calls every Drive route with the first account's file and folder ids, then each answers 404 / not_found and leaks nothing", async function () {
    this.timeout(60_000);
    for (const [op, probe] of Object.entries(probes)) {
      for (const id of Object.values(A)) {
        try {
          await probe(id);
        } catch (err) {
          (err as Error).message = `${op} with ${id}: ${(err as Error).message}`;
          throw err;
        }
      }
    }
  });

  it('when the second account tampers with download links, then the public stream refuses and sends none of the bytes', async () => {
    const stolen = new URL(bDownloadUrl);
    stolen.pathname = stolen.pathname.replace(bFile, A.file!);
    const forged = await fetch(stolen, { redirect: 'manual' });
    expect(forged.status).to.be.oneOf([403, 404]);
    expect(await forged.text()).to.not.include(secret);
    // The owner's own link works: the refusal above is the tenant rule, not a broken stream.
    const own = await fetch(aDownloadUrl);
    expect(own.status).to.equal(200);
    expect(await own.text()).to.include(secret);
  });

  it('when the first account looks afterwards, then nothing of it changed', async () => {
    const f = await a.get(`/drive/files/${A.file}`);
    expect(f.body).to.include({
      isStarred: false,
      trashedAt: null,
      folderId: A.folder,
      name: `${secret}.md`,
      version: 1,
    });
    const t = await a.get(`/drive/files/${A.trashed}`);
    expect(t.body.trashedAt).to.be.a('string');
    const tree = await a.get('/drive/folders');
    expect(tree.body.data.map((x: { id: string; name: string }) => [x.id, x.name])).to.deep.equal([
      [A.folder, `Folder ${secret}`],
      [A.sub, 'Sub'],
    ]);
  });
});
