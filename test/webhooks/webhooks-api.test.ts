import { expect } from 'chai';
import { start as startApi, type ApiServer } from '../../api/app';
import { EVENT_NAMES, JOB_EVENTS_EMITTED, SUBSCRIBABLE_EVENT_NAMES } from '../../contracts/events';
import { JOB_TYPES } from '../../contracts/registry';
import { poolDefinitions } from '../../workers/pools';
import { loadConfig } from '../../platform/infra/config';
import { createSecretBox } from '../../platform/webhooks/secrets';
import type { WebhookDoc } from '../../platform/webhooks/webhooks.repository';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { createWebhook, readDb } from './helpers';

/** SPEC 6.1, verbatim. */
const SPEC_EVENT_NAMES = [
  'project.created',
  'project.updated',
  'project.shared',
  'project.deleted',
  'notes_movie.completed',
  'notes_movie.failed',
  'team.member_added',
  'team.member_removed',
  'export.completed',
  'meeting.completed',
  'code_canvas.iteration_complete',
  'code_canvas.iteration_failed',
  'code_canvas.published',
  'podcast.completed',
  'podcast.failed',
  'skill.installed',
  'evi.run_completed',
  'evi.run_failed',
  'video.completed',
  'video.failed',
  'song.completed',
  'song.failed',
  'code_build.completed',
  'code_build.failed',
  'research.completed',
  'research.failed',
  'space.completed',
  'space.failed',
  'presentation.completed',
  'presentation.failed',
  'email.received',
  'form.submitted',
];

