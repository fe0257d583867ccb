import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { createConsoleQueries } from '../../platform/console/console.repository';
import { consoleRoutes } from '../../api/console/console.routes';
import { createSignInLinks } from '../../platform/console/sessions.repository';
import { requestId } from '../../api/middleware/request-id';
import { createAuditRecorder } from '../../platform/audit/audit.recorder';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { csrfOf, get, origin, post, sessionCookie, signIn, tokenOf } from './console-client';

describe('developer console over HTTP', function () {
  this.timeout(60_000);
  let stack: Stack;
  let a: { accountId: string; key: string; keyId: string };
  let b: { accountId: string; key: string; keyId: string };

  before(async () => {
    stack = await startStack({ workers: false, scheduler: false, env: { ALLOW_LOOPBACK_URLS: 'true' } });
    a = await stack.createAccount();
    b = await stack.createAccount();
  });
  after(async () => stack?.stop());

  describe('signing in', () => {
    it('when a sign-in link is opened, then it shows a button and only the POST spends it', async () => {
      const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(a.accountId).issue();
      const landing = await get(stack, new URL(url).pathname + new URL(url).search);
      expect(landing.status).to.equal(200);
      expect(landing.text).to.contain('action="/console/sign-in"');
      expect(landing.setCookie).to.be.empty;
      const r = await post(stack, '/console/sign-in', { token: tokenOf(url) });
      expect(r.status).to.equal(303);
      expect(r.location).to.equal('/console');
    });

    it('when a session cookie is set over http, then it is HttpOnly, SameSite=Lax, Path=/console and not Secure', async () => {
      const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(a.accountId).issue();
      const r = await post(stack, '/console/sign-in', { token: tokenOf(url) });
      const c = r.setCookie.find((x) => x.startsWith('console_session='))!;
      expect(c)
        .to.match(/; HttpOnly/i)
        .and.match(/; SameSite=Lax/i)
        .and.match(/; Path=\/console/i)
        .and.match(/; Max-Age=43200/i);
      expect(c).not.to.match(/; Secure/i);
      // Only the hash of the session id is stored.
      const value = c.split(';')[0]!.split('=')[1]!;
      expect(
        await stack.db.db.collection(COLLECTIONS.consoleSessions).countDocuments({ _id: value as never }),
      ).to.equal(0);
    });

    it('when a link is used a second time, then it is refused with 400 and no cookie', async () => {
      const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(a.accountId).issue();
      expect((await post(stack, '/console/sign-in', { token: tokenOf(url) })).status).to.equal(303);
      const again = await post(stack, '/console/sign-in', { token: tokenOf(url) });
      expect(again.status).to.equal(400);
      expect(again.setCookie).to.be.empty;
      expect(again.text).to.contain('not valid');
    });

    it('when a link has expired, then it is refused with 400', async () => {
      const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(a.accountId).issue();
      await stack.db.db
        .collection(COLLECTIONS.consoleLinks)
        .updateMany({ accountId: a.accountId, usedAt: null }, { $set: { expiresAt: new Date(Date.now() - 1000) } });
      const r = await post(stack, '/console/sign-in', { token: tokenOf(url) });
      expect(r.status).to.equal(400);
      expect(r.setCookie).to.be.empty;
    });

    it('when a made-up token or none is posted, then it is refused with 400', async () => {
      expect((await post(stack, '/console/sign-in', { token: 'x'.repeat(43) })).status).to.equal(400);
      expect((await post(stack, '/console/sign-in', {})).status).to.equal(400);
    });

    it('when a page is asked without a session, then it redirects to the sign-in explanation', async () => {
      for (const path of [
        '/console',
        '/console/keys',
        '/console/audit',
        '/console/credits',
        '/console/webhooks',
        '/console/jobs',
      ]) {
        const r = await get(stack, path);
        expect(r.status, path).to.equal(303);
        expect(r.location, path).to.equal('/console/sign-in');
      }
      expect((await get(stack, '/console', 'console_session=forged')).location).to.equal('/console/sign-in');
      const help = await get(stack, '/console/sign-in');
      expect(help.status).to.equal(200);
      expect(help.text).to.contain('npm run console:link');
    });

    it('when a session is used after a minute, then its expiry slides forward and the cookie is set again; an expired one redirects', async () => {
      const s = await signIn(stack, a.accountId);
      const sessions = stack.db.db.collection<{ lastSeenAt: Date; expiresAt: Date }>(COLLECTIONS.consoleSessions);
      const old = new Date(Date.now() - 2 * 3_600_000);
      await sessions.updateMany({ accountId: a.accountId } as never, {
        $set: { lastSeenAt: old, expiresAt: new Date(Date.now() + 600_000) },
      });
      const r = await get(stack, '/console/keys', s.cookie);
      expect(r.status).to.equal(200);
      expect(r.setCookie.join()).to.contain('console_session=');
      const docs = await sessions.find({ accountId: a.accountId } as never).toArray();
      expect(Math.max(...docs.map((d) => d.expiresAt.getTime()))).to.be.greaterThan(Date.now() + 11 * 3_600_000);
      await sessions.updateMany({ accountId: a.accountId } as never, {
        $set: { expiresAt: new Date(Date.now() - 1000) },
      });
      expect((await get(stack, '/console/keys', s.cookie)).location).to.equal('/console/sign-in');
    });

    it('when signed out, then the old cookie opens nothing and the sign-out is in the audit log', async () => {
      const s = await signIn(stack, a.accountId);
      const out = await post(stack, '/console/sign-out', { _csrf: s.csrf }, s.cookie);
      expect(out.status).to.equal(303);
      expect((await get(stack, '/console/keys', s.cookie)).status).to.equal(303);
      expect(
        await stack.db.audit.countDocuments({
          accountId: a.accountId,
          via: 'console',
          route: '/console/sign-out',
          status: 303,
        }),
      ).to.be.greaterThan(0);
    });
  });

  describe('forms', () => {
    it('when a POST has no CSRF token or a wrong one, then it answers 403 and changes nothing', async () => {
      const s = await signIn(stack, a.accountId);
      const before = await stack.db.apiKeys.countDocuments({ accountId: a.accountId });
      expect((await post(stack, '/console/keys', { name: 'no csrf', scopes: 'read' }, s.cookie)).status).to.equal(403);
      expect(
        (await post(stack, '/console/keys', { name: 'bad csrf', scopes: 'read', _csrf: `${s.csrf}x` }, s.cookie))
          .status,
      ).to.equal(403);
      expect((await post(stack, `/console/keys/${a.keyId}/revoke`, {}, s.cookie)).status).to.equal(403);
      expect(await stack.db.apiKeys.countDocuments({ accountId: a.accountId })).to.equal(before);
      expect(
        (await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${a.key}` } })).status,
      ).to.equal(200);
    });

    it('when a key is created, then the full key is shown once, works on the API, and the list shows only its prefix', async () => {
      const s = await signIn(stack, a.accountId);
      const r = await post(stack, '/console/keys', { name: 'reader', scopes: ['read'], _csrf: s.csrf }, s.cookie);
      expect(r.status).to.equal(201);
      const key = /id="new-key-value">(svc_[^<]+)</.exec(r.text)![1]!;
      const me = await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${key}` } });
      expect(me.status).to.equal(200);
      expect(((await me.json()) as { key: { scopes: string[] } }).key.scopes).to.deep.equal(['read']);
      const list = await get(stack, '/console/keys', s.cookie);
      expect(list.text).to.contain(key.slice(0, 10)).and.not.contain(key);
      expect(r.setCookie.join()).not.to.contain('svc_');
    });

    it('when a key name holds markup, then the page shows it as text', async () => {
      const s = await signIn(stack, a.accountId);
      const name = '<script>alert("x")</script>';
      const r = await post(stack, '/console/keys', { name, scopes: 'read', _csrf: s.csrf }, s.cookie);
      expect(r.status).to.equal(201);
      const list = await get(stack, '/console/keys', s.cookie);
      expect(list.text).not.to.contain('<script>alert');
      expect(list.text).to.contain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    });

    it('when a key form is invalid, then it answers 400 with the reason and keeps the input', async () => {
      const s = await signIn(stack, a.accountId);
      const noScope = await post(stack, '/console/keys', { name: 'x', _csrf: s.csrf }, s.cookie);
      expect(noScope.status).to.equal(400);
      expect(noScope.text).to.contain('choose at least one');
      const badScope = await post(
        stack,
        '/console/keys',
        { name: 'kept name', scopes: 'admin', _csrf: s.csrf },
        s.cookie,
      );
      expect(badScope.status).to.equal(400);
      expect(badScope.text).to.contain('value="kept name"');
    });

    it("when a key is pinned to another account's Drive folder, then it answers 404 and creates nothing", async () => {
      const s = await signIn(stack, a.accountId);
      await stack.db.db.collection(COLLECTIONS.driveFolders).insertOne({
        _id: 'dfo_console_b' as never,
        accountId: b.accountId,
        teamId: null,
        name: 'B',
        parentFolderId: null,
        path: [],
      });
      const before = await stack.db.apiKeys.countDocuments({ accountId: a.accountId });
      const r = await post(
        stack,
        '/console/keys',
        { name: 'pinned', scopes: 'drive:read', folderPins: 'dfo_console_b', _csrf: s.csrf },
        s.cookie,
      );
      expect(r.status).to.equal(404);
      expect(await stack.db.apiKeys.countDocuments({ accountId: a.accountId })).to.equal(before);
    });

    it("when another account's key id is revoked, then it answers 404 and that key keeps working", async () => {
      const s = await signIn(stack, a.accountId);
      const r = await post(stack, `/console/keys/${b.keyId}/revoke`, { _csrf: s.csrf }, s.cookie);
      expect(r.status).to.equal(404);
      expect(r.text).to.contain('Not found');
      expect(
        (await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${b.key}` } })).status,
      ).to.equal(200);
    });

    it('when a key is revoked, then the next API call with it answers 401', async () => {
      const own = await stack.rt.accounts.forAccount(a.accountId).createKey({ name: 'to revoke' });
      const s = await signIn(stack, a.accountId);
      expect(
        (await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${own.key}` } })).status,
      ).to.equal(200);
      const r = await post(stack, `/console/keys/${own.doc._id}/revoke`, { _csrf: s.csrf }, s.cookie);
      expect(r.status).to.equal(303);
      expect(
        (await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${own.key}` } })).status,
      ).to.equal(401);
      expect((await get(stack, '/console/keys', s.cookie)).text).to.contain('revoked');
    });
  });

  describe('pages', () => {
    it("when the audit log is filtered, then it lists only the account's matching calls, and a bad filter answers 400", async () => {
      await fetch(`${stack.baseUrl}/account`, { headers: { authorization: `Bearer ${a.key}` } });
      await fetch(`${stack.baseUrl}/jobs/job_missing`, { headers: { authorization: `Bearer ${a.key}` } });
      await fetch(`${stack.baseUrl}/credits`, { headers: { authorization: `Bearer ${b.key}` } });
      const s = await signIn(stack, a.accountId);
      const all = await get(stack, '/console/audit', s.cookie);
      expect(all.status).to.equal(200);
      expect(all.text).to.contain('/api/v1/account').and.contain('/api/v1/jobs/:id').and.not.contain('/api/v1/credits');
      const only404 = await get(stack, '/console/audit?status=4xx', s.cookie);
      expect(only404.text).to.contain('/api/v1/jobs/:id');
      expect(/<table id="audit">[\s\S]*<\/table>/.exec(only404.text)![0]).not.to.contain('/api/v1/account<');
      const future = await get(stack, '/console/audit?from=2099-01-01', s.cookie);
      expect(future.text).to.contain('No calls match');
      expect((await get(stack, '/console/audit?status=abc', s.cookie)).status).to.equal(400);
      expect((await get(stack, '/console/audit?from=2024-13-45', s.cookie)).status).to.equal(400);
      expect((await get(stack, '/console/audit?cursor=garbage', s.cookie)).status).to.equal(400);
      expect((await get(stack, `/console/audit?keyId=${b.keyId}`, s.cookie)).text).to.contain('No calls match');
    });

    it('when the audit log has more than a page, then the Older link pages on without repeats or gaps', async () => {
      const c = await stack.createAccount();
      const now = Date.now();
      await stack.db.audit.insertMany(
        Array.from({ length: 60 }, (_, i) => ({
          _id: `aud_page${String(i).padStart(2, '0')}`,
          at: new Date(now - (i % 7) * 1000),
          accountId: c.accountId,
          keyId: c.keyId,
          method: 'GET',
          route: '/api/v1/account',
          status: 200,
          durationMs: 1,
          millicreditsCharged: 0,
          requestId: `req_page${i}`,
        })),
      );
      const s = await signIn(stack, c.accountId);
      const ids = (text: string) => [...text.matchAll(/req_page\d+/g)].map((m) => m[0]);
      const first = await get(stack, '/console/audit?route=%2Fapi%2Fv1%2Faccount', s.cookie);
      const older = /href="(\/console\/audit\?[^"]+)">Older/.exec(first.text)![1]!.replace(/&amp;/g, '&');
      expect(older).to.contain('route=%2Fapi%2Fv1%2Faccount');
      const second = await get(stack, older, s.cookie);
      expect(second.text).not.to.contain('>Older');
      const seen = [...ids(first.text), ...ids(second.text)];
      expect(ids(first.text)).to.have.length(50);
      expect(new Set(seen).size).to.equal(60);
    });

    it('when the overview, credits and jobs pages are opened, then they show the balance, the chart and the jobs table', async () => {
      const s = await signIn(stack, a.accountId);
      const overview = await get(stack, '/console', s.cookie);
      expect(overview.status).to.equal(200);
      expect(overview.text).to.contain('<svg').and.contain('Requests and credits per day');
      const credits = await get(stack, '/console/credits', s.cookie);
      expect(credits.text).to.match(/id="balance">1000</);
      expect((await get(stack, '/console/credits?cursor=garbage', s.cookie)).status).to.equal(400);
      expect((await get(stack, '/console/jobs', s.cookie)).status).to.equal(200);
      expect((await get(stack, '/console/nope', s.cookie)).status).to.equal(404);
    });

    it("when a disabled webhook is re-enabled, then it is active with its failures reset; another account's webhook id answers 404", async () => {
      const created = await fetch(`${stack.baseUrl}/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'ci hook', url: 'http://127.0.0.1:9/hook', events: ['code_build.completed'] }),
      });
      expect(created.status).to.equal(201);
      const hook = (await created.json()) as { id: string };
      await stack.db.db.collection(COLLECTIONS.webhooks).updateOne(
        { _id: hook.id as never },
        {
          $set: {
            isActive: false,
            consecutiveFailures: 20,
            disabledAt: new Date(),
            disabledReason: 'consecutive_failures',
          },
        },
      );
      const s = await signIn(stack, a.accountId);
      const page = await get(stack, `/console/webhooks/${hook.id}`, s.cookie);
      expect(page.text).to.contain('disabled').and.contain('Re-enable');
      const r = await post(stack, `/console/webhooks/${hook.id}/enable`, { _csrf: csrfOf(page.text) }, s.cookie);
      expect(r.status).to.equal(303);
      const after = (await (
        await fetch(`${stack.baseUrl}/webhooks/${hook.id}`, { headers: { authorization: `Bearer ${a.key}` } })
      ).json()) as { isActive: boolean; consecutiveFailures: number };
      expect(after).to.include({ isActive: true, consecutiveFailures: 0 });
      const sb = await signIn(stack, b.accountId);
      expect((await get(stack, `/console/webhooks/${hook.id}`, sb.cookie)).status).to.equal(404);
      expect((await post(stack, `/console/webhooks/${hook.id}/enable`, { _csrf: sb.csrf }, sb.cookie)).status).to.equal(
        404,
      );
      const trail = await stack.db.audit.find({ route: '/console/webhooks/:id/enable' }).toArray();
      expect(trail.map((e) => [e.accountId, e.status, e.keyId])).to.have.deep.members([
        [a.accountId, 303, ''],
        [b.accountId, 404, ''],
      ]);
    });

    it('when a page is served, then it forbids framing, caching and cross-site referrers and has a strict CSP', async () => {
      const s = await signIn(stack, a.accountId);
      const res = await fetch(`${stack.baseUrl.replace(/\/api\/v1$/, '')}/console/keys`, {
        headers: { cookie: s.cookie },
      });
      expect(res.headers.get('cache-control')).to.equal('no-store');
      expect(res.headers.get('x-frame-options')).to.equal('DENY');
      expect(res.headers.get('referrer-policy')).to.equal('same-origin');
      expect(res.headers.get('content-security-policy')).to.contain("default-src 'none'");
    });
  });

  describe('review fixes', () => {
    it('when a key is created and revoked in the console, then the audit log has two console entries naming the key id and no secret', async () => {
      const c = await stack.createAccount();
      const s = await signIn(stack, c.accountId);
      const created = await post(
        stack,
        '/console/keys',
        { name: 'audited', scopes: ['read'], _csrf: s.csrf },
        s.cookie,
      );
      expect(created.status).to.equal(201);
      const key = /id="new-key-value">(svc_[^<]+)</.exec(created.text)![1]!;
      const keyId = (await stack.db.apiKeys.findOne({ accountId: c.accountId, name: 'audited' }))!._id;
      expect((await post(stack, `/console/keys/${keyId}/revoke`, { _csrf: s.csrf }, s.cookie)).status).to.equal(303);
      const entries = await stack.db.audit.find({ accountId: c.accountId, via: 'console', keyId }).toArray();
      expect(entries.map((e) => [e.method, e.route, e.status, e.millicreditsCharged])).to.have.deep.members([
        ['POST', '/console/keys', 201, 0],
        ['POST', '/console/keys/:id/revoke', 303, 0],
      ]);
      expect(
        await stack.db.audit.countDocuments({
          accountId: c.accountId,
          via: 'console',
          route: '/console/sign-in',
          status: 303,
        }),
      ).to.equal(1);
      const stored = JSON.stringify(await stack.db.audit.find({ accountId: c.accountId }).toArray());
      for (const secret of [key, s.cookie.split('=')[1]!, s.csrf]) expect(stored).not.to.contain(secret);
      const page = await get(stack, `/console/audit?keyId=${keyId}`, s.cookie);
      expect(page.text).to.contain('/console/keys/:id/revoke').and.contain('>console</span>');
    });

    it('when the create-key form is shown, then read, write and ai are checked and the opt-in Drive scopes are not', async () => {
      const s = await signIn(stack, a.accountId);
      const page = (await get(stack, '/console/keys', s.cookie)).text;
      for (const scope of ['read', 'write', 'ai']) expect(page, scope).to.contain(`value="${scope}" checked>`);
      for (const scope of ['drive:read', 'drive:write']) expect(page, scope).to.contain(`value="${scope}">`);
    });

    it('when a sign-in POST comes from another site, then it answers 403, sets no cookie and leaves the link unspent', async () => {
      const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(a.accountId).issue();
      const crossSite = await post(stack, '/console/sign-in', { token: tokenOf(url) }, undefined, {
        'sec-fetch-site': 'cross-site',
      });
      expect(crossSite.status).to.equal(403);
      expect(crossSite.setCookie).to.be.empty;
      const otherOrigin = await post(stack, '/console/sign-in', { token: tokenOf(url) }, undefined, {
        origin: 'https://attacker.example',
      });
      expect(otherOrigin.status).to.equal(403);
      expect(
        (await post(stack, '/console/sign-in', { token: tokenOf(url) }, undefined, { origin: 'null' })).status,
      ).to.equal(403);
      const same = await post(stack, '/console/sign-in', { token: tokenOf(url) }, undefined, {
        'sec-fetch-site': 'same-origin',
        origin: origin(stack),
      });
      expect(same.status).to.equal(303);
      expect(same.setCookie.join()).to.contain('console_session=');
    });

    it('when a signed-in form POST names another origin or site, then it answers 403 and changes nothing', async () => {
      const s = await signIn(stack, a.accountId);
      const before = await stack.db.apiKeys.countDocuments({ accountId: a.accountId });
      const form = { name: 'cross', scopes: 'read', _csrf: s.csrf };
      expect((await post(stack, '/console/keys', form, s.cookie, { origin: 'http://evil.example' })).status).to.equal(
        403,
      );
      expect((await post(stack, '/console/keys', form, s.cookie, { 'sec-fetch-site': 'same-site' })).status).to.equal(
        403,
      );
      expect(await stack.db.apiKeys.countDocuments({ accountId: a.accountId })).to.equal(before);
      expect(
        (await post(stack, '/console/keys', form, s.cookie, { origin: origin(stack), 'sec-fetch-site': 'same-origin' }))
          .status,
      ).to.equal(201);
    });

    it('when an account has more calls than the usage cap, then the overview counts the newest ones exactly and says so under the chart', async () => {
      const app = express();
      app.use(requestId);
      app.use(
        '/console',
        consoleRoutes(
          stack.rt,
          {
            audit: createAuditRecorder({
              store: stack.rt.store,
              health: stack.rt.dbHealth,
              amqp: stack.rt.amqp,
              log: stack.rt.log,
              prefix: stack.config.QUEUE_PREFIX,
            }),
          },
          { usageScanCap: 5 },
        ),
      );
      const server = app.listen(0, '127.0.0.1');
      await once(server, 'listening');
      try {
        const capped = { ...stack, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1` };
        const c = await stack.createAccount();
        const now = Date.now();
        const day = (t: number) => new Date(t).toISOString().slice(0, 10);
        // 3 calls today, 3 two days ago: the newest 5 are today's 3 and 2 of the older day.
        await stack.db.audit.insertMany(
          [0, 1, 2, 2 * 86_400_000, 2 * 86_400_000 + 1, 2 * 86_400_000 + 2].map((ago, i) => ({
            _id: `aud_cap${i}`,
            at: new Date(now - ago),
            accountId: c.accountId,
            keyId: c.keyId,
            method: 'GET',
            route: '/api/v1/account',
            status: 200,
            durationMs: 1,
            millicreditsCharged: 0,
            requestId: `req_cap${i}`,
          })),
        );
        const s = await signIn(capped, c.accountId);
        const page = await get(capped, '/console', s.cookie);
        expect(page.status).to.equal(200);
        expect(page.text).to.contain('Request counts cover the newest 5 calls').and.contain('<b>5+</b>');
        expect(page.text)
          .to.contain(`${day(now)}: 3 requests`)
          .and.contain(`${day(now - 2 * 86_400_000)}: 2 requests`);
        const uncapped = await get(stack, '/console', (await signIn(stack, c.accountId)).cookie);
        expect(uncapped.text).not.to.contain('usage-capped');
        expect(uncapped.text).to.contain(`${day(now - 2 * 86_400_000)}: 3 requests`);
      } finally {
        server.close();
      }
    });

    it('when two views ask for usage at once, then they share one count, and a view within the minute reuses it', async () => {
      const queries = createConsoleQueries(stack.rt.store);
      const c = await stack.createAccount();
      const first = queries.forAccount(c.accountId).dailyUsage();
      expect(queries.forAccount(c.accountId).dailyUsage()).to.equal(first);
      const usage = await first;
      await stack.db.audit.insertOne({
        _id: 'aud_cache0',
        at: new Date(),
        accountId: c.accountId,
        keyId: c.keyId,
        method: 'GET',
        route: '/api/v1/account',
        status: 200,
        durationMs: 1,
        millicreditsCharged: 0,
        requestId: 'req_cache0',
      });
      expect(await queries.forAccount(c.accountId).dailyUsage()).to.equal(usage);
      expect(await createConsoleQueries(stack.rt.store).forAccount(c.accountId).dailyUsage()).to.have.nested.property(
        'days[29].requests',
        1,
      );
    });
  });
});

describe('developer console behind https', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      workers: false,
      scheduler: false,
      env: { PUBLIC_BASE_URL: 'https://console.example.test' },
    });
  });
  after(async () => stack?.stop());

  it('when PUBLIC_BASE_URL is https, then the session cookie is Secure', async () => {
    const { accountId } = await stack.createAccount();
    const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(accountId).issue();
    expect(url).to.match(/^https:\/\/console\.example\.test\/console\/sign-in\?token=/);
    const r = await post(stack, '/console/sign-in', { token: tokenOf(url) });
    expect(r.setCookie.find((c) => c.startsWith('console_session='))).to.match(/; Secure/i);
    expect(sessionCookie(r)).to.match(/^console_session=[A-Za-z0-9_-]{43}$/);
  });
});
