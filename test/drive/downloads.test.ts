import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { driveDownloadLink } from '../../platform/drive/links';
import { createTeams } from '../../platform/drive/teams.repository';
import { putDriveBlob } from '../../platform/drive/blobs.repository';
import type { DriveFileDoc } from '../../platform/drive/drive.types';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const DRIVE = ['drive:read', 'drive:write'] as const;

describe('Drive downloads: GET /drive/files/{id}/content and the signed stream', () => {
  let stack: Stack;
  let api: Client;
  let owner: { accountId: string; key: string; keyId: string };
  const bytes = randomBytes(3000);
  let binId: string;

  const files = () => stack.db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  const upload = async (c: Client, body: Record<string, unknown>) => {
    const r = await c.post('/drive/files', body);
    expect(r.status, r.text).to.equal(201);
    return r.body.id as string;
  };
  /** The 302 of …/content, checked, and its target. */
  const linkOf = async (c: Client, id: string) => {
    const r = await c.get(`/drive/files/${id}/content`);
    expect(r.status, r.text).to.equal(302);
    return r.headers.get('location')!;
  };
  /** A plain GET, no headers but the ones given. */
  const plain = (url: string, headers: Record<string, string> = {}, method = 'GET') =>
    fetch(url, { method, headers, redirect: 'manual' });
  const errorCode = async (r: Response) => ((await r.json()) as { error: { code: string } }).error.code;

  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    owner = await stack.createAccount({ scopes: ['read', ...DRIVE] });
    api = client(stack.baseUrl, owner.key);
    binId = await upload(api, { name: 'data.bin', contentBase64: bytes.toString('base64') });
  });
  after(() => stack.stop());

  it('when …/content is asked, then 302 to an absolute signed link valid about 15 minutes, no-store, the body repeating it', async () => {
    const t0 = Date.now();
    const r = await api.get(`/drive/files/${binId}/content`);
    expect(r.status).to.equal(302);
    const location = r.headers.get('location')!;
    expect(location.startsWith(`${stack.config.PUBLIC_BASE_URL}/api/v1/drive/downloads/${binId}?`)).to.equal(true);
    expect(r.headers.get('cache-control')).to.equal('no-store');
    expect(r.body.downloadUrl).to.equal(location);
    const ttl = new Date(r.body.downloadExpiresAt).getTime() - t0;
    expect(ttl).to.be.within(899_000, 901_000);
  });

  it('when the link is fetched with a plain GET and no headers, then the bytes with the stored type, length, ranges and file name', async () => {
    const res = await plain(await linkOf(api, binId));
    expect(res.status).to.equal(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).to.equal(true);
    expect(res.headers.get('content-type')).to.equal('application/octet-stream');
    expect(res.headers.get('content-length')).to.equal('3000');
    expect(res.headers.get('accept-ranges')).to.equal('bytes');
    expect(res.headers.get('cache-control')).to.equal('no-store');
    expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(res.headers.get('content-disposition')).to.equal(
      `attachment; filename="data.bin"; filename*=UTF-8''data.bin`,
    );
  });

  it('when a client follows the redirect, then it gets the bytes; downloadUrl of GET /drive/files/{id} works the same', async () => {
    const followed = await fetch(`${stack.baseUrl}/drive/files/${binId}/content`, {
      headers: { authorization: `Bearer ${owner.key}` },
    });
    expect(followed.status).to.equal(200);
    expect(Buffer.from(await followed.arrayBuffer()).equals(bytes)).to.equal(true);
    const handle = await api.get(`/drive/files/${binId}`);
    const viaHandle = await plain(handle.body.downloadUrl);
    expect(viaHandle.status).to.equal(200);
    expect(Buffer.from(await viaHandle.arrayBuffer()).equals(bytes)).to.equal(true);
  });

  it('when the name is not ASCII, then Content-Disposition carries an ASCII fallback and the RFC 5987 exact name; text keeps its type', async () => {
    const id = await upload(api, { name: 'Résumé "final" 報告.txt', content: 'hello there' });
    const res = await plain(await linkOf(api, id));
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal('hello there');
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    const cd = res.headers.get('content-disposition')!;
    expect(cd).to.equal(
      `attachment; filename="Resume _final_ __.txt"; filename*=UTF-8''${encodeURIComponent('Résumé "final" 報告.txt')}`,
    );
  });

  it('when a Range is asked, then 206 with Content-Range and those bytes; a suffix range works; HEAD answers the headers only', async () => {
    const url = await linkOf(api, binId);
    const part = await plain(url, { range: 'bytes=10-19' });
    expect(part.status).to.equal(206);
    expect(part.headers.get('content-range')).to.equal('bytes 10-19/3000');
    expect(part.headers.get('content-length')).to.equal('10');
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 20))).to.equal(true);
    const suffix = await plain(url, { range: 'bytes=-5' });
    expect(suffix.status).to.equal(206);
    expect(Buffer.from(await suffix.arrayBuffer()).equals(bytes.subarray(2995))).to.equal(true);
    const open = await plain(url, { range: 'bytes=2990-' });
    expect(open.headers.get('content-range')).to.equal('bytes 2990-2999/3000');
    const head = await plain(url, {}, 'HEAD');
    expect(head.status).to.equal(200);
    expect(head.headers.get('content-length')).to.equal('3000');
    expect((await head.arrayBuffer()).byteLength).to.equal(0);
  });

  it('when the Range is bad, then 416 range_not_satisfiable with Content-Range: bytes */size', async () => {
    const url = await linkOf(api, binId);
    for (const range of ['bytes=3000-3001', 'bytes=9-2', 'bytes=0-1,5-6', 'bytes=x']) {
      const r = await plain(url, { range });
      expect(r.status, range).to.equal(416);
      expect(r.headers.get('content-range'), range).to.equal('bytes */3000');
      expect(await errorCode(r), range).to.equal('range_not_satisfiable');
    }
  });

  it('when the signature is altered or missing, then 403 link_invalid; past its expiry 410 link_expired; a malformed id 400', async () => {
    const url = new URL(await linkOf(api, binId));
    const sig = url.searchParams.get('sig')!;
    const tampered = new URL(url);
    tampered.searchParams.set('sig', (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1));
    expect(await errorCode(await plain(tampered.href))).to.equal('link_invalid');
    const longer = new URL(url);
    longer.searchParams.set('exp', String(Number(url.searchParams.get('exp')) + 3600));
    const r = await plain(longer.href);
    expect(r.status).to.equal(403);
    expect(await errorCode(r)).to.equal('link_invalid');
    const otherFile = new URL(url.href.replace(binId, 'dfl_00000000000000000000'));
    expect((await plain(otherFile.href)).status).to.equal(403);
    for (const drop of ['sig', 'exp', 'key']) {
      const u = new URL(url);
      u.searchParams.delete(drop);
      expect((await plain(u.href)).status, drop).to.equal(403);
    }
    const old = driveDownloadLink(stack.config, {
      fileId: binId,
      keyId: owner.keyId,
      now: new Date(Date.now() - 901_000),
    });
    const expired = await plain(old.url);
    expect(expired.status).to.equal(410);
    expect(await errorCode(expired)).to.equal('link_expired');
    const bad = await plain(`${stack.baseUrl}/drive/downloads/${'x'.repeat(200)}?key=a&exp=1&sig=b`);
    expect(bad.status).to.equal(400);
    expect(await errorCode(bad)).to.equal('validation_error');
  });

  it('when the key that made a live link is revoked, then the link stops at once (410 link_revoked); losing drive:read too', async () => {
    const acc = await stack.createAccount({ scopes: [...DRIVE] });
    const c = client(stack.baseUrl, acc.key);
    const id = await upload(c, { name: 'secret.txt', content: 'top secret' });
    const url = await linkOf(c, id);
    expect((await plain(url)).status).to.equal(200);
    await stack.rt.accounts.forAccount(acc.accountId).revokeKey(acc.keyId);
    const r = await plain(url);
    expect(r.status).to.equal(410);
    expect(await errorCode(r)).to.equal('link_revoked');

    const second = await stack.rt.accounts.forAccount(acc.accountId).createKey({ scopes: [...DRIVE] });
    const url2 = await linkOf(client(stack.baseUrl, second.key), id);
    expect((await plain(url2)).status).to.equal(200);
    await stack.rt.accounts.forAccount(acc.accountId).setScopes(second.doc._id, ['drive:write']);
    expect(await errorCode(await plain(url2))).to.equal('link_revoked');
  });

  it('when the file is trashed, then its live link answers 404 at once, …/content 404 and downloadUrl null; restored, it works again', async () => {
    const id = await upload(api, { name: 'trash-me.txt', content: 'bye' });
    const url = await linkOf(api, id);
    expect((await plain(url)).status).to.equal(200);
    const t = await api.post('/drive/files/bulk', { fileIds: [id], action: 'trash' });
    expect(t.body.succeeded).to.deep.equal([id]);
    const gone = await plain(url);
    expect(gone.status).to.equal(404);
    expect(await errorCode(gone)).to.equal('not_found');
    expect((await api.get(`/drive/files/${id}/content`)).status).to.equal(404);
    expect((await api.get(`/drive/files/${id}`)).body.downloadUrl).to.equal(null);
    await api.post('/drive/files/bulk', { fileIds: [id], action: 'restore' });
    expect((await plain(url)).status).to.equal(200);
  });

  it('when a key is pinned to a folder, then its links reach files inside only, and a file moved out stops its link (404)', async () => {
    const inside = (await api.post('/drive/folders', { name: 'Pinned' })).body.id as string;
    const outside = (await api.post('/drive/folders', { name: 'Elsewhere' })).body.id as string;
    const inFile = await upload(api, { name: 'in.txt', content: 'in', folderId: inside });
    const outFile = await upload(api, { name: 'out.txt', content: 'out', folderId: outside });
    const pinned = await stack.rt.accounts
      .forAccount(owner.accountId)
      .createKey({ scopes: ['drive:read'], folderPins: [inside] });
    const pc = client(stack.baseUrl, pinned.key);
    expect((await pc.get(`/drive/files/${outFile}/content`)).status).to.equal(404);
    expect((await pc.get(`/drive/files/${binId}/content`)).status).to.equal(404); // root files are outside every pin
    // A link the pinned key never got, forged with the right secret, is still refused by the pins.
    expect(
      (await plain(driveDownloadLink(stack.config, { fileId: outFile, keyId: pinned.doc._id }).url)).status,
    ).to.equal(404);
    const url = await linkOf(pc, inFile);
    expect(await (await plain(url)).text()).to.equal('in');
    await api.post('/drive/files/bulk', { fileIds: [inFile], action: 'move', folderId: outside });
    expect((await plain(url)).status).to.equal(404);
  });

  it("when another account asks, then 404 on …/content, and a link signed for its key naming the first account's file is 404", async () => {
    const other = await stack.createAccount({ scopes: [...DRIVE] });
    const oc = client(stack.baseUrl, other.key);
    const r = await oc.get(`/drive/files/${binId}/content`);
    expect(r.status).to.equal(404);
    expect(r.text).to.not.include('downloads');
    const forged = await plain(driveDownloadLink(stack.config, { fileId: binId, keyId: other.keyId }).url);
    expect(forged.status).to.equal(404);
    expect((await oc.get('/drive/files/dfl_00000000000000000000/content')).status).to.equal(404);
  });

  it('when the key lacks drive:read, then …/content is 403; a malformed id is 400 naming id', async () => {
    for (const scopes of [['read', 'write'], ['drive:write']] as const) {
      const k = await stack.createAccount({ scopes: [...scopes] });
      const r = await client(stack.baseUrl, k.key).get(`/drive/files/${binId}/content`);
      expect(r.status, scopes.join()).to.equal(403);
      expect(r.body.error.code).to.equal('forbidden');
    }
    const bad = await api.get('/drive/files/a.b/content');
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.match(/^id: /);
  });

  it('when a team member downloads a team-drive file, then it works; once removed from the team, the live link is 404', async () => {
    const member = await stack.createAccount({ scopes: [...DRIVE] });
    const teams = createTeams(stack.rt.store);
    const team = await teams.createTeam({ name: 'Design', ownerAccountId: owner.accountId });
    await teams.addMember(team._id, member.accountId, 'viewer');
    const data = Buffer.from('team bytes');
    const fileId = `dfl_team${randomBytes(8).toString('hex').slice(0, 16)}`;
    const blob = await putDriveBlob(stack.rt.store, data, {
      accountId: owner.accountId,
      contentType: 'text/plain',
      filename: 'team.txt',
      fileId,
    });
    const now = new Date();
    await files().insertOne({
      _id: fileId,
      accountId: owner.accountId,
      teamId: team._id,
      name: 'team.txt',
      nameKey: 'team.txt',
      ext: 'txt',
      kind: 'text',
      mimeType: 'text/plain',
      sizeBytes: data.length,
      folderId: null,
      isStarred: false,
      tags: [],
      description: '',
      blobId: blob.blobId,
      sha256: blob.sha256,
      trashedAt: null,
      lastAccessedAt: null,
      text: { status: 'none', chars: 0, truncated: false, engine: null, error: null, at: null },
      version: 1,
      createdAt: now,
      updatedAt: now,
    } as DriveFileDoc);
    const mc = client(stack.baseUrl, member.key);
    const url = await linkOf(mc, fileId);
    expect(await (await plain(url)).text()).to.equal('team bytes');
    await teams.removeMember(team._id, member.accountId);
    expect((await plain(url)).status).to.equal(404);
    expect((await mc.get(`/drive/files/${fileId}/content`)).status).to.equal(404);
  });

  it('when 20 byte ranges are read, then lastAccessedAt is set with at most one or two writes (coalesced), and shows in the file', async () => {
    const id = await upload(api, { name: 'video.bin', contentBase64: randomBytes(4096).toString('base64') });
    const url = await linkOf(api, id);
    const writes: CommandStartedEvent[] = [];
    const watch = (e: CommandStartedEvent) => {
      if (
        e.commandName === 'update' &&
        e.command.update === COLLECTIONS.driveFiles &&
        JSON.stringify(e.command.updates).includes('lastAccessedAt')
      )
        writes.push(e);
    };
    stack.db.client.on('commandStarted', watch);
    try {
      for (let i = 0; i < 20; i++) {
        const r = await plain(url, { range: `bytes=${i * 100}-${i * 100 + 99}` });
        expect(r.status).to.equal(206);
        await r.arrayBuffer();
      }
      await new Promise((res) => setTimeout(res, 200));
    } finally {
      stack.db.client.off('commandStarted', watch);
    }
    expect(writes.length).to.be.within(1, 2);
    const doc = await files().findOne({ _id: id });
    expect(doc!.lastAccessedAt).to.be.instanceOf(Date);
    expect(Date.now() - doc!.lastAccessedAt!.getTime()).to.be.lessThan(10_000);
    expect((await api.get(`/drive/files/${id}`)).body.id).to.equal(id);
    const list = await api.get('/drive/files?limit=100');
    expect(list.body.data.find((f: { id: string }) => f.id === id).lastAccessedAt).to.equal(
      doc!.lastAccessedAt!.toISOString(),
    );
  });
});
