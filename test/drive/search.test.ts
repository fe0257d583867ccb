import { expect } from 'chai';
import { putDriveBlob } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc } from '../../platform/drive/drive.types';
import {
  allIndexDocuments,
  forwardId,
  foldWord,
  indexCollections,
  pageId,
  postingsId,
  removeDriveTextIndex,
  snippetAround,
  words,
} from '../../platform/drive/search-index.repository';
import { createTeams } from '../../platform/drive/teams.repository';
import { requestDriveText } from '../../platform/drive/text-queue';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { b64, makeDocx, makePdf, makePptx, makeXlsx, upload, waitForText } from './text-documents';

type Hit = {
  file: { id: string; name: string; kind: string; teamId: string | null };
  score: number;
  matchField: string;
  snippet: string;
  highlights: { start: number; end: number }[];
};

describe('Drive search: GET /drive/search', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let accountId: string;
  const files = () => stack.db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  /** An index document by `_id`. */
  const indexDoc = (kind: keyof typeof indexCollections, id: string) =>
    stack.db.db.collection<{ _id: string }>(indexCollections[kind]).findOne({ _id: id });
  /** Upload and wait until its text is extracted and indexed. */
  const put = async (c: Client, body: Record<string, unknown>) => {
    const id = await upload(c, body);
    await waitForText(c, id);
    return id;
  };
  const search = async (c: Client, qs: string) => {
    const r = await c.get(`/drive/search?${qs}`);
    expect(r.status, r.text).to.equal(200);
    return r.body as { query: string; terms: string[]; data: Hit[]; hasMore: boolean };
  };
  const ids = (hits: Hit[]) => hits.map((h) => h.file.id);
  const marked = (h: Hit) => h.highlights.map((m) => h.snippet.slice(m.start, m.end));

  // One account with a small drive, made once (each upload waits for its text).
  let nameHit: string,
    bodyHit: string,
    tagHit: string,
    descHit: string,
    pdf: string,
    docx: string,
    xlsx: string,
    pptx: string;
  before(async () => {
    stack = await startStack({ env: { WORKER_POOLS: 'drive' }, scheduler: false });
    const a = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    api = client(stack.baseUrl, a.key);
    accountId = a.accountId;
    bodyHit = await put(api, {
      name: 'minutes.md',
      content: `Attendees discussed many things. ${'Filler words go here. '.repeat(20)}Then the zeppelin hangar lease came up, and everyone agreed.`,
    });
    nameHit = await put(api, { name: 'Zeppelin history.txt', content: 'Airships of the early century.' });
    tagHit = await put(api, {
      name: 'photo-notes.txt',
      content: 'Nothing relevant here.',
      tags: ['zeppelin', 'archive'],
    });
    descHit = await put(api, {
      name: 'scan-notes.txt',
      content: 'Nothing relevant either.',
      description: 'Notes about the zeppelin museum visit.',
    });
    pdf = await put(api, {
      name: 'harbour.pdf',
      contentBase64: b64(await makePdf([['Harbour authority report'], ['The lighthouse tender arrives weekly']])),
    });
    docx = await put(api, {
      name: 'proposal.docx',
      contentBase64: b64(await makeDocx(['Proposal for the lighthouse restoration', 'Budget follows.'])),
    });
    xlsx = await put(api, {
      name: 'costs.xlsx',
      contentBase64: b64(
        await makeXlsx([
          {
            name: 'Lighthouse',
            rows: [
              ['Paint', 300],
              ['Lamp', 1200],
            ],
          },
        ]),
      ),
    });
    pptx = await put(api, {
      name: 'pitch.pptx',
      contentBase64: b64(await makePptx([{ title: 'Lighthouse tours', lines: ['Summer season', 'Guided visits'] }])),
    });
  });
  after(() => stack.stop());

  it('when a word is in a name, a tag, a description and a body, then the name ranks first, then the tag, the description, the body, each with its matchField and a snippet around the match', async () => {
    const r = await search(api, 'q=Zeppelin');
    expect(r).to.include({ query: 'Zeppelin', hasMore: false });
    expect(r.terms).to.deep.equal(['zeppelin']);
    expect(ids(r.data)).to.deep.equal([nameHit, tagHit, descHit, bodyHit]);
    expect(r.data.map((h) => h.matchField)).to.deep.equal(['name', 'tag', 'description', 'text']);
    expect(r.data.map((h) => h.score)).to.deep.equal([16, 8, 3, 1]);
    const [n, t, d, b] = r.data as [Hit, Hit, Hit, Hit];
    expect(n.snippet).to.equal('Zeppelin history.txt');
    expect(marked(n)).to.deep.equal(['Zeppelin']);
    expect(t.snippet).to.equal('zeppelin');
    expect(d.snippet).to.equal('Notes about the zeppelin museum visit.');
    expect(marked(d)).to.deep.equal(['zeppelin']);
    // The body match is deep in the text: the snippet is a window of about 160 characters around it.
    expect(b.snippet.length).to.be.within(60, 170);
    expect(b.snippet.startsWith('…')).to.equal(true);
    expect(b.snippet).to.contain('zeppelin hangar lease');
    expect(marked(b)).to.deep.equal(['zeppelin']);
    expect(b.file).to.include({ name: 'minutes.md', kind: 'text' });
  });

  it('when the text of PDF, DOCX, XLSX and PPTX files holds a word, then search finds each of them by their text', async () => {
    const r = await search(api, 'q=lighthouse');
    expect(new Set(ids(r.data))).to.deep.equal(new Set([pdf, docx, xlsx, pptx]));
    expect(r.data.every((h) => h.matchField === 'text')).to.equal(true);
    const docHit = r.data.find((h) => h.file.id === docx)!;
    expect(docHit.snippet).to.contain('Proposal for the lighthouse restoration');
  });

  it('when a query has several words, then every word must match (in any field), and the scores add up', async () => {
    expect(ids((await search(api, 'q=lighthouse+tender')).data)).to.deep.equal([pdf]);
    expect((await search(api, 'q=lighthouse+zeppelin')).data).to.deep.equal([]);
    const both = await search(api, `q=${encodeURIComponent('zeppelin museum')}`);
    expect(ids(both.data)).to.deep.equal([descHit]);
    expect(both.data[0]!.score).to.equal(6);
    expect(marked(both.data[0]!)).to.deep.equal(['zeppelin', 'museum']);
  });

  it('when kind is given, then only files of that kind are hits; limit bounds the answer and hasMore says there is more', async () => {
    expect(ids((await search(api, 'q=lighthouse&kind=pdf')).data)).to.deep.equal([pdf]);
    expect(ids((await search(api, 'q=lighthouse&kind=presentation')).data)).to.deep.equal([pptx]);
    expect((await search(api, 'q=lighthouse&kind=image')).data).to.deep.equal([]);
    const one = await search(api, 'q=zeppelin&limit=1');
    expect(ids(one.data)).to.deep.equal([nameHit]);
    expect(one.hasMore).to.equal(true);
  });

  it('when words are in German, French, Russian, Japanese and Chinese, then case, accents and width are folded and CJK text is split into words', async () => {
    const de = await put(api, { name: 'strasse.md', content: 'Die Übergrößenträger stehen an der Hauptstraße.' });
    const fr = await put(api, { name: 'menu.md', content: 'Un café crème et une crêpe à la française.' });
    const ru = await put(api, { name: 'privet.md', content: 'Привет, мир! Новогодняя ёлка стоит в зале.' });
    const ja = await put(api, { name: 'tokyo.md', content: '東京都に住んでいます。東京タワーが好きです。' });
    const zh = await put(api, { name: 'beijing.md', content: '我们在北京大学学习中文。' });
    expect(ids((await search(api, `q=${encodeURIComponent('HAUPTSTRASSE')}`)).data)).to.deep.equal([de]);
    expect(ids((await search(api, `q=${encodeURIComponent('übergrößenträger')}`)).data)).to.deep.equal([de]);
    expect(ids((await search(api, `q=${encodeURIComponent('ubergrossentrager')}`)).data)).to.deep.equal([de]);
    const cafe = await search(api, 'q=CAFE+creme');
    expect(ids(cafe.data)).to.deep.equal([fr]);
    expect(marked(cafe.data[0]!)).to.deep.equal(['café', 'crème']);
    expect(ids((await search(api, `q=${encodeURIComponent('Crêpe')}`)).data)).to.deep.equal([fr]);
    expect(ids((await search(api, `q=${encodeURIComponent('привет')}`)).data)).to.deep.equal([ru]);
    expect(ids((await search(api, `q=${encodeURIComponent('елка')}`)).data), 'ё folds to е').to.deep.equal([ru]);
    const tokyo = await search(api, `q=${encodeURIComponent('東京')}`);
    expect(ids(tokyo.data)).to.deep.equal([ja]);
    expect(marked(tokyo.data[0]!)).to.include('東京');
    expect(ids((await search(api, `q=${encodeURIComponent('北京')}`)).data)).to.deep.equal([zh]);
    expect(ids((await search(api, `q=${encodeURIComponent('中文')}`)).data)).to.deep.equal([zh]);
    expect(ids((await search(api, `q=${encodeURIComponent('ＣＡＦＥ')}`)).data), 'full-width letters').to.deep.equal([
      fr,
    ]);
  });

  it('when a file is trashed, then it is no hit; restored, it is one again', async () => {
    const id = await put(api, { name: 'ephemeral.md', content: 'quixotic plans' });
    expect(ids((await search(api, 'q=quixotic')).data)).to.deep.equal([id]);
    expect((await api.post('/drive/files/bulk', { fileIds: [id], action: 'trash' })).body.succeeded).to.deep.equal([
      id,
    ]);
    expect((await search(api, 'q=quixotic')).data).to.deep.equal([]);
    await api.post('/drive/files/bulk', { fileIds: [id], action: 'restore' });
    expect(ids((await search(api, 'q=quixotic')).data)).to.deep.equal([id]);
  });

  it('when a file is renamed, then the old name no longer finds it and the new one does; its text still does', async () => {
    const id = await put(api, { name: 'walrus.md', content: 'tusks and flippers' });
    expect(ids((await search(api, 'q=walrus')).data)).to.deep.equal([id]);
    expect(ids((await search(api, 'q=walrus.md')).data)).to.deep.equal([id]);
    const r = await api.patch(`/drive/files/${id}`, { name: 'narwhal.md', tags: ['arctic'] });
    expect(r.status).to.equal(200);
    expect((await search(api, 'q=walrus')).data).to.deep.equal([]);
    expect((await search(api, 'q=narwhal')).data.map((h) => [h.file.id, h.matchField])).to.deep.equal([[id, 'name']]);
    expect((await search(api, 'q=arctic')).data.map((h) => [h.file.id, h.matchField])).to.deep.equal([[id, 'tag']]);
    expect(ids((await search(api, 'q=flippers')).data)).to.deep.equal([id]);
  });

  it('when another account searches the same words, then it finds nothing of this account', async () => {
    const other = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    const oc = client(stack.baseUrl, other.key);
    expect((await search(oc, 'q=zeppelin')).data).to.deep.equal([]);
    expect((await search(oc, 'q=lighthouse')).data).to.deep.equal([]);
    const mine = await put(oc, { name: 'zeppelin.md', content: 'my own zeppelin' });
    expect(ids((await search(oc, 'q=zeppelin')).data)).to.deep.equal([mine]);
    expect(ids((await search(api, 'q=zeppelin')).data)).to.not.include(mine);
  });

  it('when a key is pinned to a folder, then only files inside it (and its subfolders) are hits', async () => {
    const inside = (await api.post('/drive/folders', { name: 'Pinned search' })).body.id as string;
    const sub = (await api.post('/drive/folders', { name: 'Deeper', parentFolderId: inside })).body.id as string;
    const outside = (await api.post('/drive/folders', { name: 'Not pinned' })).body.id as string;
    const a = await put(api, { name: 'a.md', content: 'marmalade recipe', folderId: sub });
    await put(api, { name: 'b.md', content: 'marmalade recipe', folderId: outside });
    await put(api, { name: 'c.md', content: 'marmalade recipe' });
    expect((await search(api, 'q=marmalade')).data).to.have.length(3);
    const pinned = await stack.rt.accounts
      .forAccount(accountId)
      .createKey({ scopes: ['drive:read'], folderPins: [inside] });
    const pc = client(stack.baseUrl, pinned.key);
    expect(ids((await search(pc, 'q=marmalade')).data)).to.deep.equal([a]);
    const nowhere = await stack.rt.accounts.forAccount(accountId).createKey({
      scopes: ['drive:read'],
      folderPins: ['dfo_nosuchfolder00000000'],
    });
    expect((await search(client(stack.baseUrl, nowhere.key), 'q=marmalade')).data).to.deep.equal([]);
  });

  it('when the account belongs to a team, then search covers its team drive too; teamId limits it to that drive; another team is 404', async () => {
    const owner = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    const teams = createTeams(stack.rt.store);
    const team = await teams.createTeam({ name: 'Research', ownerAccountId: owner.accountId });
    await teams.addMember(team._id, accountId, 'viewer');
    const data = Buffer.from('Field notes about the zeppelin mooring mast.');
    const fileId = `dfl_teamsearch${Date.now().toString(36)}`;
    const blob = await putDriveBlob(stack.rt.store, data, {
      accountId: owner.accountId,
      contentType: 'text/markdown',
      filename: 'mast.md',
      fileId,
    });
    const now = new Date();
    await files().insertOne({
      _id: fileId,
      accountId: owner.accountId,
      teamId: team._id,
      name: 'mast.md',
      nameKey: 'mast.md',
      ext: 'md',
      kind: 'text',
      mimeType: 'text/markdown',
      sizeBytes: data.length,
      folderId: null,
      isStarred: false,
      tags: [],
      description: '',
      blobId: blob.blobId,
      sha256: blob.sha256,
      trashedAt: null,
      lastAccessedAt: null,
      text: { status: 'pending', chars: 0, truncated: false, engine: null, error: null, at: null },
      version: 1,
      createdAt: now,
      updatedAt: now,
    });
    await requestDriveText(stack.rt, { fileId, accountId: owner.accountId });
    await waitForText(api, fileId);
    expect(await indexDoc('postings', postingsId(`team:${team._id}`, 'mooring'))).to.not.equal(null);
    const all = await search(api, 'q=zeppelin');
    expect(ids(all.data)).to.include(fileId).and.include(nameHit);
    expect(all.data.find((h) => h.file.id === fileId)!.file.teamId).to.equal(team._id);
    expect(ids((await search(api, `q=zeppelin&teamId=${team._id}`)).data)).to.deep.equal([fileId]);
    // The owner (a member too) finds it; a stranger does not, and naming the team is 404.
    expect(ids((await search(client(stack.baseUrl, owner.key), 'q=mooring')).data)).to.deep.equal([fileId]);
    const stranger = await stack.createAccount({ scopes: ['drive:read'] });
    const sc = client(stack.baseUrl, stranger.key);
    expect((await search(sc, 'q=mooring')).data).to.deep.equal([]);
    const r = await sc.get(`/drive/search?q=mooring&teamId=${team._id}`);
    expect(r.status).to.equal(404);
    expect(r.body.error.code).to.equal('not_found');
  });

  it('when the query is malformed, then 400 names the field; a key without drive:read gets 403', async () => {
    const cases: [string, RegExp][] = [
      ['', /^q: /],
      ['q=', /^q: /],
      ['q=%20%20', /^q: must not be empty/],
      [`q=${'a'.repeat(201)}`, /^q: must be at most 200 characters/],
      ['q=a%0Ab', /^q: /],
      ['q=x&limit=0', /^limit: /],
      ['q=x&limit=51', /^limit: /],
      ['q=x&limit=abc', /^limit: /],
      ['q=x&kind=folder', /^kind: /],
      ['q=x&teamId=a.b', /^teamId: /],
      ['q=x&q=y', /^q: /],
    ];
    for (const [qs, msg] of cases) {
      const r = await api.get(`/drive/search?${qs}`);
      expect(r.status, qs).to.equal(400);
      expect(r.body.error.code, qs).to.equal('validation_error');
      expect(r.body.error.message, qs).to.match(msg);
    }
    const rw = await stack.createAccount({ scopes: ['read', 'write', 'ai', 'drive:write'] });
    const f = await client(stack.baseUrl, rw.key).get('/drive/search?q=zeppelin');
    expect(f.status).to.equal(403);
    expect(f.body.error.code).to.equal('forbidden');
  });

  it('when a query holds no word (punctuation only), then it answers no hits and no terms', async () => {
    const r = await search(api, `q=${encodeURIComponent('!!! ??? ...')}`);
    expect(r).to.deep.include({ terms: [], data: [], hasMore: false });
  });

  it('when a file is purged, then removeDriveTextIndex leaves no posting, page or forward document of it', async () => {
    const id = await put(api, { name: 'doomed.md', content: `obliterate ${'words '.repeat(1000)}` });
    const file = (await files().findOne({ _id: id }))!;
    expect(await indexDoc('forward', forwardId(id))).to.not.equal(null);
    expect(await indexDoc('pages', pageId(id, 1))).to.not.equal(null);
    expect(JSON.stringify(await allIndexDocuments(stack.rt.store))).to.contain(id);
    await removeDriveTextIndex(stack.rt.store, file);
    await removeDriveTextIndex(stack.rt.store, file); // idempotent
    expect(JSON.stringify(await allIndexDocuments(stack.rt.store))).to.not.contain(id);
    await files().deleteOne({ _id: id });
    expect((await search(api, 'q=obliterate')).data).to.deep.equal([]);
  });

  describe('tokeniser and snippets', () => {
    it('when words are folded, then case, accents, width, ß and final sigma are folded; kana voicing and Devanagari vowel signs are kept', () => {
      expect(foldWord('Crème')).to.equal('creme');
      expect(foldWord('STRAßE')).to.equal('strasse');
      expect(foldWord('Ёлка')).to.equal('елка');
      expect(foldWord('ΣΟΦΟΣ')).to.equal('σοφοσ');
      expect(foldWord('ｶﾞｲﾄﾞ')).to.equal('ガイド');
      expect(foldWord('हिन्दी')).to.equal('हिन्दी');
      expect([...words('a I x2 東 の 3.14')].map((w) => w.token)).to.deep.equal(['x2', '東', '3.14', '14']);
      // Words Unicode keeps whole are split once more: a file name by its stem, French elision, snake_case.
      expect([...words("Report.PDF l'état snake_case")].map((w) => [w.token, w.index, w.length])).to.deep.equal([
        ['report.pdf', 0, 10],
        ['report', 0, 6],
        ['pdf', 7, 3],
        ["l'etat", 11, 6],
        ['etat', 13, 4],
        ['snake_case', 18, 10],
        ['snake', 18, 5],
        ['case', 24, 4],
      ]);
    });

    it('when a snippet is cut from a long text, then it is about 160 characters, cut at spaces, marked with … and the matches are located', () => {
      const text = `${'alpha beta gamma '.repeat(30)}needle ${'delta epsilon '.repeat(30)}`;
      const at = text.indexOf('needle');
      const s = snippetAround(text, at, 6, new Set(['needle']));
      expect(s.snippet.startsWith('…')).to.equal(true);
      expect(s.snippet.endsWith('…')).to.equal(true);
      expect(s.snippet.length).to.be.within(120, 165);
      expect(s.snippet).to.not.match(/…\S*[a-z] …/); // no word cut in half at the start
      expect(s.matches).to.have.length(1);
      expect(s.snippet.slice(s.matches[0]!.start, s.matches[0]!.end)).to.equal('needle');
      const short = snippetAround('just needle here', 5, 6, new Set(['needle']));
      expect(short).to.deep.equal({ snippet: 'just needle here', matches: [{ start: 5, end: 11 }] });
    });
  });
});
