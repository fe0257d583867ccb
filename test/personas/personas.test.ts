import { expect } from 'chai';
import { Persona, PersonaConversation, PersonaDeployment } from '../../contracts/personas';
import { client, type Client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { liveConnect } from '../live/helpers';

const COMPLETE = {
  name: 'Ada',
  instructions: 'You are Ada, a patient maths tutor.',
  greeting: 'Hi, I am Ada.',
  faceId: 'aurora',
  voice: 'en-gb-female',
  tools: ['create_notes', 'web_search'],
};

describe('personas API: personas, versions, deployments, conversations, events, faces', function () {
  this.timeout(60_000);
  let stack: Stack;
  let api: Client;
  let other: Client;
  let noAi: Client;
  before(async () => {
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'speech' } });
    api = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
    other = client(stack.baseUrl, (await stack.createAccount({ credits: 1000 })).key);
    noAi = client(stack.baseUrl, (await stack.createAccount({ credits: 1000, scopes: ['read', 'write'] })).key);
  });
  after(() => stack?.stop());

  const created = async (c: Client, body: Record<string, unknown> = COMPLETE) => {
    const r = await c.post('/personas', body);
    expect(r.status, r.text).to.equal(201);
    return r.body;
  };
  const published = async (c: Client = api) => {
    const p = await created(c);
    const r = await c.post(`/personas/${p.id}/publish`);
    expect(r.status, r.text).to.equal(200);
    return r.body;
  };
  const deployed = async (c: Client, personaId: string, body: Record<string, unknown>) => {
    const r = await c.post(`/personas/${personaId}/deployments`, body);
    expect(r.status, r.text).to.equal(201);
    return r.body;
  };
  const expect400 = async (p: Promise<{ status: number; body: any; text: string }>, message: RegExp) => {
    const r = await p;
    expect(r.status, r.text).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    expect(r.body.error.message).to.match(message);
  };
  const balance = async (c: Client) => (await c.get('/account/credits')).body.balance as number;

  it('when the faces are listed, then there are at least 6, and each preview URL serves an SVG without a key', async () => {
    const r = await api.get('/personas/faces');
    expect(r.status, r.text).to.equal(200);
    expect(r.body.total).to.be.at.least(6);
    const svgs = new Set<string>();
    for (const f of r.body.data) {
      expect(f).to.have.keys('id', 'name', 'description', 'previewUrl');
      const img = await fetch(f.previewUrl);
      expect(img.status).to.equal(200);
      expect(img.headers.get('content-type')).to.match(/^image\/svg\+xml/);
      const text = await img.text();
      expect(text).to.match(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
      svgs.add(text);
    }
    expect(svgs.size, 'every face is drawn differently').to.equal(r.body.total);
    expect((await fetch(`${stack.baseUrl}/persona-faces/nobody.svg`)).status).to.equal(404);
  });

  it('when a persona is created, then 201 is a draft at version 1 with the voice resolved, and it is listed newest first and readable', async () => {
    const r = await api.post('/personas', { name: 'Draft only' });
    expect(r.status, r.text).to.equal(201);
    expect(() => Persona.parse(r.body)).to.not.throw();
    expect(r.body.id).to.match(/^per_[0-9a-z]{20}$/);
    expect(r.body).to.include({
      name: 'Draft only',
      status: 'draft',
      publishedVersion: null,
      published: null,
      version: 1,
      instructions: '',
      greeting: '',
      faceId: null,
      voice: 'en-us-female',
    });
    expect(r.headers.get('etag')).to.equal('"1"');
    const second = await created(api, { ...COMPLETE, name: 'Second' });
    const list = await api.get('/personas?limit=1');
    expect(list.status).to.equal(200);
    expect(list.body.data.map((p: any) => p.id)).to.deep.equal([second.id]);
    expect(list.body.cursor).to.be.a('string');
    const next = await api.get(`/personas?limit=1&cursor=${list.body.cursor}`);
    expect(next.body.data.map((p: any) => p.id)).to.deep.equal([r.body.id]);
    expect((await api.get(`/personas/${r.body.id}`)).body).to.deep.equal(r.body);
  });

  it('when a persona body breaks a rule, then 400 names the field', async () => {
    await expect400(api.post('/personas', {}), /^name: /);
    await expect400(api.post('/personas', { name: 'x'.repeat(81) }), /^name: must be at most 80 characters/);
    await expect400(
      api.post('/personas', { name: 'x', instructions: 'i'.repeat(8001) }),
      /^instructions: must be at most 8000 characters/,
    );
    await expect400(
      api.post('/personas', { name: 'x', greeting: 'g'.repeat(501) }),
      /^greeting: must be at most 500 characters/,
    );
    await expect400(
      api.post('/personas', { name: 'x', voice: 'klingon-deep' }),
      /^voice: unknown voice "klingon-deep"/,
    );
    await expect400(api.post('/personas', { name: 'x', faceId: 'nobody' }), /^faceId: unknown face "nobody"/);
    await expect400(
      api.post('/personas', { name: 'x', tools: ['create_notes', 'launch_rockets'] }),
      /^tools\.1: unknown tool "launch_rockets"/,
    );
    await expect400(api.post('/personas', { name: 'x', colour: 'red' }), /colour/);
  });

  it('when a persona is patched with If-Match, then only the passed fields change; a stale If-Match is 412 precondition_failed', async () => {
    const p = await created(api, { name: 'Patchy', description: 'keep me' });
    const r = await api.patch(`/personas/${p.id}`, { greeting: 'Hello!' }, { 'if-match': '"1"' });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.include({ greeting: 'Hello!', description: 'keep me', name: 'Patchy', version: 2 });
    const stale = await api.patch(`/personas/${p.id}`, { name: 'Lost' }, { 'if-match': '"1"' });
    expect(stale.status).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    expect((await api.get(`/personas/${p.id}`)).body.name).to.equal('Patchy');
    await expect400(api.patch(`/personas/${p.id}`, {}), /name a field to change/);
  });

  it('when an incomplete persona is published, then 400 names what is missing; a complete one freezes version 1, and a later PATCH leaves it unchanged until the next publish', async () => {
    const p = await created(api, { name: 'Half' });
    await expect400(
      api.post(`/personas/${p.id}/publish`),
      /instructions: required to publish.*greeting: required to publish.*faceId: required to publish/,
    );
    const full = await created(api);
    const pub = await api.post(`/personas/${full.id}/publish`);
    expect(pub.status, pub.text).to.equal(200);
    expect(pub.body).to.include({ status: 'published', publishedVersion: 1 });
    expect(pub.body.published).to.include({ version: 1, name: 'Ada', greeting: 'Hi, I am Ada.' });
    // Unchanged: publishing again keeps version 1.
    expect((await api.post(`/personas/${full.id}/publish`)).body.publishedVersion).to.equal(1);

    const edited = await api.patch(`/personas/${full.id}`, { greeting: 'Hello again.' });
    expect(edited.body).to.include({ status: 'draft', greeting: 'Hello again.', publishedVersion: 1 });
    expect(edited.body.published).to.include({ version: 1, greeting: 'Hi, I am Ada.' });
    const v2 = await api.post(`/personas/${full.id}/publish`);
    expect(v2.body).to.include({ status: 'published', publishedVersion: 2 });
    expect(v2.body.published).to.include({ version: 2, greeting: 'Hello again.' });
    const stored = await stack.db.db
      .collection('persona_versions')
      .find({ personaId: full.id })
      .sort({ version: 1 })
      .toArray();
    expect(stored.map((v: any) => [v.version, v.snapshot.greeting])).to.deep.equal([
      [1, 'Hi, I am Ada.'],
      [2, 'Hello again.'],
    ]);
  });

  it('when version 2 is published, then a deployment of version 1 still starts conversations on version 1, and a stale If-Match on publish is 412', async () => {
    const p = await published();
    const v1 = await deployed(api, p.id, { channel: 'api' });
    const edited = (await api.patch(`/personas/${p.id}`, { voice: 'fr-male' })).body;
    const stale = await api.post(`/personas/${p.id}/publish`, undefined, { 'if-match': `"${p.version}"` });
    expect(stale.status).to.equal(412);
    expect(stale.body.error.code).to.equal('precondition_failed');
    expect(
      (await api.post(`/personas/${p.id}/publish`, undefined, { 'if-match': `"${edited.version}"` })).body
        .publishedVersion,
    ).to.equal(2);
    const latest = await deployed(api, p.id, { channel: 'api' });
    expect(latest.version).to.equal(2);
    const conv = await api.post(`/personas/${p.id}/conversations`, { deploymentId: v1.id });
    expect(conv.body.version).to.equal(1);
    const session = await stack.db.db.collection('live_sessions').findOne({ _id: conv.body.connect.sessionId } as any);
    expect(session?.voice, "the session speaks with version 1's voice").to.equal('en-gb-female');
    await api.post(`/personas/${p.id}/conversations/${conv.body.id}/end`);
  });

  it('when deployments are made, then each channel gets its connect details, web origins are validated, a draft-only persona is 409 persona_not_published, and they are listed', async () => {
    const draft = await created(api, { name: 'Never published' });
    const refused = await api.post(`/personas/${draft.id}/deployments`, { channel: 'api' });
    expect(refused.status).to.equal(409);
    expect(refused.body.error.code).to.equal('persona_not_published');

    const p = await published();
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'web' }),
      /^allowedOrigins: is required for the web channel/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'web', allowedOrigins: ['http://shop.example.com'] }),
      /^allowedOrigins\.0: must be an https origin/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'web', allowedOrigins: ['https://shop.example.com/path'] }),
      /^allowedOrigins\.0: must be an https origin/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'web', allowedOrigins: [] }),
      /^allowedOrigins: must have at least 1 origin/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'voice', allowedOrigins: ['https://a.example'] }),
      /^allowedOrigins: is only for the web channel/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'fax' }),
      /^channel: must be one of web, voice, api/,
    );
    await expect400(
      api.post(`/personas/${p.id}/deployments`, { channel: 'api', version: 2 }),
      /^version: the persona has published versions 1 to 1/,
    );

    const web = await deployed(api, p.id, {
      channel: 'web',
      allowedOrigins: ['https://Shop.example.com', 'https://shop.example.com:8443'],
    });
    expect(() => PersonaDeployment.parse(web)).to.not.throw();
    expect(web).to.include({ channel: 'web', version: 1, name: 'web v1', personaId: p.id });
    expect(web.allowedOrigins).to.deep.equal(['https://shop.example.com', 'https://shop.example.com:8443']);
    expect(web.connect.snippet).to.include(`data-deployment="${web.id}"`);
    const script = await fetch(web.connect.scriptUrl);
    expect(script.status).to.equal(200);
    expect(script.headers.get('content-type')).to.match(/^text\/javascript/);
    expect(await script.text()).to.include('new WebSocket(');
    const voice = await deployed(api, p.id, { channel: 'voice', name: 'Front desk' });
    expect(voice.connect.realtimeUrl).to.match(/^ws:\/\/127\.0\.0\.1:\d+\/realtime$/);
    expect(voice.allowedOrigins).to.deep.equal([]);
    const apiDep = await deployed(api, p.id, { channel: 'api' });
    expect(apiDep.connect.conversationsUrl).to.equal(`${stack.baseUrl}/personas/${p.id}/conversations`);

    const list = await api.get(`/personas/${p.id}/deployments`);
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(3);
    expect(list.body.data.map((d: any) => d.id)).to.deep.equal([apiDep.id, voice.id, web.id]);
  });

  it('when a voice conversation starts, then its token connects to the realtime engine, a text turn is recorded, and ending it records duration and credits; events are listed oldest first', async () => {
    const p = await published();
    const d = await deployed(api, p.id, { channel: 'voice' });
    const before = await balance(api);
    const start = await api.post(`/personas/${p.id}/conversations`, { deploymentId: d.id });
    expect(start.status, start.text).to.equal(201);
    expect(() => PersonaConversation.parse(start.body)).to.not.throw();
    expect(start.body).to.include({
      personaId: p.id,
      deploymentId: d.id,
      channel: 'voice',
      version: 1,
      status: 'active',
      endedAt: null,
      durationMs: null,
    });
    expect(start.body.id).to.match(/^pconv_/);
    expect(start.body.connect).to.include({ audio: true, realtimeUrl: d.connect.realtimeUrl });
    expect(start.body.creditsUsed).to.be.above(0);
    expect(await balance(api)).to.equal(before - start.body.creditsUsed);

    const c = liveConnect(start.body.connect.realtimeUrl, { token: start.body.connect.token });
    const started = await c.next('session.started');
    expect(started).to.include({
      sessionId: start.body.connect.sessionId,
      voice: 'en-gb-female',
      persona: `persona:${p.id}@1`,
    });
    expect((await c.next('assistant.text')).text, 'the greeting is the first assistant turn').to.equal('Hi, I am Ada.');
    await c.next('resumption');
    c.send({ type: 'input_text', text: 'hello there' });
    await c.next('resumption');
    await new Promise((r) => setTimeout(r, 150));

    const mid = await api.get(`/personas/${p.id}/conversations/${start.body.id}/events`);
    expect(mid.body.data.map((e: any) => e.type)).to.deep.equal([
      'started',
      'assistant_turn',
      'user_turn',
      'assistant_turn',
    ]);
    const end = await api.post(`/personas/${p.id}/conversations/${start.body.id}/end`);
    expect(end.status, end.text).to.equal(200);
    expect(end.body).to.include({ status: 'ended', creditsUsed: start.body.creditsUsed, connect: null });
    expect(end.body.durationMs).to.be.at.least(100);
    expect(Date.parse(end.body.endedAt) - Date.parse(end.body.startedAt)).to.equal(end.body.durationMs);
    c.close();
    // Idempotent: the same body again.
    expect((await api.post(`/personas/${p.id}/conversations/${start.body.id}/end`)).body).to.deep.equal(end.body);

    const events = await api.get(`/personas/${p.id}/conversations/${start.body.id}/events`);
    expect(events.status).to.equal(200);
    expect(events.body.data.map((e: any) => e.type)).to.deep.equal([
      'started',
      'assistant_turn',
      'user_turn',
      'assistant_turn',
      'ended',
    ]);
    expect(events.body.data[1].text).to.equal('Hi, I am Ada.');
    expect(events.body.data[2].text).to.equal('hello there');
    expect(events.body.data[3].text).to.be.a('string').and.not.equal('');
    expect(events.body.data[4].data).to.deep.equal({
      durationMs: end.body.durationMs,
      creditsUsed: end.body.creditsUsed,
    });
    const ats = events.body.data.map((e: any) => Date.parse(e.at));
    expect([...ats].sort((x, y) => x - y)).to.deep.equal(ats);
    const paged = await api.get(`/personas/${p.id}/conversations/${start.body.id}/events?limit=3`);
    const rest = await api.get(
      `/personas/${p.id}/conversations/${start.body.id}/events?limit=3&cursor=${paged.body.cursor}`,
    );
    expect([...paged.body.data, ...rest.body.data].map((e: any) => e.id)).to.deep.equal(
      events.body.data.map((e: any) => e.id),
    );

    // The ended session's token no longer connects.
    const again = liveConnect(start.body.connect.realtimeUrl, { token: start.body.connect.token });
    expect((await again.closed).code).to.be.oneOf([4401, 4403]);
  });

  it('when web and api conversations start, then each gets a text-only realtime token; a key without ai is 403; an unknown deployment is 404', async () => {
    const p = await published();
    const web = await deployed(api, p.id, { channel: 'web', allowedOrigins: ['https://shop.example.com'] });
    const apiDep = await deployed(api, p.id, { channel: 'api' });
    for (const d of [web, apiDep]) {
      const r = await api.post(`/personas/${p.id}/conversations`, { deploymentId: d.id });
      expect(r.status, r.text).to.equal(201);
      expect(r.body).to.include({ channel: d.channel, status: 'active' });
      expect(r.body.connect).to.include({ audio: false });
      expect(r.body.connect.token).to.be.a('string');
      const end = await api.post(`/personas/${p.id}/conversations/${r.body.id}/end`);
      expect(end.body.status).to.equal('ended');
    }
    const missing = await api.post(`/personas/${p.id}/conversations`, { deploymentId: 'pdep_00000000000000000000' });
    expect(missing.status).to.equal(404);
    await expect400(api.post(`/personas/${p.id}/conversations`, {}), /^deploymentId: /);

    const mine = await published(noAi);
    const dep = await deployed(noAi, mine.id, { channel: 'api' });
    const forbidden = await noAi.post(`/personas/${mine.id}/conversations`, { deploymentId: dep.id });
    expect(forbidden.status).to.equal(403);
    expect(forbidden.body.error.message).to.match(/ai scope/);
  });

  it('when another account names a persona, deployment or conversation, then every route answers 404 and changes nothing', async () => {
    const p = await published();
    const d = await deployed(api, p.id, { channel: 'api' });
    const conv = (await api.post(`/personas/${p.id}/conversations`, { deploymentId: d.id })).body;
    const own = await published(other);
    const calls: [string, string, unknown?][] = [
      ['GET', `/personas/${p.id}`],
      ['PATCH', `/personas/${p.id}`, { name: 'mine now' }],
      ['DELETE', `/personas/${p.id}`],
      ['POST', `/personas/${p.id}/publish`],
      ['GET', `/personas/${p.id}/deployments`],
      ['POST', `/personas/${p.id}/deployments`, { channel: 'api' }],
      ['POST', `/personas/${p.id}/conversations`, { deploymentId: d.id }],
      ['POST', `/personas/${p.id}/conversations/${conv.id}/end`],
      ['GET', `/personas/${p.id}/conversations/${conv.id}/events`],
      // Their own persona with the other account's deployment and conversation.
      ['POST', `/personas/${own.id}/conversations`, { deploymentId: d.id }],
      ['POST', `/personas/${own.id}/conversations/${conv.id}/end`],
      ['GET', `/personas/${own.id}/conversations/${conv.id}/events`],
    ];
    for (const [method, path, body] of calls) {
      const r = await other.call(method, path, body);
      expect(r.status, `${method} ${path}: ${r.text}`).to.equal(404);
      expect(r.body.error.code).to.equal('not_found');
    }
    expect((await other.get('/personas')).body.data.map((x: any) => x.id)).to.not.include(p.id);
    const after = await api.get(`/personas/${p.id}`);
    expect(after.body).to.include({ name: 'Ada', version: p.version });
    expect(
      (await api.get(`/personas/${p.id}/conversations/${conv.id}/events`)).body.data.map((e: any) => e.type),
    ).to.deep.equal(['started']);
  });

  it('when a persona is deleted, then 204, its deployments and conversations go with it, and its active session token stops connecting', async () => {
    const p = await published();
    const d = await deployed(api, p.id, { channel: 'voice' });
    const conv = (await api.post(`/personas/${p.id}/conversations`, { deploymentId: d.id })).body;
    const del = await api.delete(`/personas/${p.id}`);
    expect(del.status).to.equal(204);
    expect((await api.get(`/personas/${p.id}`)).status).to.equal(404);
    expect((await api.get(`/personas/${p.id}/deployments`)).status).to.equal(404);
    expect(await stack.db.db.collection('persona_deployments').countDocuments({ personaId: p.id })).to.equal(0);
    expect(await stack.db.db.collection('persona_conversations').countDocuments({ personaId: p.id })).to.equal(0);
    const c = liveConnect(conv.connect.realtimeUrl, { token: conv.connect.token });
    expect((await c.closed).code).to.equal(4403);
    expect((await api.delete(`/personas/${p.id}`)).status).to.equal(404);
  });
});