describe('webhooks API', () => {
  let stack: Stack;
  const url = 'http://127.0.0.1:9/hook'; // loopback, allowed by ALLOW_LOOPBACK_URLS in this stack; never called here
  before(async () => {
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true' }, workers: false, scheduler: false });
  });
  after(() => stack.stop());

  it('when the registry is read, then it holds exactly the SPEC 6.1 names and only emitted ones are subscribable', () => {
    expect([...EVENT_NAMES].sort()).to.deep.equal([...SPEC_EVENT_NAMES].sort());
    expect(SUBSCRIBABLE_EVENT_NAMES).to.include.members(['code_build.completed', 'code_build.failed']);
    expect(SUBSCRIBABLE_EVENT_NAMES).to.not.include('notes_movie.completed');
  });

  it('when a job type has a pool with an engine, then its events are marked emitted, and only then', () => {
    for (const type of JOB_TYPES)
      expect(JOB_EVENTS_EMITTED[type], `${type}: flip JOB_EVENTS_EMITTED in contracts/events.ts`).to.equal(
        type in poolDefinitions,
      );
  });

  it('when a webhook is created, then 201 returns the secret once, reads never return it, and the database holds it encrypted', async () => {
    const { key, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const r = await api.post('/webhooks', {
      name: 'builds',
      url,
      events: ['code_build.completed', 'code_build.failed'],
    });
    expect(r.status).to.equal(201);
    expect(r.body).to.include({ name: 'builds', url, isActive: true, consecutiveFailures: 0 });
    expect(r.body.id).to.match(/^wh_/);
    expect(r.body.secret).to.match(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(r.body.events).to.deep.equal(['code_build.completed', 'code_build.failed']);

    const got = await api.get(`/webhooks/${r.body.id}`);
    expect(got.status).to.equal(200);
    expect(got.body).to.not.have.property('secret');
    expect(got.text).to.not.include(r.body.secret);
    const list = await api.get('/webhooks');
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(1);
    expect(list.text).to.not.include(r.body.secret);
    const patched = await api.patch(`/webhooks/${r.body.id}`, { name: 'renamed' });
    expect(patched.text).to.not.include(r.body.secret);

    const [doc] = await readDb<WebhookDoc>(stack.config, 'webhooks', { _id: r.body.id });
    expect(doc!.accountId).to.equal(accountId);
    expect(JSON.stringify(doc)).to.not.include(r.body.secret);
    expect(JSON.stringify(doc)).to.not.include(r.body.secret.slice(6));
    expect(doc!.secret.alg).to.equal('aes-256-gcm');
    const box = createSecretBox(stack.config.WEBHOOK_SECRET_KEY);
    expect(box.open(doc!.secret, doc!._id)).to.equal(r.body.secret);
    expect(() => box.open(doc!.secret, 'wh_other')).to.throw(); // bound to its webhook
    expect(() => createSecretBox('another-key-of-at-least-32-characters!!').open(doc!.secret, doc!._id)).to.throw();
  });

  it('when events name unknown, upcoming and not-yet-emitted names, then 400 names every one of them', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const r = await api.post('/webhooks', {
      name: 'x',
      url,
      events: [
        'code_build.completed',
        'nope.done',
        'comment.created',
        'template.published',
        'sheet.row_added',
        'podcast.completed',
        'notes_movie.failed',
        'also.bad',
      ],
    });
    expect(r.status).to.equal(400);
    expect(r.body.error.code).to.equal('validation_error');
    for (const bad of [
      'nope.done',
      'also.bad',
      'comment.created',
      'template.published',
      'sheet.row_added',
      'podcast.completed',
      'notes_movie.failed',
    ]) {
      expect(r.body.error.message).to.include(bad);
    }
    expect(r.body.error.message).to.match(/^events: /);
    expect(r.body.error.message).to.not.include('code_build.completed');
    const patch = await api.post('/webhooks', { name: 'x', url, events: ['code_build.completed'] });
    const p = await api.patch(`/webhooks/${patch.body.id}`, { events: ['podcast.failed', 'x.y'] });
    expect(p.status).to.equal(400);
    expect(p.body.error.message).to.include('podcast.failed').and.include('x.y');
  });

  it('when required fields are missing or malformed, then 400 names the field', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const cases: [unknown, RegExp][] = [
      [{ name: 'x', url }, /events: is required/],
      [{ name: 'x', url, events: [] }, /events: must name at least one event/],
      [{ name: 'x', url, events: 'code_build.completed' }, /events: /],
      [{ url, events: ['code_build.completed'] }, /name: is required/],
      [{ name: '', url, events: ['code_build.completed'] }, /name: must not be empty/],
      [{ name: 'x', events: ['code_build.completed'] }, /url: is required/],
      [{ name: 'x', url: 'not a url', events: ['code_build.completed'] }, /url: must be an absolute https URL/],
      [{ name: 'x', url: 'ftp://example.com/x', events: ['code_build.completed'] }, /url: must be an https URL/],
      [{ name: 'x', url: 'http://203.0.114.5/hook', events: ['code_build.completed'] }, /url: must be an https URL/],
      [
        { name: 'x', url: 'https://user:pw@127.0.0.1/hook', events: ['code_build.completed'] },
        /url: must not carry credentials/,
      ],
      [{ name: 'x', url, events: ['code_build.completed'], secret: 'mine' }, /secret: unknown field/],
    ];
    for (const [body, message] of cases) {
      const r = await api.post('/webhooks', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error.message, JSON.stringify(body)).to.match(message);
    }
    const hook = await createWebhook(api, { url });
    const empty = await api.patch(`/webhooks/${hook.id}`, {});
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.include('name a field to change');
    const typo = await api.patch(`/webhooks/${hook.id}`, { active: true });
    expect(typo.status).to.equal(400);
    expect(typo.body.error.message).to.include('active: unknown field');
    const badBool = await api.patch(`/webhooks/${hook.id}`, { isActive: 'yes' });
    expect(badBool.status).to.equal(400);
    expect(badBool.body.error.message).to.include('isActive: must be a boolean');
  });

  it('when targets resolve to private, link-local, metadata or (without the development setting) loopback addresses, then 400 at creation and on PATCH', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    for (const target of [
      'https://10.0.0.8/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[fd00:ec2::254]/',
      'https://[::ffff:10.1.2.3]/x',
      'https://100.64.0.1/',
    ]) {
      const r = await api.post('/webhooks', { name: 'x', url: target, events: ['code_build.completed'] });
      expect(r.status, target).to.equal(400);
      expect(r.body.error.message, target).to.match(
        /^url: .*resolves to a (private|loopback|reserved IPv6 transition)/,
      );
    }
    const hook = await createWebhook(api, { url });
    const p = await api.patch(`/webhooks/${hook.id}`, { url: 'https://169.254.169.254/' });
    expect(p.status).to.equal(400);
    expect(p.body.error.message).to.match(/^url: /);

    // A deployment without ALLOW_LOOPBACK_URLS refuses loopback, over http and https alike.
    let strict: ApiServer | undefined;
    try {
      strict = await startApi(stack.config2({ ALLOW_LOOPBACK_URLS: 'false' }));
      const api2 = client(`http://127.0.0.1:${strict.port}/api/v1`, (await stack.createAccount()).key);
      for (const target of [
        'https://127.0.0.1/hook',
        'https://[::1]/hook',
        'http://127.0.0.1:9/hook',
        'https://localhost/hook',
      ]) {
        const r = await api2.post('/webhooks', { name: 'x', url: target, events: ['code_build.completed'] });
        expect(r.status, target).to.equal(400);
        expect(r.body.error.message, target).to.match(/^url: /);
      }
    } finally {
      await strict?.stop();
    }
  });

  it('when a target is an IPv6 transition form of any address (mapped, translated, NAT64, 6to4, Teredo, discard), then 400 even with loopback allowed', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    for (const target of [
      'https://[::ffff:127.0.0.1]/hook', // IPv4-mapped loopback, which the URL parser writes [::ffff:7f00:1]
      'https://[::ffff:0:7f00:1]/hook', // IPv4-translated loopback
      'https://[::ffff:8.8.8.8]/hook', // IPv4-mapped public: refused whole, the IPv4 form is the way in
      'https://[64:ff9b::a9fe:a9fe]/', // NAT64 to the metadata address
      'https://[64:ff9b:1::a9fe:a9fe]/', // local-use NAT64
      'https://[2002:a9fe:a9fe::1]/', // 6to4
      'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', // Teredo
      'https://[100::1]/', // discard-only
    ]) {
      const r = await api.post('/webhooks', { name: 'x', url: target, events: ['code_build.completed'] });
      expect(r.status, target).to.equal(400);
      expect(r.body.error.code, target).to.equal('validation_error');
      expect(r.body.error.message, target).to.match(/^url: .* resolves to a reserved IPv6 transition address/);
    }
  });

  it('when an account has 10 webhooks, then the 11th is refused with 409 limit_exceeded until one is deleted', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    // Twelve at once: the slot index lets exactly ten through, even racing.
    const results = await Promise.all(
      [...Array(12).keys()].map((i) => api.post('/webhooks', { name: `h${i}`, url, events: ['code_build.completed'] })),
    );
    expect(results.filter((r) => r.status === 201)).to.have.length(10);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused.map((r) => r.status)).to.deep.equal([409, 409]);
    expect(refused[0]!.body.error.code).to.equal('limit_exceeded');
    expect(refused[0]!.body.error.message).to.include('at most 10 webhooks');
    expect((await api.get('/webhooks')).body.total).to.equal(10);

    const victim = results.find((r) => r.status === 201)!.body.id;
    expect((await api.delete(`/webhooks/${victim}`)).status).to.equal(204);
    expect((await api.post('/webhooks', { name: 'again', url, events: ['code_build.completed'] })).status).to.equal(
      201,
    );
    expect((await api.post('/webhooks', { name: 'over', url, events: ['code_build.completed'] })).status).to.equal(409);
  });

  it("when another account reads, changes or deletes a webhook, then 404, and lists show only the caller's own", async () => {
    const a = client(stack.baseUrl, (await stack.createAccount()).key);
    const b = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(a, { url });
    expect((await b.get(`/webhooks/${hook.id}`)).status).to.equal(404);
    expect((await b.patch(`/webhooks/${hook.id}`, { name: 'mine now' })).status).to.equal(404);
    expect((await b.delete(`/webhooks/${hook.id}`)).status).to.equal(404);
    expect((await b.get(`/webhooks/${hook.id}/deliveries`)).status).to.equal(404);
    expect((await b.get('/webhooks')).body).to.deep.equal({ data: [], total: 0 });
    const still = await a.get(`/webhooks/${hook.id}`);
    expect(still.status).to.equal(200);
    expect(still.body.name).to.equal('test hook');
    expect((await a.get('/webhooks/wh_unknown')).status).to.equal(404);
  });

  it('when a webhook is updated and deleted, then the changes read back and it is gone', async () => {
    const api = client(stack.baseUrl, (await stack.createAccount()).key);
    const hook = await createWebhook(api, { url });
    const r = await api.patch(`/webhooks/${hook.id}`, {
      name: 'n2',
      url: 'http://127.0.0.1:10/x',
      events: ['code_build.failed', 'code_build.failed'],
      isActive: false,
    });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ name: 'n2', url: 'http://127.0.0.1:10/x', isActive: false, disabledReason: 'manual' });
    expect(r.body.events).to.deep.equal(['code_build.failed']);
    expect(r.body.disabledAt).to.be.a('string');
    const on = await api.patch(`/webhooks/${hook.id}`, { isActive: true });
    expect(on.body).to.include({ isActive: true, disabledAt: null, disabledReason: null, consecutiveFailures: 0 });
    expect((await api.delete(`/webhooks/${hook.id}`)).status).to.equal(204);
    expect((await api.get(`/webhooks/${hook.id}`)).status).to.equal(404);
  });

  it('when the key lacks the scope, then 403', async () => {
    const ro = client(stack.baseUrl, (await stack.createAccount({ scopes: ['read'] })).key);
    expect((await ro.post('/webhooks', { name: 'x', url, events: ['code_build.completed'] })).status).to.equal(403);
    expect((await ro.get('/webhooks')).status).to.equal(200);
  });

  it('when /openapi is fetched, then the webhook schemas, the event enum and the bodies are in it', async () => {
    const r = await client(stack.baseUrl).get('/openapi');
    expect(r.status).to.equal(200);
    const s = r.body.components.schemas;
    for (const id of [
      'Webhook',
      'WebhookCreated',
      'WebhookCreate',
      'WebhookUpdate',
      'WebhookDelivery',
      'WebhookDeliveryList',
      'WebhookEventPayload',
      'EventName',
    ]) {
      expect(s, id).to.have.property(id);
    }
    expect(s.EventName.enum).to.deep.equal(SUBSCRIBABLE_EVENT_NAMES);
    expect(s.WebhookCreated.properties).to.have.property('secret');
    expect(s.Webhook.properties).to.not.have.property('secret');
    expect(s.WebhookDelivery.required).to.include.members([
      'eventId',
      'event',
      'attempt',
      'statusCode',
      'durationMs',
      'responseExcerpt',
      'error',
      'at',
    ]);
    const create = r.body.paths['/webhooks'].post;
    expect(create['x-implemented']).to.equal(true);
    expect(create.requestBody.content['application/json'].schema.$ref).to.equal('#/components/schemas/WebhookCreate');
    expect(create.responses).to.have.property('201');
    const deliveries = r.body.paths['/webhooks/{id}/deliveries'].get;
    expect(deliveries.parameters.map((p: { name: string }) => p.name)).to.include.members(['id', 'limit', 'cursor']);
  });

  it('when production starts with the development webhook key, then the configuration is refused', () => {
    const prod = { NODE_ENV: 'production', ASSET_SIGNING_SECRET: 'x'.repeat(40) };
    expect(() => loadConfig(prod)).to.throw(/WEBHOOK_SECRET_KEY: must be set in production/);
    expect(() => loadConfig({ ...prod, WEBHOOK_SECRET_KEY: 'k'.repeat(40) })).to.not.throw();
    expect(() => loadConfig({ WEBHOOK_RETRY_DELAYS_MS: '1000,x' })).to.throw(/WEBHOOK_RETRY_DELAYS_MS/);
    expect(loadConfig({}).WEBHOOK_RETRY_DELAYS_MS).to.deep.equal([1000, 3000]);
    expect(loadConfig({}).WEBHOOK_ATTEMPT_TIMEOUT_MS).to.equal(5000);
  });
});
