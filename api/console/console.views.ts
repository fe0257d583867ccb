import { SCOPES, type Scope } from '../../contracts/registry';
import type { Webhook, WebhookDelivery } from '../../contracts/webhooks';
import { addCredits, fromUnits } from '../../platform/credits/credits';
import type { Page } from '../../platform/infra/lists';
import type { ApiKeyDoc, JobDoc, LedgerDoc } from '../../platform/infra/mongo';
import { usageChart } from './console.chart';
import { AUDIT_DAYS, type AuditFilter, type AuditPage, type Usage } from '../../platform/console/console.repository';
import { AUDIT_ROUTES } from './audit-routes';
import { html, type Html } from './html';

/** Who is signed in, as every page's frame needs it. */
export interface Viewer {
  accountId: string;
  accountName: string;
  csrf: string;
}

const NAV = [
  ['/console', 'Overview'],
  ['/console/keys', 'API keys'],
  ['/console/audit', 'Usage & audit log'],
  ['/console/credits', 'Credits'],
  ['/console/webhooks', 'Webhooks'],
  ['/console/jobs', 'Jobs'],
] as const;

const when = (d: Date | string | null | undefined) =>
  d ? `${new Date(d).toISOString().replace('T', ' ').slice(0, 19)} UTC` : '—';

/** The hidden CSRF field every form of a signed-in page carries. */
export const csrfField = (v: Viewer) => html`<input type="hidden" name="_csrf" value="${v.csrf}">`;

