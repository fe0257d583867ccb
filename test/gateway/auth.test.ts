import { expect } from 'chai';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('authentication and scopes', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
  });
  after(() => stack.stop());

  it('when no key is sent, then 401 unauthorized', async () => {
    const r = await client(stack.baseUrl).get('/account');
    expect(r.status).to.equal(401);
    expect(r.body.error.code).to.equal('unauthorized');
  });

  it('when the key is unknown or malformed, then 401', async () => {
    for (const auth of [`Bearer svc_${'A'.repeat(43)}`, 'Bearer nope', 'Basic abc', 'Bearer']) {
      const r = await client(stack.baseUrl).get('/account', { authorization: auth });
      expect(r.status, auth).to.equal(401);
    }
  });

  it('when a key is created, then it is svc_ plus 32 random bytes and only its hash is stored', async () => {
    const { key, keyId } = await stack.createAccount();
    expect(key).to.match(/^svc_[A-Za-z0-9_-]{43}$/);
    const doc = await stack.db.apiKeys.findOne({ _id: keyId });
    expect(JSON.stringify(doc)).not.to.include(key.slice(4));
    expect(doc!.hash).to.match(/^[0-9a-f]{64}$/);
  });

  it('when a key is revoked, then the very next request is refused', async () => {
    const { key, keyId, accountId } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    expect((await api.get('/account')).status).to.equal(200);
    await stack.rt.accounts.forAccount(accountId).revokeKey(keyId);
    const r = await api.get('/account');
    expect(r.status).to.equal(401);
    expect(r.body.error.message).to.include('revoked');
  });

  it('when the plan has no API access, then 403 plan_required; Pro and Teams pass', async () => {
    const free = await stack.createAccount({ plan: 'free' });
    const r = await client(stack.baseUrl, free.key).get('/account');
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal('plan_required');
    const teams = await stack.createAccount({ plan: 'teams' });
    expect((await client(stack.baseUrl, teams.key).get('/account')).status).to.equal(200);
  });

  it('when the key lacks the scope, then 403 forbidden naming what is needed', async () => {
    const { key } = await stack.createAccount({ scopes: ['read'] });
    const r = await client(stack.baseUrl, key).post('/code-builds', { prompt: 'x' });
    expect(r.status).to.equal(403);
    expect(r.body.error.code).to.equal('forbidden');
    expect(r.body.error.message).to.include('needs ai');
  });

  it('when an endpoint takes "read or ai", then either scope suffices and neither alone is needed', async () => {
    for (const scopes of [['read'], ['ai']] as const) {
      const { key } = await stack.createAccount({ scopes: [...scopes] });
      const r = await client(stack.baseUrl, key).get('/jobs/code_doesnotexist');
      expect(r.status, scopes.join()).to.equal(404);
    }
    const { key } = await stack.createAccount({ scopes: ['write'] });
    expect((await client(stack.baseUrl, key).get('/jobs/code_doesnotexist')).status).to.equal(403);
  });

  it('when a drive-only key reads the account, then 403 (drive scopes are opt-in and separate)', async () => {
    const { key } = await stack.createAccount({ scopes: ['drive:read', 'drive:write'] });
    expect((await client(stack.baseUrl, key).get('/account')).status).to.equal(403);
  });

  it('when GET /account is called, then it names the account, plan, features and key without the secret', async () => {
    const { key, accountId, keyId } = await stack.createAccount({ plan: 'teams', features: { premiumVideo: true } });
    const r = await client(stack.baseUrl, key).get('/account');
    expect(r.body).to.include({ id: accountId, plan: 'teams', apiAccess: true });
    expect(r.body.features.premiumVideo).to.equal(true);
    expect(r.body.key.id).to.equal(keyId);
    expect(r.text).not.to.include(key);
  });
});
