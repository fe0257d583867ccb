import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createSignInLinks } from '../../platform/console/sessions.repository';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { createDeliveriesRepository } from '../../platform/webhooks/deliveries.repository';
import { client, waitForJob } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

const SHOTS = path.resolve('test-artifacts/console');

/** Debian's chromium (scripts/services.sh installs it), or null when this machine has none. */
function chromiumPath(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

describe('developer console in headless Chromium', function () {
  this.timeout(120_000);
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  const cspErrors: string[] = [];

  before(async function () {
    const exe = chromiumPath();
    if (!exe) {
      console.log('    (skipped: chromium is not installed; scripts/services.sh installs it)');
      return this.skip();
    }
    mkdirSync(SHOTS, { recursive: true });
    // The song pool (local synthesiser) gives the jobs page a real job with a signed output URL.
    stack = await startStack({ scheduler: false, env: { WORKER_POOLS: 'song', ALLOW_LOOPBACK_URLS: 'true' } });
    browser = await chromium.launch({ executablePath: exe, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (m) => m.type() === 'error' && cspErrors.push(m.text()));
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  it('when an owner signs in, creates a key, uses it, finds the call in the audit log and revokes it, then the next call is refused with 401', async () => {
    const { accountId, key: firstKey } = await stack.createAccount();
    // A webhook that was disabled after failed deliveries, for the webhooks page.
    const hook = (
      await client(stack.baseUrl, firstKey).post('/webhooks', {
        name: 'build notifier',
        url: 'http://127.0.0.1:9/hook',
        events: ['song.completed'],
      })
    ).body as { id: string };
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
    await createDeliveriesRepository(stack.rt.store).record({
      accountId,
      webhookId: hook.id,
      eventId: 'whd_demo',
      event: 'song.completed',
      attempt: 1,
      outcome: 'failed',
      statusCode: null,
      durationMs: 3,
      responseExcerpt: null,
      error: 'connect ECONNREFUSED',
      nextAttemptAt: null,
      redelivered: false,
      at: new Date(),
    });

    // Sign in with the link the script prints.
    const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(accountId).issue();
    await page.goto(url);
    await shot('sign-in');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/console$/);
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'console_session')).to.include({
      httpOnly: true,
      sameSite: 'Lax',
      path: '/console',
    });

    // Create a key: the full key is on the page once, and nowhere in the browser's storage.
    await page.goto(`${new URL(url).origin}/console/keys`);
    await page.fill('#name', 'browser test');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#new-key-value').textContent())!.trim();
    expect(key).to.match(/^svc_/);
    await shot('keys-created');
    expect(JSON.stringify(await page.context().cookies())).not.to.contain(key);
    expect(
      await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })),
    ).not.to.contain('svc_');

    // Use it against the API.
    const api = client(stack.baseUrl, key);
    expect((await api.get('/account')).status).to.equal(200);
    const song = await api.post('/songs', { style: 'upbeat synth pop', tier: 'fast' });
    expect(song.status).to.equal(202);
    expect((await waitForJob(api, song.body.jobId)).status).to.equal('complete');

    // See the call in the audit log, filtered by the new key.
    await page.goto(`${new URL(url).origin}/console/audit`);
    await page.selectOption('#keyId', { label: `browser test (${key.slice(0, 10)}…)` });
    await page.getByRole('button', { name: 'Filter' }).click();
    const rows = page.locator('#audit tbody tr');
    expect(await rows.allTextContents()).to.satisfy((t: string[]) =>
      t.some((r) => r.includes('/api/v1/account') && r.includes('200')),
    );
    expect((await rows.allTextContents()).some((r) => r.includes('/api/v1/songs') && r.includes('202'))).to.equal(true);
    await shot('audit');

    // Credits, jobs (with the signed output link), webhooks (re-enable), overview chart.
    await page.goto(`${new URL(url).origin}/console/credits`);
    expect(await page.locator('table').first().textContent()).to.contain('song');
    await shot('credits');
    await page.goto(`${new URL(url).origin}/console/jobs`);
    const audio = page.locator('a', { hasText: 'audioUrl' });
    const href = (await audio.getAttribute('href'))!;
    expect(href).to.match(/\/api\/v1\/assets\/.+\?exp=\d+&sig=/);
    expect((await fetch(href)).status).to.equal(200);
    await shot('jobs');
    await page.goto(`${new URL(url).origin}/console/webhooks`);
    await page.getByRole('link', { name: 'build notifier' }).click();
    expect(await page.textContent('main')).to.contain('ECONNREFUSED');
    await shot('webhooks');
    await page.getByRole('button', { name: 'Re-enable' }).click();
    expect(await page.locator('main table').first().textContent()).to.contain('active');
    await page.goto(`${new URL(url).origin}/console`);
    expect(await page.locator('figure.chart rect.bar').count()).to.equal(30);
    await shot('overview');

    // Revoke it: the next call is refused.
    await page.goto(`${new URL(url).origin}/console/keys`);
    await page.locator('tr', { hasText: 'browser test' }).getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(/\/console\/keys$/);
    expect(await page.locator('tr', { hasText: 'browser test' }).textContent()).to.contain('revoked');
    await shot('keys-revoked');
    expect((await api.get('/account')).status).to.equal(401);

    // Sign out: back to the explanation.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/console\/sign-in$/);
    expect(await page.textContent('main')).to.contain('npm run console:link');
    expect(cspErrors, cspErrors.join('\n')).to.be.empty;
  });
});