/** The page frame: head, top bar with the navigation and sign-out, the content. */
export function layout(title: string, body: Html, opts: { viewer?: Viewer; active?: string } = {}): Html {
  const v = opts.viewer;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Developer console</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/console/assets/console.css"></head>
<body><header class="top"><div class="wrap"><span class="brand">Developer console</span>
${
  v
    ? html`<nav>${NAV.map(([href, label]) => html`<a href="${href}"${opts.active === href ? html` class="active" aria-current="page"` : ''}>${label}</a>`)}</nav>
<span class="account" title="${v.accountId}">${v.accountName}</span>
<form method="post" action="/console/sign-out">${csrfField(v)}<button type="submit">Sign out</button></form>`
    : ''
}
</div></header>
<main class="wrap">${body}</main></body></html>`;
}

/** Shown to a visitor without a session: how to get a sign-in link. */
export const signInHelp = (notice?: string) =>
  layout(
    'Sign in',
    html`<div class="signin card"><h1>Sign in to the developer console</h1>
${notice ? html`<div class="error">${notice}</div>` : ''}
<p>The console has no passwords. An operator of this service prints a one-time sign-in link for an account:</p>
<pre class="card mono">npm run console:link -- --account &lt;account id&gt;</pre>
<p class="muted">Without <code>--account</code> the link is for the development account. A link works once and expires after a few minutes; open it in this browser.</p></div>`,
  );

/** The sign-in link's landing page: one button, so link scanners that only GET cannot spend the link. */
export const signInConfirm = (token: string) =>
  layout(
    'Sign in',
    html`<div class="signin card"><h1>Sign in to the developer console</h1>
<p>This one-time link signs this browser in. It cannot be used again.</p>
<form method="post" action="/console/sign-in"><input type="hidden" name="token" value="${token}"><button type="submit">Sign in</button></form></div>`,
  );

/** An error page (404 for another account's ids, 400 for bad input, 403 for a missing CSRF token). */
export const errorPage = (status: number, message: string, viewer?: Viewer) =>
  layout(
    `Error ${status}`,
    html`<h1>${status === 404 ? 'Not found' : status === 403 ? 'Forbidden' : 'Something is not right'}</h1>
<div class="error">${message}</div><p><a href="/console">Back to the overview</a></p>`,
    { viewer },
  );

const count = (n: number) => n.toLocaleString('en-US');

/** What the chart leaves out when a scan cap cut it short (platform/console/console.repository.ts dailyUsage). */
const capNotes = (u: Usage): Html[] =>
  [
    u.requestsCappedAt !== null
      ? html`Request counts cover the newest ${count(u.requestsCappedAt)} calls of the period.`
      : null,
    u.creditsCappedAt !== null
      ? html`Credit figures cover the newest ${count(u.creditsCappedAt)} ledger entries of the period.`
      : null,
  ].filter((x): x is Html => x !== null);

export function overviewPage(
  v: Viewer,
  d: { plan: string; balance: number; activeKeys: number; usage: Usage; jobs: Omit<JobDoc, 'input'>[] },
): Html {
  const requests = d.usage.days.reduce((n, x) => n + x.requests, 0);
  const credits = addCredits(...d.usage.days.map((x) => x.credits)); // exact, in millicredits
  const notes = capNotes(d.usage);
  return layout(
    'Overview',
    html`<h1>Overview</h1>
<div class="stats"><div class="stat"><span class="muted">Plan</span><b>${d.plan}</b></div>
<div class="stat"><span class="muted">Credit balance</span><b>${d.balance}</b></div>
<div class="stat"><span class="muted">Active keys</span><b>${d.activeKeys}</b></div>
<div class="stat"><span class="muted">Requests, 30 days</span><b>${requests}${d.usage.requestsCappedAt !== null ? '+' : ''}</b></div>
<div class="stat"><span class="muted">Credits spent, 30 days</span><b>${credits}${d.usage.creditsCappedAt !== null ? '+' : ''}</b></div></div>
<h2>Requests and credits per day</h2>${usageChart(d.usage.days)}${notes.length ? html`<p class="muted" id="usage-capped">${notes.map((n) => html`${n} `)}Older ones are not counted here; the audit log and the credits page list them all.</p>` : ''}
<h2>Recent jobs</h2>${jobsTable(d.jobs.slice(0, 5))}<p><a href="/console/jobs">All recent jobs</a></p>`,
    { viewer: v, active: '/console' },
  );
}

const statusBadge = (s: number) => html`<span class="badge ${s >= 500 ? 'bad' : s >= 400 ? 'warn' : 'ok'}">${s}</span>`;

/** Scopes the create-key form starts with: Drive access is opt-in (SPEC 5.3), so its scopes start unchecked. */
export const DEFAULT_FORM_SCOPES: readonly Scope[] = ['read', 'write', 'ai'];

export function keysPage(
  v: Viewer,
  d: {
    keys: ApiKeyDoc[];
    created?: { key: string; doc: ApiKeyDoc };
    error?: string;
    form?: { name?: string; scopes?: string[]; folderPins?: string };
  },
): Html {
  const checked = new Set(d.form?.scopes ?? DEFAULT_FORM_SCOPES);
  return layout(
    'API keys',
    html`<h1>API keys</h1>
${
  d.created
    ? html`<div class="secret" id="new-key"><strong>New key “${d.created.doc.name}” created.</strong> Copy it now: it is shown this once and stored only as a hash.
<code id="new-key-value">${d.created.key}</code></div>`
    : ''
}
${d.error ? html`<div class="error">${d.error}</div>` : ''}
<table><thead><tr><th>Name</th><th>Prefix</th><th>Id</th><th>Scopes</th><th>Drive pins</th><th>Created</th><th>Status</th><th></th></tr></thead><tbody>
${
  d.keys.length
    ? d.keys.map(
        (
          k,
        ) => html`<tr><td>${k.name}</td><td class="mono">${k.prefix}…</td><td class="mono">${k._id}</td><td>${k.scopes.join(', ')}</td>
<td class="mono">${k.folderPins?.length ? k.folderPins.join(', ') : html`<span class="muted">whole Drive</span>`}</td><td class="when">${when(k.createdAt)}</td>
<td>${k.revokedAt ? html`<span class="badge bad">revoked ${when(k.revokedAt)}</span>` : html`<span class="badge ok">active</span>`}</td>
<td>${k.revokedAt ? '' : html`<form class="inline" method="post" action="/console/keys/${k._id}/revoke">${csrfField(v)}<button class="danger" type="submit">Revoke</button></form>`}</td></tr>`,
      )
    : html`<tr><td colspan="8" class="muted">No keys yet.</td></tr>`
}
</tbody></table>
<h2>Create a key</h2>
<form class="card" method="post" action="/console/keys">${csrfField(v)}
<label for="name">Name</label><input type="text" id="name" name="name" required maxlength="100" value="${d.form?.name ?? ''}" placeholder="e.g. production server">
<label>Scopes</label>${SCOPES.map((s) => html`<label class="check"><input type="checkbox" name="scopes" value="${s}"${checked.has(s) ? html` checked` : ''}> ${s}</label>`)}
<label for="folderPins">Drive folder pins <span class="muted">(optional: folder ids, comma-separated; the key then sees only those folders)</span></label>
<input type="text" id="folderPins" name="folderPins" value="${d.form?.folderPins ?? ''}" placeholder="dfo_…">
<p><button type="submit">Create key</button></p></form>`,
    { viewer: v, active: '/console/keys' },
  );
}

/** A query string of the audit filters plus extra parameters, for links that keep the filters. */
const auditQuery = (f: AuditFilter, extra: Record<string, string>) =>
  new URLSearchParams(
    Object.entries({ keyId: f.keyId, route: f.route, status: f.status, from: f.from, to: f.to, ...extra }).filter(
      (e): e is [string, string] => !!e[1],
    ),
  ).toString();

export function auditPage(
  v: Viewer,
  d: { page: AuditPage; filter: AuditFilter; keys: ApiKeyDoc[]; error?: string },
): Html {
  const f = d.filter;
  const keyName = new Map(d.keys.map((k) => [k._id, k.name]));
  return layout(
    'Usage & audit log',
    html`<h1>Usage & audit log</h1>
<p class="muted">Every authenticated API call of the last ${AUDIT_DAYS} days: route template, status, duration and credits, never arguments or bodies; and this console's actions (sign-in and sign-out, keys created and revoked, webhooks re-enabled).</p>
${d.error ? html`<div class="error">${d.error}</div>` : ''}
<form class="card filters" method="get" action="/console/audit">
<div><label for="keyId">Key</label><select id="keyId" name="keyId"><option value="">any key</option>${d.keys.map((k) => html`<option value="${k._id}"${f.keyId === k._id ? html` selected` : ''}>${k.name} (${k.prefix}…)</option>`)}</select></div>
<div><label for="route">Route</label><input type="text" id="route" name="route" list="routes" value="${f.route ?? ''}" placeholder="/api/v1/account"><datalist id="routes">${AUDIT_ROUTES.map((r) => html`<option value="${r}">`)}</datalist></div>
<div><label for="status">Status</label><input type="text" id="status" name="status" value="${f.status ?? ''}" placeholder="404 or 5xx"></div>
<div><label for="from">From</label><input type="date" id="from" name="from" value="${f.from ?? ''}"></div>
<div><label for="to">To</label><input type="date" id="to" name="to" value="${f.to ?? ''}"></div>
<div><button type="submit">Filter</button> <a href="/console/audit">Clear</a></div></form>
<table id="audit"><thead><tr><th>Time</th><th>Key</th><th>Method</th><th>Route</th><th>Status</th><th class="num">Duration ms</th><th class="num">Credits</th><th>Request id</th></tr></thead><tbody>
${
  d.page.data.length
    ? d.page.data.map(
        (
          a,
        ) => html`<tr><td class="when">${when(a.at)}</td><td>${keyName.get(a.keyId) ?? ''} <span class="mono muted">${a.keyId}</span></td><td>${a.method}</td>
<td class="mono">${a.route}${a.via === 'mcp' ? html` <span class="badge">MCP ${a.tool ?? ''}</span>` : a.via === 'console' ? html` <span class="badge">console</span>` : ''}</td><td>${statusBadge(a.status)}</td><td class="num">${a.durationMs.toFixed(1)}</td><td class="num">${fromUnits(a.millicreditsCharged)}</td><td class="mono muted id">${a.requestId}</td></tr>`,
      )
    : html`<tr><td colspan="8" class="muted">No calls match.</td></tr>`
}
</tbody></table>
<div class="pager"><span class="muted">${d.page.data.length} calls on this page</span>${d.page.cursor ? html`<a class="button secondary" href="/console/audit?${auditQuery(f, { cursor: d.page.cursor })}">Older →</a>` : ''}${f.cursor ? html`<a href="/console/audit?${auditQuery(f, {})}">Newest</a>` : ''}</div>`,
    { viewer: v, active: '/console/audit' },
  );
}

export function creditsPage(
  v: Viewer,
  d: { plan: string; balance: number; prices: Record<string, number>; ledger: Page<LedgerDoc>; cursor?: string },
): Html {
  return layout(
    'Credits',
    html`<h1>Credits</h1>
<div class="stats"><div class="stat"><span class="muted">Balance</span><b id="balance">${d.balance}</b></div><div class="stat"><span class="muted">Plan</span><b>${d.plan}</b></div></div>
<h2>Ledger</h2>
<table><thead><tr><th>Time</th><th>Kind</th><th>Operation</th><th class="num">Amount</th><th>Job</th><th>State</th></tr></thead><tbody>
${
  d.ledger.data.length
    ? d.ledger.data.map(
        (
          l,
        ) => html`<tr><td class="when">${when(l.at)}</td><td>${l.kind === 'refund' ? html`<span class="badge ok">refund</span>` : html`<span class="badge">charge</span>`}</td><td>${l.operation}</td>
<td class="num">${l.kind === 'refund' ? '+' : '−'}${fromUnits(l.millicredits)}</td><td class="mono">${l.jobId ?? ''}</td><td class="muted">${l.state ?? 'applied'}</td></tr>`,
      )
    : html`<tr><td colspan="6" class="muted">No ledger entries yet.</td></tr>`
}
</tbody></table>
<div class="pager"><span class="muted">${d.ledger.total} entries</span>${d.ledger.cursor ? html`<a class="button secondary" href="/console/credits?cursor=${d.ledger.cursor}">Older →</a>` : ''}${d.cursor ? html`<a href="/console/credits">Newest</a>` : ''}</div>
<h2>Prices</h2>
<table><thead><tr><th>Operation</th><th class="num">Credits</th></tr></thead><tbody>
${Object.entries(d.prices).map(([op, n]) => html`<tr><td class="mono">${op}</td><td class="num">${n}</td></tr>`)}</tbody></table>`,
    { viewer: v, active: '/console/credits' },
  );
}

export function webhooksPage(
  v: Viewer,
  d: { webhooks: Webhook[]; selected?: { webhook: Webhook; deliveries: WebhookDelivery[]; cursor?: string } },
): Html {
  const s = d.selected;
  return layout(
    'Webhooks',
    html`<h1>Webhooks</h1>
<p class="muted">Create and change webhooks over the API (<code>POST /api/v1/webhooks</code>); here you see their deliveries and re-enable one that was disabled.</p>
<table><thead><tr><th>Name</th><th>URL</th><th>Events</th><th>State</th><th>Last delivery</th><th></th></tr></thead><tbody>
${
  d.webhooks.length
    ? d.webhooks.map(
        (
          w,
        ) => html`<tr><td><a href="/console/webhooks/${w.id}">${w.name}</a></td><td class="mono">${w.url}</td><td>${w.events.join(', ')}</td>
<td>${w.isActive ? html`<span class="badge ok">active</span>` : html`<span class="badge bad">disabled (${w.disabledReason ?? ''})</span>`} <span class="muted">${w.consecutiveFailures} failures in a row</span></td>
<td>${when(w.lastDeliveryAt)} ${w.lastDeliveryStatus ?? ''}</td>
<td>${w.isActive ? '' : html`<form class="inline" method="post" action="/console/webhooks/${w.id}/enable">${csrfField(v)}<button type="submit" class="secondary">Re-enable</button></form>`}</td></tr>`,
      )
    : html`<tr><td colspan="6" class="muted">No webhooks.</td></tr>`
}
</tbody></table>
${
  s
    ? html`<h2>Delivery attempts of “${s.webhook.name}”</h2>
<table><thead><tr><th>Time</th><th>Event</th><th>Attempt</th><th>Outcome</th><th>Status</th><th class="num">ms</th><th>Error / response</th><th>Next attempt</th></tr></thead><tbody>
${
  s.deliveries.length
    ? s.deliveries.map(
        (
          x,
        ) => html`<tr><td class="when">${when(x.at)}</td><td>${x.event} <span class="mono muted">${x.eventId}</span></td><td>${x.attempt}${x.redelivered ? ' (redelivered)' : ''}</td>
<td>${x.outcome === 'delivered' ? html`<span class="badge ok">delivered</span>` : html`<span class="badge bad">failed</span>`}</td><td>${x.statusCode ?? '—'}</td><td class="num">${x.durationMs}</td>
<td class="mono">${x.error ?? x.responseExcerpt ?? ''}</td><td>${when(x.nextAttemptAt)}</td></tr>`,
      )
    : html`<tr><td colspan="8" class="muted">No delivery attempts yet.</td></tr>`
}
</tbody></table>${s.cursor ? html`<div class="pager"><a class="button secondary" href="/console/webhooks/${s.webhook.id}?cursor=${s.cursor}">Older →</a></div>` : ''}`
    : ''
}`,
    { viewer: v, active: '/console/webhooks' },
  );
}

/** The http(s) URLs inside a job result (signed asset URLs and the like), labelled by their field path. */
export function outputLinks(
  result: unknown,
  path = '',
  out: { label: string; url: string }[] = [],
): { label: string; url: string }[] {
  if (out.length >= 10) return out;
  if (typeof result === 'string' && /^https?:\/\//.test(result)) out.push({ label: path || 'output', url: result });
  else if (Array.isArray(result)) for (const [i, x] of result.entries()) outputLinks(x, `${path}[${i}]`, out);
  else if (result && typeof result === 'object')
    for (const [k, x] of Object.entries(result)) outputLinks(x, path ? `${path}.${k}` : k, out);
  return out;
}

const jobBadge = (s: string) =>
  html`<span class="badge ${s === 'complete' ? 'ok' : s === 'failed' ? 'bad' : 'warn'}">${s}</span>`;

function jobsTable(jobs: Omit<JobDoc, 'input'>[]): Html {
  return html`<table><thead><tr><th>Job</th><th>Type</th><th>State</th><th>Progress</th><th>Created</th><th>Outputs</th></tr></thead><tbody>
${
  jobs.length
    ? jobs.map(
        (
          j,
        ) => html`<tr><td class="mono">${j._id}</td><td>${j.type}</td><td>${jobBadge(j.status)}</td><td>${j.error ?? j.progressMessage}</td><td class="when">${when(j.createdAt)}</td>
<td>${outputLinks(j.status === 'complete' ? j.result : null).map((l) => html`<a href="${l.url}" rel="noopener noreferrer" target="_blank">${l.label}</a><br>`)}</td></tr>`,
      )
    : html`<tr><td colspan="6" class="muted">No jobs yet.</td></tr>`
}
</tbody></table>`;
}

export const jobsPage = (v: Viewer, jobs: Omit<JobDoc, 'input'>[]) =>
  layout(
    'Jobs',
    html`<h1>Recent jobs</h1><p class="muted">The newest ${jobs.length} jobs; output links are the signed asset URLs the job result holds (they expire, poll <code>GET /api/v1/jobs/{id}</code> for fresh ones).</p>${jobsTable(jobs)}`,
    { viewer: v, active: '/console/jobs' },
  );
